/*
 * fuzz_config.c — libFuzzer target for the machine description parser.
 *
 * Input: YAML bytes. Lines starting with "#set " (YAML comments, so the
 * parse is unaffected) are also applied as --set overrides, which fuzzes
 * the override parser too. A valid description is built into the machine
 * graph when small enough to keep each run fast. Any outcome but a crash,
 * a leak or undefined behaviour is fine. tests/config/test_config_fuzz.c
 * runs this same function over fuzz/corpus/config and mutated inputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_SETS 8

/* Collects "#set ..." lines as NUL-terminated copies in sets[]. */
static size_t collect_sets(const char *text, size_t size, char **sets)
{
    size_t n = 0;
    for (size_t i = 0; i < size && n < FUZZ_MAX_SETS; i++) {
        if ((i == 0 || text[i - 1] == '\n') && size - i > 5 && !memcmp(text + i, "#set ", 5)) {
            size_t end = i + 5;
            while (end < size && text[end] != '\n' && text[end] != '\0')
                end++;
            char *s = malloc(end - i - 4);
            if (!s) break;
            memcpy(s, text + i + 5, end - i - 5);
            s[end - i - 5] = '\0';
            sets[n++] = s;
        }
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *sets[FUZZ_MAX_SETS];
    size_t n_sets = collect_sets((const char *)data, size, sets);
    kb__topo_params p;
    kb__err err;
    kb__err_clear(&err);
    int rc = kb__topo_params_load_string(&p, "fuzz.yaml", (const char *)data, size,
                                         (const char *const *)sets, n_sets, &err);
    if (!rc && kb__topo_pe_total(&p) <= 4096) {
        kb__topo *t;
        if (!kb__topo_build(&t, &p, &err)) kb__topo_destroy(t);
    }
    for (size_t i = 0; i < n_sets; i++)
        free(sets[i]);
    return 0;
}
