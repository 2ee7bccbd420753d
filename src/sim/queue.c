/*
 * queue.c — the simulator object, the event queue and the event loop.
 *
 * The queue is a two-level time wheel for untracked entries (pooled posts,
 * process wake-ups) due soon, plus an 8-ary min-heap for the rest:
 *
 * - The current bucket (number cur_b: the 32 ps from cur_b << 5) keeps one
 *   FIFO list per picosecond and a 32-bit mask of the non-empty ones.
 *   Entries are scheduled in increasing sequence order, so appending keeps
 *   each list in (time, seq) order and the first entry of the lowest list
 *   is the bucket's minimum.
 * - The next KB__WHEEL_SLOTS - 1 buckets (65.5 ns in all) are unsorted
 *   singly linked lists, newest first, found by a bitmap with a summary
 *   word (16 KiB of heads: they stay in cache). When the current bucket is
 *   empty and the next non-empty one starts no later than the heap's
 *   minimum, it becomes current: each entry is pushed to the front of its
 *   picosecond's list, which, walking newest to oldest, leaves every list
 *   oldest first.
 * - The heap holds timers (which track their heap slot for O(log n)
 *   cancellation; the low bit of the sequence number marks them, so other
 *   nodes are never written during sift moves) and untracked entries
 *   outside the wheel's window (later, or, after a stopped loop, earlier).
 *   It stores (time, sequence) keys by value with the node pointers in a
 *   parallel array, so comparisons never chase pointers and each sibling
 *   group is two cache lines.
 *
 * A pop takes the smaller of the current bucket's first entry and the
 * heap's minimum: every other wheel entry lies in a later bucket, which
 * starts after the current one ends or after the heap's minimum. So pops
 * follow (time, seq) exactly. Almost every event of the models is due
 * within a few tens of ns (and many at the same picosecond: symmetric
 * machines do the same thing everywhere at once), so a post is a list
 * push and a pop a mask scan; the heap stays small.
 *
 * Sequence numbers grow by two per scheduling, which gives the strict
 * (time, scheduling order) contract of sim.h.
 *
 * Cost: wheel post and pop O(1) (a bucket's entries are each moved once
 * when it becomes current); heap post and pop O(log8 n) entry moves
 * (8-ary: fewer dependent levels than 4-ary); pooled nodes come from
 * 256-node chunks kept until kb__sim_destroy, so steady state allocates
 * nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"

/* ---- time conversions ---------------------------------------------------- */

kb__time kb__ps_from_ns(double ns)
{
    if (!(ns > 0)) return 0;
    long double ps = (long double)ns * 1000.0L;
    if (ps >= 18446744073709551615.0L) return KB__TIME_NEVER;
    long double r = ceill(ps - 1e-6L);
    return r > 0 ? (kb__time)r : 0;
}

kb__time kb__ps_from_bytes_gbs(uint64_t bytes, double gbs)
{
    if (!(gbs > 0)) return KB__TIME_NEVER;
    /* Bandwidth in units of 1e-6 GB/s = 1e-6 byte/ns, as an integer. */
    long double micro = roundl((long double)gbs * 1e6L);
    if (micro < 1) return KB__TIME_NEVER;
    if (micro > 1e18L) micro = 1e18L;
    uint64_t g = (uint64_t)micro;
    /* ps = bytes * 1000 / gbs = bytes * 1e9 / micro, rounded up. */
    unsigned __int128 num = (unsigned __int128)bytes * 1000000000u;
    unsigned __int128 q = (num + g - 1) / g;
    return q > UINT64_MAX ? KB__TIME_NEVER : (kb__time)q;
}

/* ---- heap ---------------------------------------------------------------- */

/* Layout: keys (time, seq) and node pointers in two parallel arrays. The
 * eight children of slot i are slots 8i+1 .. 8i+8; keys[1] sits on a 64-byte
 * boundary, so each group of siblings is exactly two cache lines, and the
 * smallest child is found by a tree of seven branch-free compares. */

static inline int before(const kb__heap_key *a, const kb__heap_key *b)
{
    /* One 128-bit compare: no data-dependent branch in the sift loops. */
    unsigned __int128 ka = ((unsigned __int128)a->t << 64) | a->seq;
    unsigned __int128 kb = ((unsigned __int128)b->t << 64) | b->seq;
    return ka < kb;
}

/* Sifts work on local copies of the array pointers and take the moving key
 * as two scalars: building a 16-byte key on the stack and reloading it as
 * one vector stalls store forwarding on every sift. */
