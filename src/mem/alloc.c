/*
 * mem/alloc.c — first-fit range allocator on a treap of free blocks.
 *
 * The treap is keyed by block start and ordered as a heap on random
 * priorities, so its depth is O(log F) expected whatever the allocation
 * pattern (first-fit otherwise tends to build a degenerate list). Every node
 * carries the largest block size of its subtree, which lets first-fit skip a
 * whole subtree that cannot hold the request. Split and merge are the only
 * structural operations; insert, remove and coalesce are built from them.
 */
#include "mem/alloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL 0u

static uint64_t umax(uint64_t x, uint64_t y)
{
    return x > y ? x : y;
}

static void pull(kb__range_node *n, uint32_t t)
{
    n[t].max = umax(n[t].size, umax(n[n[t].left].max, n[n[t].right].max));
}

/* l gets the blocks starting below key, r the rest. */
static void split(kb__range_node *n, uint32_t t, uint64_t key, uint32_t *l, uint32_t *r)
{
    if (t == NIL) {
        *l = *r = NIL;
    } else if (n[t].start < key) {
        split(n, n[t].right, key, &n[t].right, r);
        pull(n, t);
        *l = t;
    } else {
        split(n, n[t].left, key, l, &n[t].left);
        pull(n, t);
        *r = t;
    }
}

/* Every block in l starts below every block in r. */
static uint32_t merge(kb__range_node *n, uint32_t l, uint32_t r)
{
    if (l == NIL) return r;
    if (r == NIL) return l;
    if (n[l].prio > n[r].prio) {
        n[l].right = merge(n, n[l].right, r);
        pull(n, l);
        return l;
    }
    n[r].left = merge(n, l, n[r].left);
    pull(n, r);
    return r;
}

static uint32_t next_prio(kb__range_allocator *a)
{
    uint64_t x = a->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    a->rng = x;
    return (uint32_t)(x >> 32);
}

/* A fresh node for [start, start + size), or NIL when out of host memory. */
static uint32_t node_new(kb__range_allocator *a, uint64_t start, uint64_t size)
{
    uint32_t t = a->free_node;
    if (t != NIL) {
        a->free_node = a->nodes[t].left;
    } else {
        if (a->top == a->cap) {
            if (a->cap > UINT32_MAX / 2) return NIL;
            uint32_t ncap = a->cap * 2;
            kb__range_node *nn = realloc(a->nodes, (size_t)ncap * sizeof *nn);
            if (!nn) return NIL;
            a->nodes = nn;
            a->cap = ncap;
        }
        t = a->top++;
    }
    kb__range_node *n = &a->nodes[t];
    n->start = start;
    n->size = n->max = size;
    n->left = n->right = NIL;
    n->prio = next_prio(a);
    return t;
}

static void node_release(kb__range_allocator *a, uint32_t t)
{
    a->nodes[t].left = a->free_node;
    a->free_node = t;
}

static void tree_insert(kb__range_allocator *a, uint32_t t)
{
    uint32_t l, r;
    split(a->nodes, a->root, a->nodes[t].start, &l, &r);
    a->root = merge(a->nodes, merge(a->nodes, l, t), r);
    a->n_free++;
}

/* Detaches the block starting at key (which must exist) and returns it. */
static uint32_t tree_remove(kb__range_allocator *a, uint64_t key)
{
    uint32_t l, m, r;
    split(a->nodes, a->root, key, &l, &r);
    split(a->nodes, r, key + 1, &m, &r);
    a->root = merge(a->nodes, l, r);
    a->n_free--;
    return m;
}

int kb__range_init(kb__range_allocator *a, uint64_t base, uint64_t size, const char *name,
                   kb__err *err)
{
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name ? name : "range");
    kb__u64map_init(&a->live);
    if (size == 0 || size > UINT64_MAX - base)
        return kb__err_set(err, KB_EINVAL,
                           "%s: range of %" PRIu64 " bytes at 0x%" PRIx64
                           " is empty or runs past the end of the 64-bit address space",
                           a->name, size, base);
    a->base = base;
    a->size = size;
    a->cap = 64;
    a->nodes = calloc(a->cap, sizeof *a->nodes);
    if (!a->nodes) return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", a->name);
    a->top = 1; /* node 0 is the nil sentinel: size and max 0 */
    a->rng = 0x9e3779b97f4a7c15ULL;
    tree_insert(a, node_new(a, base, size));
    return 0;
}

