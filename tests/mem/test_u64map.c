/*
 * u64 hash map: agrees with a direct-indexed reference under random
 * insert/overwrite/delete, including long probe runs.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "kernbench/error.h"
#include "mem/u64map.h"

Test(u64map, random_operations_match_a_direct_table)
{
    enum { KEYS = 5000 };
    static uint64_t val[KEYS];
    static bool has[KEYS];
    kb__u64map m;
    uint64_t s = 88;
    size_t count = 0;
    kb__u64map_init(&m);
    for (int op = 0; op < 200000; op++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t k = s % KEYS, key = k << 12; /* aligned keys, like page addresses */
        if ((s >> 20) % 3) {
            cr_assert_eq(kb__u64map_put(&m, key, s), 0);
            count += !has[k];
            has[k] = true;
            val[k] = s;
        } else {
            uint64_t v;
            bool was = kb__u64map_del(&m, key, &v);
            cr_assert_eq(was, has[k]);
            if (was) cr_assert_eq(v, val[k]);
            count -= has[k];
            has[k] = false;
        }
        cr_assert_eq(m.count, count);
    }
    for (uint64_t k = 0; k < KEYS; k++) {
        uint64_t v;
        cr_assert_eq(kb__u64map_get(&m, k << 12, &v), has[k]);
        if (has[k]) cr_assert_eq(v, val[k]);
    }
    kb__u64map_fini(&m);
}

Test(u64map, the_reserved_key_is_refused)
{
    kb__u64map m;
    kb__u64map_init(&m);
    cr_assert_eq(kb__u64map_put(&m, KB__U64MAP_EMPTY, 1), KB_EINVAL);
    cr_assert_not(kb__u64map_get(&m, KB__U64MAP_EMPTY, NULL));
    cr_assert_eq(m.count, 0);
    kb__u64map_fini(&m);
}