static inline void place(kb__heap_key *key, kb__timer **nodes, uint32_t i, kb__time t, uint64_t seq,
                         kb__timer *node)
{
    key[i].t = t;
    key[i].seq = seq;
    nodes[i] = node;
    if (seq & 1) node->idx = i;
}

static inline void move_slot(kb__heap_key *key, kb__timer **nodes, uint32_t to, uint32_t from)
{
    key[to] = key[from];
    nodes[to] = nodes[from];
    if (key[from].seq & 1) nodes[from]->idx = to;
}

static void sift_up(kb__heap *h, uint32_t i, kb__heap_key k, kb__timer *node)
{
    kb__heap_key *key = h->key;
    kb__timer **nodes = h->node;
    while (i > 0) {
        uint32_t parent = (i - 1) >> 3;
        if (!before(&k, &key[parent])) break;
        move_slot(key, nodes, i, parent);
        i = parent;
    }
    place(key, nodes, i, k.t, k.seq, node);
}

/* The smallest of the children of slot i, or n if it has none. */
static inline uint32_t min_child(const kb__heap_key *key, uint32_t n, uint32_t i)
{
    uint32_t c = 8 * i + 1;
    if (c + 7 < n) {
        uint32_t a = before(&key[c + 1], &key[c]) ? c + 1 : c;
        uint32_t b = before(&key[c + 3], &key[c + 2]) ? c + 3 : c + 2;
        uint32_t d = before(&key[c + 5], &key[c + 4]) ? c + 5 : c + 4;
        uint32_t e = before(&key[c + 7], &key[c + 6]) ? c + 7 : c + 6;
        a = before(&key[b], &key[a]) ? b : a;
        d = before(&key[e], &key[d]) ? e : d;
        return before(&key[d], &key[a]) ? d : a;
    }
    if (c >= n) return n;
    uint32_t best = c;
    for (uint32_t j = c + 1; j < n; j++)
        if (before(&key[j], &key[best])) best = j;
    return best;
}

/* Fills the hole at slot i (of n) with (t, seq, node), moving smaller
 * children up. (Floyd's leaf-first variant measured slower here.) */
static void sift_down(kb__heap *h, uint32_t n, uint32_t i, kb__time t, uint64_t seq,
                      kb__timer *node)
{
    kb__heap_key *key = h->key;
    kb__timer **nodes = h->node;
    const kb__heap_key k = {t, seq};
    for (uint32_t c; (c = min_child(key, n, i)) < n && before(&key[c], &k); i = c)
        move_slot(key, nodes, i, c);
    place(key, nodes, i, t, seq, node);
}

/* Makes room for `more` entries in h. */
static int heap_reserve(kb__sim *sim, kb__heap *h, uint32_t more)
{
    if (h->len + (uint64_t)more <= h->cap) return 0;
    uint64_t cap = h->cap ? h->cap : 256;
    while (cap < h->len + (uint64_t)more)
        cap *= 2;
    if (cap > UINT32_MAX) {
        kb__sim_fail(sim, KB_ENOMEM, "event queue: more than 2^32 pending events");
        return KB_ENOMEM;
    }
    /* keys[1] on a 64-byte line: offset the array by 3 slots of 16 bytes. */
    char *mem = aligned_alloc(64, ((size_t)cap + 4) * sizeof(kb__heap_key));
    kb__timer **node = malloc((size_t)cap * sizeof *node);
    if (!mem || !node) {
        free(mem);
        free(node);
        kb__sim_fail(sim, KB_ENOMEM, "event queue: cannot grow beyond its current size");
        return KB_ENOMEM;
    }
    kb__heap_key *key = (kb__heap_key *)mem + 3;
    if (h->len) {
        memcpy(key, h->key, h->len * sizeof *key);
        memcpy(node, h->node, h->len * sizeof *node);
    }
    free(h->mem);
    free(h->node);
    h->mem = mem;
    h->key = key;
    h->node = node;
    h->cap = (uint32_t)cap;
    return 0;
}

static void heap_free(kb__heap *h)
{
    free(h->mem);
    free(h->node);
}

/* Queues node at `at` in h with the next sequence number, which it returns
 * (0 if the heap could not grow and the node was dropped). */
static inline uint64_t heap_push(kb__sim *sim, kb__heap *h, kb__time at, kb__timer *node,
                                 uint64_t tracked)
{
    if (h->len == h->cap && heap_reserve(sim, h, 1)) return 0;
    kb__heap_key k = {at, sim->seq | tracked};
    sim->seq += 2;
    sift_up(h, h->len++, k, node);
    return k.seq;
}

