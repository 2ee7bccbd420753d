/*
 * The fuzz target for the command line of every command (fuzz/fuzz_cli.c)
 * must survive its corpus and 300 deterministic mutations of one seed
 * (byte flips, deletions, insertions, truncations): usage errors are fine;
 * crashes, leaks, hangs, UB (under the sanitizer builds) and a status
 * other than 0, 1 or 2 fail. The same inputs run under libFuzzer in CI
 * (.ci/run, docs/reliability.md). Also: the checks give the commands'
 * documented statuses for a few command lines.
 */
#include <criterion/criterion.h>

#include "../../fuzz/fuzz_cli.c"
#include "support/files.h"

Test(cli_fuzz, corpus_files_do_not_crash)
{
    kb_test_fuzz_corpus(KB_SOURCE_DIR "/fuzz/corpus/cli", LLVMFuzzerTestOneInput, 10);
}

Test(cli_fuzz, mutations_of_a_seed_do_not_crash)
{
    kb_test_fuzz_mutations(KB_SOURCE_DIR "/fuzz/corpus/cli/sweep_ok.txt", 0x9e3779b97f4a7c15ull,
                           300, LLVMFuzzerTestOneInput);
}

static int check(int (*fn)(int, char **), const char *const *args)
{
    char *argv[16];
    int argc = 0;
    while (args[argc]) {
        argv[argc] = (char *)args[argc];
        argc++;
    }
    argv[argc] = NULL;
    return fn(argc, argv);
}

Test(cli_fuzz, the_checks_give_the_commands_statuses)
{
    cr_assert_eq(check(kb__cli_run_check, (const char *[]){"run", "--bench", "matmul", "--opt",
                                                           "m=64", "--max-memory", "1GiB", NULL}),
                 KB_CLI_OK);
    cr_assert_eq(check(kb__cli_run_check, (const char *[]){"run", "--bench", "qkv_gem", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_run_check, (const char *[]){"run", "--device", "sip:x", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_run_check, (const char *[]){"run", "--trace-max", "0", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_probe_check, (const char *[]){"probe", "--bytes", "0", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_probe_check, (const char *[]){"probe", "--case", "pe-local-hbm",
                                                             "--max-memory", "none", NULL}),
                 KB_CLI_OK);
    cr_assert_eq(
        check(kb__cli_sweep_check, (const char *[]){"sweep", "run", "--sweep", "m=64,128", NULL}),
        KB_CLI_OK);
    cr_assert_eq(check(kb__cli_sweep_check,
                       (const char *[]){"sweep", "run", "--sweep", "gruop_m=1,2", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_sweep_check, (const char *[]){"sweep", NULL}), KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_config_check,
                       (const char *[]){"config", "--topology", "a.yaml", "--ccl", "b.yaml", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_web_check, (const char *[]){"web", "--port", "0", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_web_check, (const char *[]){"web", "--port", "8080", NULL}),
                 KB_CLI_OK);
    cr_assert_eq(check(kb__cli_topo_check, (const char *[]){"topo", "--topolgy", "x", NULL}),
                 KB_CLI_USAGE);
    cr_assert_eq(check(kb__cli_list_check, (const char *[]){"list", NULL}), KB_CLI_OK);
}
