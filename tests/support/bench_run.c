/*
 * support/bench_run.c — test helpers: a bench run on a fresh machine.
 */
#include "bench_run.h"

#include <criterion/criterion.h>
#include <string.h>

int kb_test_bench_run(const char *name, const char *const *sets, int no_data, kb_bench_result *r,
                      const char *const *kv)
{
    size_t n_sets = 0;
    while (sets && sets[n_sets])
        n_sets++;
    char err[512];
    kb_machine *m = NULL;
    kb_open_options oo = {NULL, sets, n_sets, no_data, NULL, 0};
    cr_assert_eq(kb_open(&m, &oo, err, sizeof err), 0, "kb_open: %s", err);
    const kb_bench *b = kb_bench_find(name);
    cr_assert_not_null(b, "bench %s is not registered", name);
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    for (int i = 0; kv && kv[i]; i++)
        cr_assert_eq(kb_bench_opts_add(&o, kv[i]), 0, "%s", o.error);
    int rc = kb_bench_run(m, b, &o, no_data, r);
    kb_close(m);
    return rc;
}

double kb_test_bench_figure(const kb_bench_result *r, const char *name)
{
    for (int i = 0; i < r->n_figures && i < KB_BENCH_MAX_FIGURES; i++)
        if (!strcmp(r->figures[i].name, name)) return r->figures[i].value;
    cr_assert_fail("figure %s missing", name);
    return 0;
}

const char *kb_test_bench_note(const kb_bench_result *r, const char *name)
{
    for (int i = 0; i < r->n_notes && i < KB_BENCH_MAX_NOTES; i++)
        if (!strcmp(r->notes[i].name, name)) return r->notes[i].text;
    return NULL;
}