static void heap_remove(kb__heap *h, uint32_t i)
{
    uint32_t n = --h->len;
    if (i == n) return;
    kb__heap_key last = h->key[n];
    if (before(&last, &h->key[i]))
        sift_up(h, i, last, h->node[n]);
    else
        sift_down(h, n, i, last.t, last.seq, h->node[n]);
}

/* Removes h's minimum (h not empty). */
static inline void heap_pop(kb__heap *h)
{
    uint32_t n = --h->len;
    if (n) sift_down(h, n, 0, h->key[n].t, h->key[n].seq, h->node[n]);
}

/* Removes the untracked entry (node, seq) if h holds it; 1 if it did. */
static int heap_unschedule(kb__heap *h, const kb__timer *node, uint64_t seq)
{
    for (uint32_t i = 0; i < h->len; i++)
        if (h->node[i] == node && h->key[i].seq == seq) {
            heap_remove(h, i);
            return 1;
        }
    return 0;
}

/* ---- near-time wheel ------------------------------------------------------ */

#define WHEEL_MASK ((uint64_t)KB__WHEEL_SLOTS - 1)
#define CUR_MASK   ((uint64_t)KB__WHEEL_PS - 1)
#define REC_NODE   ((uint64_t)1 << KB__WHEEL_SHIFT) /* key bit: arg is a node */

static inline void wheel_mark(kb__sim *sim, uint32_t s)
{
    sim->wheel_bit[s >> 6] |= (uint64_t)1 << (s & 63);
    sim->wheel_sum |= (uint64_t)1 << (s >> 6);
}

static inline void wheel_unmark(kb__sim *sim, uint32_t s)
{
    uint64_t *w = &sim->wheel_bit[s >> 6];
    *w &= ~((uint64_t)1 << (s & 63));
    if (!*w) sim->wheel_sum &= ~((uint64_t)1 << (s >> 6));
}

/* The first non-empty bucket at or after slot s, circularly; the wheel
 * must hold an entry. */
static inline uint32_t wheel_next(const kb__sim *sim, uint32_t s)
{
    uint32_t w = s >> 6;
    uint64_t m = sim->wheel_bit[w] & (~(uint64_t)0 << (s & 63));
    if (m) return (w << 6) + (uint32_t)__builtin_ctzll(m);
    uint64_t above = w + 1 < KB__WHEEL_WORDS ? sim->wheel_sum & (~(uint64_t)0 << (w + 1)) : 0;
    uint32_t v = (uint32_t)__builtin_ctzll(above ? above : sim->wheel_sum);
    return (v << 6) + (uint32_t)__builtin_ctzll(sim->wheel_bit[v]);
}

static inline bool cur_empty(const kb__sim *sim)
{
    return sim->run_pos == sim->run_len && !sim->late_mask;
}

/* Reallocates *rec (contents kept) to hold cap records; 0 or KB_ENOMEM,
 * recorded on sim (*rec then unchanged). */
static int recs_resize(kb__sim *sim, kb__wheel_rec **rec, uint64_t cap)
{
    kb__wheel_rec *v = cap <= UINT32_MAX ? realloc(*rec, cap * sizeof *v) : NULL;
    if (!v) {
        kb__sim_fail(sim, KB_ENOMEM, "event queue: cannot grow a time wheel bucket");
        return KB_ENOMEM;
    }
    *rec = v;
    return 0;
}

/* The chunk whose records end at r (a bucket's write position: r is past
 * at least one record of it). */
static inline kb__wheel_chunk *chunk_of(const kb__wheel_rec *r)
{
    return (kb__wheel_chunk *)((uintptr_t)(r - 1) & ~(uintptr_t)(KB__CHUNK_BYTES - 1));
}

/* Doubles the capacity of run and spare (the wheel grows past it). */
static int run_grow(kb__sim *sim)
{
    uint64_t cap = sim->run_cap ? 2 * (uint64_t)sim->run_cap : 64;
    if (recs_resize(sim, &sim->run, cap) || recs_resize(sim, &sim->spare, cap)) return KB_ENOMEM;
    sim->run_cap = (uint32_t)cap;
    return 0;
}

/* A free chunk, the most recently freed one; NULL (recorded) when memory
 * runs out. Chunks come in 64-chunk slabs whose first chunk links the
 * slabs. */
