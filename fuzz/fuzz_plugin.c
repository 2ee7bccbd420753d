/*
 * fuzz_plugin.c — libFuzzer target for plug-in bench descriptors and the
 * `--opt key=value` pairs handed to them.
 *
 * Input: a header byte (n_opts as a signed byte: negative and too many
 * included; flags making the name, run function or opts array NULL), then
 * NUL-separated strings: the bench name, then key, default and help of
 * each option (a string "\x01" stands for NULL), then `key=value` lines.
 * The descriptor is checked with kb_bench_validate exactly as `kernbench
 * run --bench ./x.so` checks a loaded plug-in; a valid one runs through
 * kb_bench_run on a one-PE timing-only machine, and its run function reads
 * every declared option with the typed getters (ranges from the input).
 * Errors are fine; a crash, a hang, a leak or undefined behaviour is a
 * finding. tests/benches/test_plugin_fuzz.c runs this same function over
 * fuzz/corpus/plugin and mutated inputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/bench.h"

#define MAX_DOCS 48

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every declared option with a getter chosen by its index. */
static int run_reading_options(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    (void)m;
    int64_t i64;
    double f64;
    int b;
    for (int i = 0; i < o->n; i++) {
        const char *key = o->kv[i].key;
        switch (i % 4) {
        case 0:
            kb_bench_opt_i64(o, key, 0, INT64_MIN, INT64_MAX, &i64);
            break;
        case 1:
            kb_bench_opt_i64(o, key, 1, -3, 1 << 20, &i64);
            break;
        case 2:
            kb_bench_opt_f64(o, key, 0.5, &f64);
            break;
        default:
            kb_bench_opt_bool(o, key, 0, &b);
            (void)kb_bench_opt_str(o, key, "");
        }
    }
    kb_bench_figure(r, "options", o->n, "");
    return o->error[0] ? KB_EINVAL : 0;
}

/* The next NUL-terminated string of [*p, end), or NULL past the end;
 * "\x01" stands for a NULL pointer (*null set). */
static const char *next_str(const char **p, const char *end, int *null)
{
    *null = 0;
    if (*p >= end) return NULL;
    const char *s = *p;
    const char *z = memchr(s, '\0', (size_t)(end - s));
    if (!z) return NULL;
    *p = z + 1;
    if (s[0] == '\x01' && s[1] == '\0') *null = 1;
    return s;
}

static kb_machine *tiny_machine(void)
{
    /* opened once for the whole fuzzing run: opening is the slow part */
    static kb_machine *m;
    static const char *const sets[] = {"system.sips=1", "sip.cube_mesh=1x1",
                                       "cube.pe_layout.corners=1", "cube.pe_layout.pe_per_corner=1",
                                       "cube.hbm.slices=1"};
    if (!m) {
        kb_open_options o = {NULL, sets, sizeof sets / sizeof *sets, 1, NULL, 0};
        char eb[512];
        if (kb_open(&m, &o, eb, sizeof eb)) abort();
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint8_t flags = data[1];
    int n_opts = (int8_t)data[0];
    /* a NUL-terminated copy, so a string never runs off the input */
    char *text = malloc(size - 1);
    if (!text) return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';
    const char *p = text, *end = text + size - 1;
    int null;
    const char *name = next_str(&p, end, &null);
    if (null || (flags & 1)) name = NULL;
    kb_bench_opt_doc docs[MAX_DOCS];
    int n_docs = 0;
    for (; n_docs < MAX_DOCS && n_docs < (n_opts > 0 ? n_opts : 0); n_docs++) {
        const char *f[3];
        for (int j = 0; j < 3; j++) {
            f[j] = next_str(&p, end, &null);
            if (null || !f[j]) f[j] = NULL;
        }
        docs[n_docs] = (kb_bench_opt_doc){f[0], f[1], f[2]};
    }
    /* n_opts past MAX_DOCS is refused by the validator before any entry is read */
    kb_bench b = {name, "fuzzed", (flags & 2) ? NULL : docs, n_opts,
                  (flags & 4) ? NULL : run_reading_options};
    char msg[KB_BENCH_MSG_MAX];
    if (!kb_bench_validate(&b, msg, sizeof msg)) {
        kb_bench_opts o;
        kb_bench_opts_init(&o);
        const char *kv;
        while ((kv = next_str(&p, end, &null)) && !null)
            if (kb_bench_opts_add(&o, kv)) break;
        kb_bench_result *r = malloc(sizeof *r);
        if (r) {
            kb_bench_run(tiny_machine(), &b, &o, 1, r);
            free(r);
        }
    }
    free(text);
    return 0;
}
