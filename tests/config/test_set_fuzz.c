/*
 * The fuzz target for --set expressions (fuzz/fuzz_set.c) must survive its corpus and
 * 300 deterministic mutations of one seed (byte flips, deletions,
 * insertions, truncations). Errors are fine; crashes, leaks, hangs and UB
 * (under the sanitizer builds) fail. The same inputs run under libFuzzer
 * in CI (.ci/run, docs/reliability.md).
 */
#include <criterion/criterion.h>

#include "../../fuzz/fuzz_set.c"
#include "support/files.h"

Test(set_fuzz, corpus_files_do_not_crash)
{
    kb_test_fuzz_corpus(KB_SOURCE_DIR "/fuzz/corpus/set", LLVMFuzzerTestOneInput, 10);
}

Test(set_fuzz, mutations_of_a_seed_do_not_crash)
{
    kb_test_fuzz_mutations(KB_SOURCE_DIR "/fuzz/corpus/set/small_machine.txt",
                           0x9e3779b97f4a7c15ull, 300, LLVMFuzzerTestOneInput);
}