static kb__wheel_chunk *chunk_alloc(kb__sim *sim)
{
    kb__wheel_chunk *c = sim->free_chunks;
    if (c) {
        sim->free_chunks = c->next;
        return c;
    }
    enum { PER_SLAB = 64 };
    kb__wheel_chunk *slab = aligned_alloc(KB__CHUNK_BYTES, PER_SLAB * sizeof *slab);
    if (!slab) {
        kb__sim_fail(sim, KB_ENOMEM, "event queue: cannot allocate time wheel chunks");
        return NULL;
    }
    slab->next = sim->slabs;
    sim->slabs = slab;
    for (int i = 2; i < PER_SLAB; i++)
        slab[i].next = i + 1 < PER_SLAB ? &slab[i + 1] : NULL;
    sim->free_chunks = &slab[2];
    return &slab[1];
}

/* Makes room for one more record at the end of f: slides its live records
 * to the front when at least half of it has been popped, else doubles it. */
static int fifo_room(kb__sim *sim, kb__wheel_fifo *f)
{
    if (f->head && f->head >= f->cap / 2) {
        memmove(f->rec, f->rec + f->head, (size_t)(f->len - f->head) * sizeof *f->rec);
        f->len -= f->head;
        f->head = 0;
        return 0;
    }
    uint64_t cap = f->cap ? 2 * (uint64_t)f->cap : 8;
    if (recs_resize(sim, &f->rec, cap)) return KB_ENOMEM;
    f->cap = (uint32_t)cap;
    return 0;
}

/* Bucket distance from the current bucket to `at` (>= now); beyond
 * WHEEL_MASK the entry belongs in the heap. An empty wheel first moves to
 * now's bucket (nothing queued is earlier). */
static inline uint64_t wheel_distance(kb__sim *sim, kb__time at)
{
    uint64_t d = (at >> KB__WHEEL_SHIFT) - sim->cur_b;
    if (d <= WHEEL_MASK || !cur_empty(sim) || sim->wheel_n) return d;
    uint64_t now_b = sim->hot.now >> KB__WHEEL_SHIFT;
    d = (at >> KB__WHEEL_SHIFT) - now_b;
    if (d <= WHEEL_MASK) sim->cur_b = now_b;
    return d;
}

/* Takes the next sequence number for an entry at `at`, d buckets ahead
 * (d <= WHEEL_MASK), and returns its record with the key set (node: arg
 * will be a kb__sim_schedule node); NULL, with nothing queued, when memory
 * runs out. */
static inline kb__wheel_rec *wheel_add(kb__sim *sim, kb__time at, uint64_t d, uint64_t node)
{
    uint32_t i = (uint32_t)(at & CUR_MASK);
    kb__wheel_rec *r;
    if (d == 0) {
        kb__wheel_fifo *f = &sim->late[i];
        if (f->len == f->cap && fifo_room(sim, f)) return NULL;
        if (!f->len) sim->late_mask |= (uint32_t)1 << i;
        r = &f->rec[f->len++];
    } else {
        uint32_t s = (uint32_t)((at >> KB__WHEEL_SHIFT) & WHEEL_MASK);
        if (sim->wheel_n == sim->run_cap && run_grow(sim)) return NULL;
        r = sim->wheel_end[s];
        if (!r || r == chunk_of(r)->rec + KB__CHUNK_RECS) {
            kb__wheel_chunk *fresh = chunk_alloc(sim);
            if (!fresh) return NULL;
            if (r) {
                chunk_of(r)->next = fresh;
            } else {
                sim->wheel_head[s] = fresh;
                wheel_mark(sim, s);
            }
            r = fresh->rec;
        }
        sim->wheel_end[s] = r + 1;
        sim->wheel_n++;
    }
    r->key = (sim->seq << KB__WHEEL_SHIFT) | node | i;
    sim->seq += 2;
    return r;
}

/* Makes bucket s (number b) the current one, which must be empty: its
 * records, in seq order, are gathered into spare; unless they already are
 * in (ps, seq) order (all at one ps, say), a stable counting sort on the ps
 * puts them in that order into run. Its chunks go back to the free list. */
