/*
 * The fuzz target's entry function must survive its corpus and a few
 * hundred deterministic mutations of configs/topology.yaml (byte flips,
 * deletions, insertions of YAML-significant characters, truncations).
 * Errors are fine; crashes, leaks and UB (under the sanitizer build) fail.
 */
#include <criterion/criterion.h>

#include "../../fuzz/fuzz_config.c"
#include "support/files.h"

Test(config_fuzz, corpus_files_do_not_crash)
{
    kb_test_fuzz_corpus(KB_SOURCE_DIR "/fuzz/corpus/config", LLVMFuzzerTestOneInput, 10);
}

Test(config_fuzz, mutations_of_the_default_file_do_not_crash)
{
    kb_test_fuzz_mutations(KB_SOURCE_DIR "/configs/topology.yaml", 0x9e3779b97f4a7c15ull, 300,
                           LLVMFuzzerTestOneInput);
}