void kb__range_fini(kb__range_allocator *a)
{
    free(a->nodes);
    a->nodes = NULL;
    a->cap = a->top = a->free_node = a->root = 0;
    a->n_free = 0;
    a->used = 0;
    kb__u64map_fini(&a->live);
}

/* Where a block of `size` aligned to `align` would start inside node t, or
 * UINT64_MAX if it does not fit there. */
static uint64_t fit_in(const kb__range_node *n, uint64_t size, uint64_t align)
{
    uint64_t s = n->start;
    if (align - 1 > UINT64_MAX - s) return UINT64_MAX;
    uint64_t at = (s + align - 1) & ~(align - 1);
    if (at - s > n->size || size > n->size - (at - s)) return UINT64_MAX;
    return at;
}

/* The lowest-addressed free block that can hold the request, or NIL. */
static uint32_t first_fit(const kb__range_node *n, uint32_t t, uint64_t size, uint64_t align)
{
    if (t == NIL || n[t].max < size) return NIL;
    uint32_t hit = first_fit(n, n[t].left, size, align);
    if (hit != NIL) return hit;
    if (fit_in(&n[t], size, align) != UINT64_MAX) return t;
    return first_fit(n, n[t].right, size, align);
}

static int no_space(const kb__range_allocator *a, uint64_t size, uint64_t align, kb__err *err)
{
    return kb__err_set(
        err, KB_ENOSPC,
        "%s: cannot allocate %" PRIu64 " bytes aligned to %" PRIu64
        ": largest free block is %" PRIu64 " bytes (%" PRIu64 " bytes free in %zu blocks)",
        a->name, size, align, kb__range_largest_free(a), kb__range_bytes_free(a), a->n_free);
}

int kb__range_alloc(kb__range_allocator *a, uint64_t size, uint64_t align, uint64_t *out,
                    kb__err *err)
{
    *out = 0;
    if (size == 0) return kb__err_set(err, KB_EINVAL, "%s: cannot allocate 0 bytes", a->name);
    if (align == 0 || (align & (align - 1)))
        return kb__err_set(err, KB_EINVAL,
                           "%s: alignment %" PRIu64 " is not a power of two (request of %" PRIu64
                           " bytes)",
                           a->name, align, size);
    uint32_t t = first_fit(a->nodes, a->root, size, align);
    if (t == NIL) return no_space(a, size, align, err);
    uint64_t s = a->nodes[t].start, z = a->nodes[t].size;
    uint64_t at = fit_in(&a->nodes[t], size, align);
    /* Reserve every resource before changing the tree, so failure leaves
     * the allocator untouched: at most one extra node and one map slot. */
    uint32_t tail = NIL;
    if (at + size < s + z && (tail = node_new(a, at + size, s + z - (at + size))) == NIL)
        return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", a->name);
    if (kb__u64map_put(&a->live, at, size)) {
        if (tail != NIL) node_release(a, tail);
        return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", a->name);
    }
    tree_remove(a, s);
    if (at > s) {
        a->nodes[t].size = a->nodes[t].max = at - s;
        a->nodes[t].left = a->nodes[t].right = NIL;
        tree_insert(a, t);
    } else {
        node_release(a, t);
    }
    if (tail != NIL) tree_insert(a, tail);
    a->used += size;
    *out = at;
    return 0;
}

static uint32_t rightmost(const kb__range_node *n, uint32_t t)
{
    while (t != NIL && n[t].right != NIL)
        t = n[t].right;
    return t;
}

static uint32_t leftmost(const kb__range_node *n, uint32_t t)
{
    while (t != NIL && n[t].left != NIL)
        t = n[t].left;
    return t;
}