static void wheel_serve(kb__sim *sim, uint32_t s, uint64_t b)
{
    kb__wheel_rec *end = sim->wheel_end[s], *v = sim->spare;
    kb__wheel_chunk *head = sim->wheel_head[s], *last = chunk_of(end);
    uint32_t n = 0;
    uint64_t prev = 0, unsorted = 0;
    for (kb__wheel_chunk *c = head;; c = c->next) {
        const kb__wheel_rec *stop = c == last ? end : c->rec + KB__CHUNK_RECS;
        for (const kb__wheel_rec *r = c->rec; r < stop; r++, n++) {
            v[n] = *r;
            unsorted |= (r->key & CUR_MASK) < prev;
            prev = r->key & CUR_MASK;
        }
        if (c == last) break;
    }
    if (unsorted) {
        uint32_t at[KB__WHEEL_PS] = {0};
        for (uint32_t k = 0; k < n; k++)
            at[v[k].key & CUR_MASK]++;
        for (uint32_t i = 0, sum = 0; i < KB__WHEEL_PS; i++) {
            uint32_t c = at[i];
            at[i] = sum;
            sum += c;
        }
        for (uint32_t k = 0; k < n; k++)
            sim->run[at[v[k].key & CUR_MASK]++] = v[k];
    } else {
        sim->spare = sim->run;
        sim->run = v;
    }
    last->next = sim->free_chunks;
    sim->free_chunks = head;
    sim->wheel_end[s] = NULL;
    sim->run_pos = 0;
    sim->run_len = n;
    wheel_unmark(sim, s);
    sim->wheel_n -= n;
    sim->cur_b = b;
}

static inline bool queue_empty(const kb__sim *sim)
{
    return sim->heap.len == 0 && cur_empty(sim) && !sim->wheel_n;
}

/* An entry taken off the queue: what to run, and for pop_wake the node. */
typedef struct due {
    kb__time t;
    kb__event_fn fn;
    void *arg;
    uint64_t data;
    kb__timer *node; /* kb__sim_schedule and heap entries */
} due;

/* Pops the current bucket's first entry r (from the run, or from late
 * FIFO f when not NULL) into *out. */
static inline void cur_take(kb__sim *sim, const kb__wheel_rec *r, kb__wheel_fifo *f, kb__time t,
                            due *out)
{
    out->t = t;
    out->fn = r->fn;
    if (r->key & REC_NODE) {
        kb__timer *n = r->arg;
        out->node = n;
        out->arg = n->arg;
        out->data = n->data;
    } else {
        out->arg = r->arg;
        out->data = r->data;
    }
    if (!f) {
        sim->run_pos++;
    } else if (++f->head == f->len) {
        f->head = f->len = 0;
        sim->late_mask &= ~((uint32_t)1 << (r->key & CUR_MASK));
    }
}

/* Pops the smallest entry into *out if its time is <= limit and (when only
 * is not NULL) it is a kb__sim_schedule node with callback only; false
 * otherwise.
 *
 * When the current bucket is empty, the wheel's next bucket becomes current
 * if it starts no later than the heap's minimum (and the limit). The
 * smallest queued entry is then the smaller of the current bucket's first
 * entry and the heap's minimum: every other bucket starts after the
 * current one ends, or after the heap's minimum. In the current bucket, at
 * equal ps the run (scheduled before it became current) goes first. */
static inline bool pop_min(kb__sim *sim, kb__time limit, kb__event_fn only, due *out)
{
    kb__heap *h = &sim->heap;
    if (cur_empty(sim) && sim->wheel_n) {
        uint64_t from = sim->cur_b + 1;
        uint32_t s = wheel_next(sim, (uint32_t)(from & WHEEL_MASK));
        uint64_t b = from + ((s - from) & WHEEL_MASK);
        kb__time t = b << KB__WHEEL_SHIFT; /* no entry of bucket b is earlier */
        if (t <= limit && (h->len == 0 || t <= h->key[0].t)) wheel_serve(sim, s, b);
    }
    const kb__wheel_rec *r = NULL;
    kb__wheel_fifo *f = NULL;
    if (sim->run_pos < sim->run_len) r = &sim->run[sim->run_pos];
    if (sim->late_mask) {
        uint32_t i = (uint32_t)__builtin_ctz(sim->late_mask);
        if (!r || (r->key & CUR_MASK) > i) {
            f = &sim->late[i];
            r = &f->rec[f->head];
        }
    }
    if (r) {
        kb__time t = (sim->cur_b << KB__WHEEL_SHIFT) | (r->key & CUR_MASK);
        uint64_t seq = r->key >> KB__WHEEL_SHIFT;
        if (h->len == 0 || t < h->key[0].t || (t == h->key[0].t && seq < h->key[0].seq)) {
            if (t > limit || (only && (!(r->key & REC_NODE) || r->fn != only))) return false;
            cur_take(sim, r, f, t, out);
            return true;
        }
    }
    if (h->len == 0) return false;
    kb__heap_key top = h->key[0];
    kb__timer *node = h->node[0];
    if (top.t > limit || (only && ((top.seq & 1) || node->pooled || node->fn != only)))
        return false;
    heap_pop(h);
    /* With the current bucket empty, every wheel bucket starts after top
     * (see above): the current bucket may move up to top's, so the wheel's
     * window follows the clock. */
    if (cur_empty(sim) && (top.t >> KB__WHEEL_SHIFT) > sim->cur_b)
        sim->cur_b = top.t >> KB__WHEEL_SHIFT;
    out->t = top.t;
    out->fn = node->fn;
    out->arg = node->arg;
    out->data = node->data;
    out->node = node;
    if (top.seq & 1) {
        node->idx = KB__TIMER_IDLE;
    } else if (node->pooled) {
        node->arg = sim->free_nodes;
        sim->free_nodes = node;
    }
    return true;
}

