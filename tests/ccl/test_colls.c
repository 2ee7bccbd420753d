/*
 * The table of collectives (ccl/colls.h): one row per collective, its name
 * found again by the ccl.yaml loader, the public call named after it, and
 * the output-size rule against its closed form (N/p, p·N, N).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ccl/colls.h"

Test(colls, one_named_row_per_collective_found_by_name)
{
    const char *names[KB__CCL_COLLECTIVE_COUNT];
    kb__ccl_coll_names(names);
    for (int k = 0; k < KB__CCL_COLLECTIVE_COUNT; k++) {
        const kb__ccl_coll_desc *d = kb__ccl_coll(k);
        cr_assert_not_null(d);
        cr_assert_not_null(d->name, "collective %d has no row", k);
        cr_expect_str_eq(names[k], d->name);
        cr_expect_eq(kb__ccl_collective_of(d->name), k, "%s", d->name);
        cr_expect_str_eq(kb__ccl_collective_name((kb__ccl_collective)k), d->name);
        if (d->call) { /* the public call is kb_ + the name */
            char want[64];
            snprintf(want, sizeof want, "kb_%s", d->name);
            cr_expect_str_eq(d->call, want);
        }
        for (int j = 0; j < k; j++)
            cr_expect_str_neq(kb__ccl_coll(j)->name, d->name);
    }
    cr_expect_null(kb__ccl_coll(KB__CCL_COLLECTIVE_COUNT));
    cr_expect_null(kb__ccl_coll(-1));
    cr_expect_eq(kb__ccl_collective_of("all_reduce_x"), -1);
}

Test(colls, output_sizes_follow_the_closed_forms)
{
    const int64_t n = 48, p = 6;
    cr_expect_eq(kb__ccl_out_elems(KB__CCL_REDUCE_SCATTER, n, p), n / p);
    cr_expect_eq(kb__ccl_out_elems(KB__CCL_ALL_GATHER, n, p), n * p);
    cr_expect_eq(kb__ccl_out_elems(KB__CCL_ALL_TO_ALL, n, p), n);
    cr_expect_eq(kb__ccl_out_elems(KB__CCL_ALL_TO_ALL_V, n, p), -1); /* the counts say */
    cr_expect_eq(kb__ccl_out_elems(KB__CCL_ALL_REDUCE, n, p), -1);   /* in place */
    cr_expect(kb__ccl_has_outputs(KB__CCL_ALL_TO_ALL_V) && !kb__ccl_has_outputs(KB__CCL_REDUCE));
    cr_expect(kb__ccl_has_root(KB__CCL_BROADCAST) && kb__ccl_has_root(KB__CCL_REDUCE));
    cr_expect(!kb__ccl_has_root(KB__CCL_ALL_GATHER));
    cr_expect(kb__ccl_reduces(KB__CCL_REDUCE_SCATTER) && !kb__ccl_reduces(KB__CCL_BROADCAST));
    char buf[96];
    kb__ccl_out_rule_text(KB__CCL_ALL_GATHER, n, p, buf, sizeof buf);
    cr_expect_str_eq(buf, "p*N: 6 buffers x 48 input elements");
    kb__ccl_out_rule_text(KB__CCL_REDUCE_SCATTER, n, p, buf, sizeof buf);
    cr_expect_str_eq(buf, "N/p: 48 input elements / 6 buffers");
    kb__ccl_out_rule_text(KB__CCL_BROADCAST, n, p, buf, sizeof buf);
    cr_expect_str_eq(buf, "");
}
