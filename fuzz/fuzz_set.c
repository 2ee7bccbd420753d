/*
 * fuzz_set.c — libFuzzer target for `--set PATH=VALUE` expressions.
 *
 * Input: text; every line is one override, applied in order to the
 * built-in machine (the same path as `kernbench run --set`, kb_open's
 * overrides): the path lookup and did-you-mean, YAML-flow values, units,
 * ranges, cross-parameter rules and the clock range check. A machine
 * description the overrides leave valid and small is built into its graph.
 * Any outcome but a crash, a hang, a leak or undefined behaviour is fine.
 * tests/config/test_set_fuzz.c runs this same function over
 * fuzz/corpus/set and mutated inputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"

#define FUZZ_SET_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *sets[FUZZ_SET_MAX];
    size_t n = 0;
    for (char *line = text; line && n < FUZZ_SET_MAX;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        sets[n++] = line;
        line = nl ? nl + 1 : NULL;
    }
    kb__topo_params p;
    kb__err err;
    kb__err_clear(&err);
    if (!kb__topo_params_load(&p, NULL, sets, n, &err) && kb__topo_pe_total(&p) <= 1024) {
        kb__topo *t;
        if (!kb__topo_build(&t, &p, &err)) kb__topo_destroy(t);
    }
    free(text);
    return 0;
}