static inline kb__time time_after(const kb__sim *sim, kb__time delay)
{
    kb__time now = sim->hot.now;
    return delay > KB__TIME_NEVER - now ? KB__TIME_NEVER : now + delay;
}

/* ---- pooled events and timers -------------------------------------------- */

static kb__timer *node_alloc(kb__sim *sim)
{
    kb__timer *n = sim->free_nodes;
    if (n) {
        sim->free_nodes = n->arg;
        return n;
    }
    kb__node_chunk *c = malloc(sizeof *c);
    if (!c) {
        kb__sim_fail(sim, KB_ENOMEM, "event pool: cannot allocate more event nodes");
        return NULL;
    }
    c->next = sim->chunks;
    sim->chunks = c;
    size_t count = sizeof c->nodes / sizeof c->nodes[0];
    for (size_t i = 1; i < count; i++) {
        c->nodes[i].pooled = 1;
        c->nodes[i].idx = KB__TIMER_IDLE;
        c->nodes[i].arg = i + 1 < count ? &c->nodes[i + 1] : sim->free_nodes;
    }
    sim->free_nodes = &c->nodes[1];
    c->nodes[0].pooled = 1;
    c->nodes[0].idx = KB__TIMER_IDLE;
    return &c->nodes[0];
}

/* Within the wheel's window a post is a record appended to its bucket;
 * beyond it, a pooled node in the heap. */
void kb__sim_post_at(kb__sim *sim, kb__time at, kb__event_fn fn, void *arg, uint64_t data)
{
    if (at < sim->hot.now) at = sim->hot.now;
    uint64_t d = wheel_distance(sim, at);
    if (d <= WHEEL_MASK) {
        kb__wheel_rec *r = wheel_add(sim, at, d, 0);
        if (!r) return;
        r->fn = fn;
        r->arg = arg;
        r->data = data;
        return;
    }
    kb__timer *n = node_alloc(sim);
    if (!n) return;
    n->fn = fn;
    n->arg = arg;
    n->data = data;
    if (!heap_push(sim, &sim->heap, at, n, 0)) {
        n->arg = sim->free_nodes;
        sim->free_nodes = n;
    }
}

void kb__sim_post(kb__sim *sim, kb__time delay, kb__event_fn fn, void *arg, uint64_t data)
{
    kb__sim_post_at(sim, time_after(sim, delay), fn, arg, data);
}

void kb__timer_init(kb__timer *t, kb__event_fn fn, void *arg, uint64_t data)
{
    t->fn = fn;
    t->arg = arg;
    t->data = data;
    t->at = 0;
    t->idx = KB__TIMER_IDLE;
    t->pooled = 0;
}

void kb__timer_start(kb__sim *sim, kb__timer *t, kb__time delay)
{
    if (t->idx != KB__TIMER_IDLE) heap_remove(&sim->heap, t->idx);
    t->idx = KB__TIMER_IDLE;
    t->at = time_after(sim, delay);
    heap_push(sim, &sim->heap, t->at, t, 1);
}

int kb__timer_stop(kb__sim *sim, kb__timer *t)
{
    if (t->idx == KB__TIMER_IDLE) return 0;
    heap_remove(&sim->heap, t->idx);
    t->idx = KB__TIMER_IDLE;
    return 1;
}

/* Process wake-ups are queued untracked: in the wheel a record pointing at
 * the node, in the heap the node without slot bookkeeping during sift moves
 * (each would touch the process struct, a cache miss per level). Cancelling
 * one is rare (kb__proc_cancel of a sleeping process) and pays a linear
 * search instead. */
uint64_t kb__sim_schedule(kb__sim *sim, kb__time delay, kb__timer *node)
{
    kb__time at = time_after(sim, delay);
    node->at = at;
    uint64_t d = wheel_distance(sim, at);
    if (d > WHEEL_MASK) return heap_push(sim, &sim->heap, at, node, 0);
    uint64_t seq = sim->seq;
    kb__wheel_rec *r = wheel_add(sim, at, d, REC_NODE);
    if (!r) return 0;
    r->fn = node->fn;
    r->arg = node;
    r->data = 0;
    return seq;
}

