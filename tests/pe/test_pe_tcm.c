/* TCM scratch allocator: first fit, alignment, coalescing, largest block. */
#include <criterion/criterion.h>

#include "pe/pe_tcm.h"

Test(pe_tcm, frees_coalesce_back_into_one_block)
{
    kb__tcm t;
    kb__err e;
    cr_assert_eq(kb__tcm_init(&t, 4096, &e), 0);
    uint64_t off[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(kb__tcm_alloc(&t, 1000, &off[i]), 0); /* rounds to 1024 */
    cr_assert_eq(off[3], 3 * 1024);
    cr_assert_eq(kb__tcm_alloc(&t, 1, &off[0]), KB_ENOSPC);
    kb__tcm_free(&t, 0, 1000);
    kb__tcm_free(&t, 2048, 1000);
    cr_assert_eq(t.free_bytes, 2048);
    cr_assert_eq(kb__tcm_largest(&t), 1024);
    kb__tcm_free(&t, 1024, 1000);
    kb__tcm_free(&t, 3072, 1000);
    cr_assert_eq(t.n_free, 1);
    cr_assert_eq(kb__tcm_largest(&t), 4096);
    kb__tcm_fini(&t);
}
