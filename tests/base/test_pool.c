/*
 * base/pool.h: blocks of the pool's size, recycled last in first out
 * (except under AddressSanitizer, where every block is a fresh malloc so
 * use-after-free stays visible).
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "base/pool.h"

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