/* Removes the record with key from v[from, *len), keeping the order of the
 * others; 1 if it was there. */
static int recs_remove(kb__wheel_rec *v, uint32_t from, uint32_t *len, uint64_t key)
{
    for (uint32_t i = from; i < *len; i++) {
        if (v[i].key != key) continue;
        memmove(&v[i], &v[i + 1], (size_t)(*len - i - 1) * sizeof *v);
        (*len)--;
        return 1;
    }
    return 0;
}

/* Removes the record with key from bucket s, moving each later record one
 * place back (across chunks) and freeing a last chunk left empty; 1 if it
 * was there. */
static int bucket_remove(kb__sim *sim, uint32_t s, uint64_t key)
{
    kb__wheel_rec *end = sim->wheel_end[s], *r = NULL;
    if (!end) return 0;
    kb__wheel_chunk *c = sim->wheel_head[s], *last = chunk_of(end), *prev = NULL;
    for (;; prev = c, c = c->next) {
        const kb__wheel_rec *stop = c == last ? end : c->rec + KB__CHUNK_RECS;
        for (r = c->rec; r < stop && r->key != key; r++)
            ;
        if (r < stop) break;
        if (c == last) return 0;
    }
    for (; c != last; prev = c, c = c->next, r = c->rec) {
        memmove(r, r + 1, (size_t)(c->rec + KB__CHUNK_RECS - 1 - r) * sizeof *r);
        c->rec[KB__CHUNK_RECS - 1] = c->next->rec[0];
    }
    memmove(r, r + 1, (size_t)(end - 1 - r) * sizeof *r);
    end--;
    if (end == last->rec) {
        last->next = sim->free_chunks;
        sim->free_chunks = last;
        if (!prev) {
            end = NULL;
            wheel_unmark(sim, s);
        } else {
            end = prev->rec + KB__CHUNK_RECS;
        }
    }
    sim->wheel_end[s] = end;
    sim->wheel_n--;
    return 1;
}

int kb__sim_unschedule(kb__sim *sim, kb__timer *node, uint64_t seq)
{
    if (heap_unschedule(&sim->heap, node, seq)) return 1;
    /* Not in the heap: in the wheel at its time, if anywhere. Sequence
     * numbers are unique, so the key identifies the record. */
    uint32_t i = (uint32_t)(node->at & CUR_MASK);
    uint64_t key = (seq << KB__WHEEL_SHIFT) | REC_NODE | i;
    uint64_t b = node->at >> KB__WHEEL_SHIFT;
    if (b == sim->cur_b) {
        if (recs_remove(sim->run, sim->run_pos, &sim->run_len, key)) return 1;
        kb__wheel_fifo *f = &sim->late[i];
        if (recs_remove(f->rec, f->head, &f->len, key)) {
            if (f->head == f->len) {
                f->head = f->len = 0;
                sim->late_mask &= ~((uint32_t)1 << i);
            }
            return 1;
        }
        return 0;
    }
    return bucket_remove(sim, (uint32_t)(b & WHEEL_MASK), key);
}

/* ---- the loop ------------------------------------------------------------ */

/* True when the running loop would pop its next event now (its queue
 * emptiness and time limit aside). */
static inline bool loop_goes_on(const kb__sim *sim)
{
    if (sim->loop_until && *sim->loop_until) return false;
    return !(sim->loop_honor_stop && (sim->stop || sim->fail_pending));
}

kb__timer *kb__sim_pop_wake(kb__sim *sim, kb__event_fn fn)
{
    if (!sim->loop_active || !loop_goes_on(sim)) return NULL;
    due e;
    if (!pop_min(sim, sim->loop_limit, fn, &e)) return NULL;
    sim->hot.now = e.t;
    sim->hot.events++;
    return e.node;
}

int kb__sim_loop(kb__sim *sim, const bool *until, kb__time limit, bool honor_stop)
{
    sim->loop_until = until;
    sim->loop_limit = limit;
    sim->loop_honor_stop = honor_stop;
    sim->loop_active = true;
    int emptied = 0;
    for (;;) {
        if (!loop_goes_on(sim)) break;
        if (queue_empty(sim)) {
            emptied = 1;
            break;
        }
        due e;
        if (!pop_min(sim, limit, NULL, &e)) break;
        sim->hot.now = e.t;
        sim->hot.events++;
        e.fn(sim, e.arg, e.data);
    }
    sim->loop_active = false;
    sim->loop_until = NULL;
    return emptied;
}