int kb__range_free(kb__range_allocator *a, uint64_t addr, kb__err *err)
{
    uint64_t size;
    if (!kb__u64map_get(&a->live, addr, &size))
        return kb__err_set(err, KB_EINVAL,
                           "%s: free of 0x%" PRIx64
                           ": no allocated block starts there (never allocated or already freed)",
                           a->name, addr);
    /* Take a node first so nothing changes if the host is out of memory. */
    uint32_t t = node_new(a, addr, size);
    if (t == NIL) return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", a->name);
    kb__u64map_del(&a->live, addr, NULL);
    a->used -= size;
    kb__range_node *n = a->nodes;
    uint32_t l, r, p, q;
    split(n, a->root, addr, &l, &r);
    p = rightmost(n, l);
    if (p != NIL && n[p].start + n[p].size == addr) {
        split(n, l, n[p].start, &l, &p);
        n[t].start = n[p].start;
        n[t].size += n[p].size;
        node_release(a, p);
        a->n_free--;
    }
    q = leftmost(n, r);
    if (q != NIL && n[q].start == addr + size) {
        split(n, r, n[q].start + 1, &q, &r);
        n[t].size += n[q].size;
        node_release(a, q);
        a->n_free--;
    }
    n[t].max = n[t].size;
    a->root = merge(n, merge(n, l, t), r);
    a->n_free++;
    return 0;
}

uint64_t kb__range_block_size(const kb__range_allocator *a, uint64_t addr)
{
    uint64_t size = 0;
    kb__u64map_get(&a->live, addr, &size);
    return size;
}

uint64_t kb__range_largest_free(const kb__range_allocator *a)
{
    return a->nodes ? a->nodes[a->root].max : 0;
}

uint64_t kb__range_bytes_free(const kb__range_allocator *a)
{
    return a->size - a->used;
}

uint64_t kb__range_bytes_used(const kb__range_allocator *a)
{
    return a->used;
}

size_t kb__range_n_free_blocks(const kb__range_allocator *a)
{
    return a->n_free;
}

size_t kb__range_n_live(const kb__range_allocator *a)
{
    return a->live.count;
}

bool kb__range_is_pristine(const kb__range_allocator *a)
{
    return a->nodes && a->used == 0 && a->live.count == 0 && a->n_free == 1 &&
           a->nodes[a->root].start == a->base && a->nodes[a->root].size == a->size;
}

/* In-order free blocks of t into out[*k...] as (start, size) pairs. */
static void collect(const kb__range_node *n, uint32_t t, uint64_t *out, size_t *k)
{
    if (t == NIL) return;
    collect(n, n[t].left, out, k);
    out[(*k)++] = n[t].start;
    out[(*k)++] = n[t].size;
    collect(n, n[t].right, out, k);
}

static bool same_live(const kb__range_allocator *a, const kb__range_allocator *b)
{
    if (a->live.count != b->live.count) return false;
    for (size_t i = 0; i < a->live.cap; i++) {
        uint64_t v;
        const kb__u64map_slot *s = &a->live.slots[i];
        if (s->key != KB__U64MAP_EMPTY && (!kb__u64map_get(&b->live, s->key, &v) || v != s->val))
            return false;
    }
    return true;
}

bool kb__range_same_state(const kb__range_allocator *a, const kb__range_allocator *b)
{
    if (!a->nodes || !b->nodes || a->base != b->base || a->size != b->size || a->used != b->used ||
        a->n_free != b->n_free || !same_live(a, b))
        return false;
    uint64_t *fa = malloc((4 * a->n_free + 2) * sizeof *fa);
    if (!fa) return false;
    size_t ka = 0, kb = 0;
    collect(a->nodes, a->root, fa, &ka);
    collect(b->nodes, b->root, fa + 2 * a->n_free, &kb);
    bool same = ka == kb && memcmp(fa, fa + 2 * a->n_free, ka * sizeof *fa) == 0;
    free(fa);
    return same;
}
