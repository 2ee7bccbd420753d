/*
 * fuzz_ccl.c — libFuzzer target for the ccl.yaml parser.
 *
 * Input: YAML bytes. Lines starting with "#set " (YAML comments, so the
 * parse is unaffected) are applied as "ccl." overrides. A valid file has
 * every algorithm resolved against the built-in machine at a few world
 * sizes and, when that succeeds, planned and printed. Any outcome but a
 * crash, a leak or undefined behaviour is fine. tests/ccl/test_ccl_fuzz.c
 * runs this same function over fuzz/corpus/ccl and mutated inputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/plan.h"

#include "fuzz_sets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const kb__ccl_config *c, const kb__topo_params *p)
{
    static const uint32_t worlds[] = {0, 1, 7, 16};
    kb__err err;
    for (size_t i = 0; i < c->n_algos; i++)
        for (size_t k = 0; k < sizeof worlds / sizeof *worlds; k++) {
            kb__ccl_resolved r;
            kb__ccl_plan *pl;
            if (kb__ccl_resolve(&c->algos[i], p, worlds[k], &r, &err)) continue;
            if (kb__ccl_plan_build(&pl, p, &r, &err)) continue;
            char buf[512];
            kb__ccl_plan_format(pl, buf, sizeof buf);
            kb__ccl_plan_destroy(pl);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *sets[FUZZ_MAX_SETS];
    size_t n_sets = fuzz_sets_collect((const char *)data, size, sets);
    kb__ccl_config *c;
    kb__err err;
    kb__err_clear(&err);
    if (!kb__ccl_config_load_string(&c, "fuzz.yaml", (const char *)data, size,
                                    (const char *const *)sets, n_sets, &err)) {
        kb__topo_params p;
        kb__topo_params_default(&p);
        exercise(c, &p);
        kb__ccl_config_destroy(c);
    }
    fuzz_sets_free(sets, n_sets);
    return 0;
}
