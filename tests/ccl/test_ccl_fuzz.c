/*
 * The ccl.yaml fuzz target's entry function must survive its corpus and a
 * few hundred deterministic mutations of configs/ccl.yaml (byte flips,
 * deletions, insertions of YAML-significant characters, truncations).
 * Errors are fine; crashes, leaks and UB (under the sanitizer build) fail.
 */
#include <criterion/criterion.h>

#include "../../fuzz/fuzz_ccl.c"
#include "support/files.h"

Test(ccl_fuzz, corpus_files_do_not_crash)
{
    kb_test_fuzz_corpus(KB_SOURCE_DIR "/fuzz/corpus/ccl", LLVMFuzzerTestOneInput, 10);
}

Test(ccl_fuzz, mutations_of_the_shipped_file_do_not_crash)
{
    kb_test_fuzz_mutations(KB_SOURCE_DIR "/configs/ccl.yaml", 0x2545f4914f6cdd1dull, 300,
                           LLVMFuzzerTestOneInput);
}
