/*
 * mem/u64map.c — linear-probing hash map, uint64 -> uint64.
 *
 * The hash is the splitmix64 finalizer, which spreads page numbers and
 * aligned addresses (low bits all zero) over the whole table. Deletion
 * shifts later members of the probe run back so no tombstones accumulate.
 */
#include "mem/u64map.h"

#include <stdlib.h>

#include "kernbench/error.h"

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

void kb__u64map_init(kb__u64map *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
}

void kb__u64map_fini(kb__u64map *m)
{
    free(m->slots);
    kb__u64map_init(m);
}

static size_t find_slot(const kb__u64map *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    size_t i = mix(key) & mask;
    while (m->slots[i].key != KB__U64MAP_EMPTY && m->slots[i].key != key)
        i = (i + 1) & mask;
    return i;
}

bool kb__u64map_get(const kb__u64map *m, uint64_t key, uint64_t *val)
{
    if (m->cap == 0 || key == KB__U64MAP_EMPTY) return false;
    size_t i = find_slot(m, key);
    if (m->slots[i].key != key) return false;
    if (val) *val = m->slots[i].val;
    return true;
}

static int grow(kb__u64map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    kb__u64map_slot *ns = malloc(ncap * sizeof *ns);
    if (!ns) return KB_ENOMEM;
    for (size_t i = 0; i < ncap; i++)
        ns[i].key = KB__U64MAP_EMPTY;
    kb__u64map old = *m;
    m->slots = ns;
    m->cap = ncap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].key != KB__U64MAP_EMPTY) {
            size_t j = find_slot(m, old.slots[i].key);
            m->slots[j] = old.slots[i];
        }
    }
    free(old.slots);
    return 0;
}

int kb__u64map_put(kb__u64map *m, uint64_t key, uint64_t val)
{
    if (key == KB__U64MAP_EMPTY) return KB_EINVAL;
    if ((m->count + 1) * 8 > m->cap * 7) {
        int rc = grow(m);
        if (rc) return rc;
    }
    size_t i = find_slot(m, key);
    if (m->slots[i].key == KB__U64MAP_EMPTY) m->count++;
    m->slots[i].key = key;
    m->slots[i].val = val;
    return 0;
}

bool kb__u64map_del(kb__u64map *m, uint64_t key, uint64_t *val)
{
    if (m->cap == 0 || key == KB__U64MAP_EMPTY) return false;
    size_t mask = m->cap - 1;
    size_t i = find_slot(m, key);
    if (m->slots[i].key != key) return false;
    if (val) *val = m->slots[i].val;
    /* Backward-shift: move each later run member whose home is not in
     * (hole, j] into the hole. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->slots[j].key != KB__U64MAP_EMPTY; j = (j + 1) & mask) {
        size_t home = mix(m->slots[j].key) & mask;
        bool home_in_gap = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_in_gap) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].key = KB__U64MAP_EMPTY;
    m->count--;
    return true;
}

size_t kb__u64map_bytes(const kb__u64map *m)
{
    return m->cap * sizeof(kb__u64map_slot);
}
