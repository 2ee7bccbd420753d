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

#include "fuzz_sets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *sets[FUZZ_MAX_SETS];
    size_t n_sets = fuzz_sets_collect((const char *)data, size, sets);
    kb__topo_params p;
    kb__err err;
    kb__err_clear(&err);
    int rc = kb__topo_params_load_string(&p, "fuzz.yaml", (const char *)data, size,
                                         (const char *const *)sets, n_sets, &err);
    if (!rc && kb__topo_pe_total(&p) <= 4096) {
        kb__topo *t;
        if (!kb__topo_build(&t, &p, &err)) kb__topo_destroy(t);
    }
    fuzz_sets_free(sets, n_sets);
    return 0;
}