void kb__sim_fail(kb__sim *sim, int code, const char *what)
{
    if (!sim->fail_pending) kb__err_set(&sim->fail, code, "%s", what);
    sim->fail_pending = true;
}

static int refuse_nested(kb__sim *sim, const char *op)
{
    if (sim->current)
        return kb__err_set(&sim->err, KB_ESTATE,
                           "%s called from process '%s': only the main stack may run the "
                           "event loop",
                           op, sim->current->name);
    if (sim->in_loop)
        return kb__err_set(&sim->err, KB_ESTATE,
                           "%s called from an event callback at %.3f ns: only the main stack "
                           "may run the event loop",
                           op, (double)sim->hot.now / 1000.0);
    return 0;
}

/* Moves the pending failure into sim->err and returns its code. */
static int take_failure(kb__sim *sim)
{
    sim->fail_pending = false;
    kb__err_copy(&sim->err, &sim->fail);
    kb__err_clear(&sim->fail);
    return sim->err.code;
}

static int run_to(kb__sim *sim, kb__time limit, const char *op)
{
    int rc = refuse_nested(sim, op);
    if (rc) return rc;
    if (sim->fail_pending) return take_failure(sim);
    sim->stop = false;
    sim->in_loop = true;
    kb__sim *prev = kb__overflow_guard_enter(sim);
    int emptied = kb__sim_loop(sim, NULL, limit, true);
    kb__overflow_guard_leave(prev);
    sim->in_loop = false;
    if (sim->fail_pending) return take_failure(sim);
    if (sim->stop) {
        sim->stop = false;
        return 0;
    }
    if (limit != KB__TIME_NEVER) {
        if (sim->hot.now < limit) sim->hot.now = limit;
        return 0;
    }
    if (emptied && sim->nlive > 0) return kb__deadlock_report(sim, op);
    return 0;
}

int kb__sim_run(kb__sim *sim)
{
    return run_to(sim, KB__TIME_NEVER, "kb__sim_run");
}

int kb__sim_run_until_time(kb__sim *sim, kb__time t)
{
    if (t == KB__TIME_NEVER) t = KB__TIME_NEVER - 1;
    return run_to(sim, t, "kb__sim_run_until_time");
}

void kb__sim_stop(kb__sim *sim)
{
    sim->stop = true;
}

/* ---- create / destroy ---------------------------------------------------- */

kb__sim *kb__sim_create(uint64_t seed, kb__err *err)
{
    if (kb__overflow_guard_install(err)) return NULL;
    kb__sim *sim = calloc(1, sizeof *sim);
    if (!sim || heap_reserve(sim, &sim->heap, 1024)) {
        free(sim);
        kb__err_set(err, KB_ENOMEM, "simulator: out of memory creating the event queue");
        return NULL;
    }
    sim->seed = seed;
    sim->seq = 2; /* 0 means "not queued" to kb__sim_schedule callers */
    kb__rng_seed(&sim->rng, seed, UINT64_MAX);
    kb__stack_pool_init(&sim->stacks);
    sim->main = kb__proc_new_main(sim);
    if (!sim->main) {
        kb__sim_destroy(sim);
        kb__err_set(err, KB_ENOMEM, "simulator: out of memory creating the main context");
        return NULL;
    }
    return sim;
}

void kb__sim_destroy(kb__sim *sim)
{
    if (!sim) return;
    kb__proc_free_all(sim);
    kb__stack_pool_fini(&sim->stacks);
    while (sim->chunks) {
        kb__node_chunk *c = sim->chunks;
        sim->chunks = c->next;
        free(c);
    }
    heap_free(&sim->heap);
    while (sim->slabs) {
        kb__wheel_chunk *slab = sim->slabs;
        sim->slabs = slab->next;
        free(slab);
    }
    for (uint32_t i = 0; i < KB__WHEEL_PS; i++)
        free(sim->late[i].rec);
    free(sim->run);
    free(sim->spare);
    free(sim);
}

kb__err *kb__sim_error(kb__sim *sim)
{
    return &sim->err;
}

kb__rng *kb__sim_rng(kb__sim *sim)
{
    return &sim->rng;
}

void kb__sim_set_trace(kb__sim *sim, kb__trace_fn fn, void *user)
{
    sim->hot.trace = fn;
    sim->hot.trace_user = fn ? user : NULL;
}
