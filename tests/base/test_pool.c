/*
 * base/pool.h: blocks of the pool's size, recycled last in first out
 * (except under AddressSanitizer, where every block is a fresh malloc so
 * use-after-free stays visible).
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "base/pool.h"
#include "support/machine.h"

Test(pool, blocks_are_usable_and_recycled_last_in_first_out)
{
    kb__pool p;
    kb__pool_init(&p, 100);
    uint8_t *a = kb__pool_get(&p), *b = kb__pool_get(&p);
    cr_assert(a && b && a != b);
    memset(a, 1, 100);
    memset(b, 2, 100);
    kb__pool_put(&p, a);
    kb__pool_put(&p, b);
    uint8_t *c = kb__pool_get(&p), *d = kb__pool_get(&p);
    cr_assert(c && d && c != d);
    memset(c, 3, 100);
    memset(d, 4, 100);
    if (!KB__POOL_BYPASS) {
        cr_assert_eq(c, b);
        cr_assert_eq(d, a);
    }
    kb__pool_put(&p, c);
    kb__pool_put(&p, d);
    kb__pool_put(&p, NULL);
    kb__pool_fini(&p);
    cr_assert_null(p.free);
}

Test(pool, a_block_holds_at_least_a_pointer)
{
    kb__pool p;
    kb__pool_init(&p, 1);
    cr_assert_geq(p.size, sizeof(void *));
    void *a = kb__pool_get(&p);
    kb__pool_put(&p, a);
    kb__pool_fini(&p);
}

static void count_out(void *block, void *arg)
{
    (void)block;
    (*(int *)arg)++;
}

Test(pool, fini_frees_the_blocks_still_out_and_gives_every_block_back_to_the_budget)
{
    kb__budget b;
    kb__budget_init(&b);
    kb__pool p;
    kb__pool_init(&p, 100);
    kb__pool_account(&p, &b, KB__MEM_MESSAGES);
    void *x = kb__pool_get(&p), *y = kb__pool_get(&p), *z = kb__pool_get(&p);
    cr_assert(x && y && z);
    /* each block is counted with its header */
    cr_assert_eq(b.used, 3 * (100 + sizeof(kb__pool_head)));
    kb__pool_put(&p, y);
    int out = 0;
    kb__pool_each_out(&p, count_out, &out);
    cr_assert_eq(out, 2, "x and z are out, y is back");
    /* x and z are never put back (their owner's events never fired) */
    kb__pool_fini(&p);
    cr_assert_eq(p.held, 0);
    cr_assert_eq(b.used, 0);
    cr_assert_eq(b.by[KB__MEM_MESSAGES], 0);
    cr_assert_null(p.all);
    /* the pool can be used again */
    void *w = kb__pool_get(&p);
    cr_assert_not_null(w);
    kb__pool_fini(&p);
    cr_assert_eq(b.used, 0);
    cr_assert_eq(kb_test_leaks(), 0, "a block the pool made outlived its fini");
}
