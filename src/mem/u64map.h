/*
 * mem/u64map.h — open-addressing hash map from uint64 keys to uint64 values.
 *
 * Used by the range allocator (live block start -> size) and the backing
 * store (page number -> page). Linear probing with backward-shift deletion,
 * so there are no tombstones and lookups stay short after many deletions.
 *
 * Invariants: capacity is a power of two (or 0 before the first insert);
 * count <= 7/8 of capacity after every put. The key UINT64_MAX is reserved
 * as the empty-slot marker and is refused by put.
 * Cost: get/put/del O(1) expected; 16 bytes per slot.
 * Ownership: init/fini; the map owns only its slot array.
 */
#ifndef KB_MEM_U64MAP_H
#define KB_MEM_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KB__U64MAP_EMPTY UINT64_MAX

typedef struct kb__u64map_slot {
    uint64_t key; /* KB__U64MAP_EMPTY when free */
    uint64_t val;
} kb__u64map_slot;

typedef struct kb__u64map {
    kb__u64map_slot *slots; /* capacity entries, NULL while empty */
    size_t cap;             /* 0 or a power of two */
    size_t count;           /* occupied slots */
} kb__u64map;

/* Makes an empty map; never allocates. */
void kb__u64map_init(kb__u64map *m);
/* Releases the slot array; the map is empty and reusable afterwards. */
void kb__u64map_fini(kb__u64map *m);
/* True and *val set if key is present (val may be NULL). */
bool kb__u64map_get(const kb__u64map *m, uint64_t key, uint64_t *val);
/* Inserts or overwrites. 0, or KB_ENOMEM (map unchanged), or KB_EINVAL for
 * the reserved key. */
int kb__u64map_put(kb__u64map *m, uint64_t key, uint64_t val);
/* Removes key; true if it was present (its value goes to *val if non-NULL). */
bool kb__u64map_del(kb__u64map *m, uint64_t key, uint64_t *val);
/* Bytes of host memory the map holds. */
size_t kb__u64map_bytes(const kb__u64map *m);

#endif
