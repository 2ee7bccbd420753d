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
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"

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

/* Host bytes of a heap of cap entries (keys and nodes), for the budget. */
static uint64_t heap_bytes(uint64_t cap)
{
    return (cap + 4) * sizeof(kb__heap_key) + cap * sizeof(kb__timer *);
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
    if (kb__budget_take(&sim->budget, KB__MEM_EVENTS, heap_bytes(cap))) {
        kb__sim_fail(sim, KB_EBUDGET, sim->budget.msg);
        return KB_EBUDGET;
    }
    /* keys[1] on a 64-byte line: offset the array by 3 slots of 16 bytes. */
    char *mem = aligned_alloc(64, ((size_t)cap + 4) * sizeof(kb__heap_key));
    kb__timer **node = malloc((size_t)cap * sizeof *node);
    if (!mem || !node) {
        free(mem);
        free(node);
        kb__budget_give(&sim->budget, KB__MEM_EVENTS, heap_bytes(cap));
        kb__sim_fail(sim, KB_ENOMEM, "event queue: cannot grow beyond its current size");
        return KB_ENOMEM;
    }
    if (h->cap) kb__budget_give(&sim->budget, KB__MEM_EVENTS, heap_bytes(h->cap));
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
#define CUR_MASK   (((kb__time)1 << KB__WHEEL_SHIFT) - 1)

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

/* Appends node to the list of its picosecond in the current bucket. */
static inline void cur_append(kb__sim *sim, kb__timer *node)
{
    uint32_t i = (uint32_t)(node->at & CUR_MASK);
    node->next = NULL;
    if (sim->cur_head[i])
        sim->cur_tail[i]->next = node;
    else
        sim->cur_head[i] = node, sim->cur_mask |= (uint32_t)1 << i;
    sim->cur_tail[i] = node;
}

/* Queues an untracked node at `at` (>= now); returns its sequence number
 * (0 if it was dropped for lack of memory). */
static inline uint64_t queue_untracked(kb__sim *sim, kb__time at, kb__timer *node)
{
    uint64_t d = (at >> KB__WHEEL_SHIFT) - sim->cur_b;
    if (d > WHEEL_MASK) {
        /* An empty wheel moves to now's bucket (nothing queued is earlier). */
        uint64_t now_b = sim->hot.now >> KB__WHEEL_SHIFT;
        if (sim->cur_mask || sim->wheel_n || (at >> KB__WHEEL_SHIFT) - now_b > WHEEL_MASK)
            return heap_push(sim, &sim->heap, at, node, 0);
        sim->cur_b = now_b;
        d = (at >> KB__WHEEL_SHIFT) - now_b;
    }
    uint64_t seq = sim->seq;
    sim->seq += 2;
    node->at = at;
    node->seq = seq;
    if (d == 0) {
        cur_append(sim, node);
        return seq;
    }
    uint32_t s = (uint32_t)((at >> KB__WHEEL_SHIFT) & WHEEL_MASK);
    node->next = sim->wheel[s];
    if (!node->next) wheel_mark(sim, s);
    sim->wheel[s] = node;
    sim->wheel_n++;
    return seq;
}

/* Makes bucket s (number b) the current one (which must be empty): each
 * entry goes to the front of its picosecond's list, so the lists, built
 * from the newest entry back, come out oldest first. */
static void wheel_serve(kb__sim *sim, uint32_t s, uint64_t b)
{
    kb__timer *n = sim->wheel[s];
    sim->wheel[s] = NULL;
    wheel_unmark(sim, s);
    sim->cur_b = b;
    sim->pf_next = NULL;
    while (n) {
        kb__timer *next = n->next;
        uint32_t i = (uint32_t)(n->at & CUR_MASK);
        n->next = sim->cur_head[i];
        if (!n->next) sim->cur_tail[i] = n, sim->cur_mask |= (uint32_t)1 << i;
        sim->cur_head[i] = n;
        sim->wheel_n--;
        n = next;
    }
    /* While this bucket's entries are popped, walk the next bucket's list
     * one node per pop, prefetching ahead: serving that bucket then finds
     * its nodes in cache instead of chasing one miss after the other. */
    if (sim->wheel_n) sim->pf_next = sim->wheel[wheel_next(sim, (uint32_t)((b + 1) & WHEEL_MASK))];
}

/* One step of that walk (a hint: the list may change under it, only
 * addresses of queued nodes are read). */
static inline void prefetch_step(kb__sim *sim)
{
    kb__timer *n = sim->pf_next;
    if (!n) return;
    kb__timer *next = n->next;
    if (next) __builtin_prefetch(next);
    __builtin_prefetch(n->arg); /* what the callback will touch first */
    sim->pf_next = next;
}

bool kb__queue_at_most(const kb__sim *sim, uint64_t n)
{
    uint64_t c = (uint64_t)sim->heap.len + sim->wheel_n;
    for (uint32_t m = sim->cur_mask; m && c <= n; m &= m - 1)
        for (const kb__timer *t = sim->cur_head[__builtin_ctz(m)]; t && c <= n; t = t->next)
            c++;
    return c <= n;
}

static inline bool queue_empty(const kb__sim *sim)
{
    return sim->heap.len == 0 && !sim->cur_mask && !sim->wheel_n;
}

/* Pops the smallest entry if its time is <= limit and (when only is not
 * NULL) it is an untracked entry with callback only; NULL otherwise.
 *
 * When the current bucket is empty, the wheel's next bucket becomes current
 * if it starts no later than the heap's minimum (and the limit). The
 * smallest queued entry is then the smaller of the current bucket's first
 * entry and the heap's minimum: every other bucket starts after the
 * current one ends, or after the heap's minimum. */
static inline kb__timer *pop_min(kb__sim *sim, kb__time limit, kb__event_fn only, kb__heap_key *out)
{
    kb__heap *h = &sim->heap;
    if (!sim->cur_mask && sim->wheel_n) {
        uint64_t from = sim->cur_b + 1;
        uint32_t s = wheel_next(sim, (uint32_t)(from & WHEEL_MASK));
        uint64_t b = from + ((s - from) & WHEEL_MASK);
        kb__time t = b << KB__WHEEL_SHIFT; /* no entry of bucket b is earlier */
        if (t <= limit && (h->len == 0 || t <= h->key[0].t)) wheel_serve(sim, s, b);
    }
    if (sim->cur_mask) {
        uint32_t i = (uint32_t)__builtin_ctz(sim->cur_mask);
        kb__timer *c = sim->cur_head[i];
        kb__time t = (sim->cur_b << KB__WHEEL_SHIFT) | i;
        if (h->len == 0 || t < h->key[0].t || (t == h->key[0].t && c->seq < h->key[0].seq)) {
            if (t > limit || (only && c->fn != only)) return NULL;
            prefetch_step(sim);
            sim->cur_head[i] = c->next;
            if (!c->next) sim->cur_mask &= ~((uint32_t)1 << i);
            out->t = t;
            out->seq = c->seq;
            return c;
        }
    }
    if (h->len == 0) return NULL;
    kb__heap_key top = h->key[0];
    kb__timer *node = h->node[0];
    if (top.t > limit || (only && ((top.seq & 1) || node->fn != only))) return NULL;
    heap_pop(h);
    /* With the current bucket empty, every wheel bucket starts after top
     * (see above): the current bucket may move up to top's, so the wheel's
     * window follows the clock. */
    if (!sim->cur_mask && (top.t >> KB__WHEEL_SHIFT) > sim->cur_b)
        sim->cur_b = top.t >> KB__WHEEL_SHIFT;
    *out = top;
    return node;
}

static inline kb__time time_after(const kb__sim *sim, kb__time delay)
{
    kb__time now = sim->hot.now;
    return delay > KB__TIME_NEVER - now ? KB__TIME_NEVER : now + delay;
}

/* ---- pooled events and timers -------------------------------------------- */

/* A new chunk of event nodes (the free list is empty): its first node, the
 * others on the free list; NULL after a failure. Out of line, so that the
 * hot path of node_alloc (a pop of the free list) stays as small as it was
 * before the budget check came in. */
__attribute__((noinline, cold)) static kb__timer *node_refill(kb__sim *sim)
{
    if (kb__budget_take(&sim->budget, KB__MEM_EVENTS, sizeof(kb__node_chunk))) {
        kb__sim_fail(sim, KB_EBUDGET, sim->budget.msg);
        return NULL;
    }
    kb__node_chunk *c = malloc(sizeof *c);
    if (!c) {
        kb__budget_give(&sim->budget, KB__MEM_EVENTS, sizeof(kb__node_chunk));
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

static inline kb__timer *node_alloc(kb__sim *sim)
{
    kb__timer *n = sim->free_nodes;
    if (!n) return node_refill(sim);
    sim->free_nodes = n->arg;
    return n;
}

void kb__sim_post_at(kb__sim *sim, kb__time at, kb__event_fn fn, void *arg, uint64_t data)
{
    kb__timer *n = node_alloc(sim);
    if (!n) return;
    n->fn = fn;
    n->arg = arg;
    n->data = data;
    queue_untracked(sim, at < sim->hot.now ? sim->hot.now : at, n);
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

/* Process wake-ups are queued untracked: no slot bookkeeping during sift
 * moves (each would touch the process struct, a cache miss per level).
 * Cancelling one is rare (kb__proc_cancel of a sleeping process) and pays a
 * linear search instead. */
uint64_t kb__sim_schedule(kb__sim *sim, kb__time delay, kb__timer *node)
{
    node->at = time_after(sim, delay);
    return queue_untracked(sim, node->at, node);
}

/* Unlinks (node, seq) from the list at *link; 1 if it was there. */
static int list_remove(kb__timer **link, const kb__timer *node, uint64_t seq)
{
    for (; *link; link = &(*link)->next) {
        if (*link != node || node->seq != seq) continue;
        *link = node->next;
        return 1;
    }
    return 0;
}

int kb__sim_unschedule(kb__sim *sim, kb__timer *node, uint64_t seq)
{
    if (sim->pf_next == node) sim->pf_next = NULL; /* it may be freed once out */
    if (heap_unschedule(&sim->heap, node, seq)) return 1;
    /* Not in the heap: in the wheel at its time, if anywhere. */
    uint64_t b = node->at >> KB__WHEEL_SHIFT;
    uint32_t i = (uint32_t)(node->at & CUR_MASK);
    if (b == sim->cur_b && list_remove(&sim->cur_head[i], node, seq)) {
        if (!sim->cur_head[i]) {
            sim->cur_mask &= ~((uint32_t)1 << i);
        } else if (sim->cur_tail[i] == node) {
            kb__timer *n = sim->cur_head[i];
            while (n->next)
                n = n->next;
            sim->cur_tail[i] = n;
        }
        return 1;
    }
    uint32_t s = (uint32_t)(b & WHEEL_MASK);
    if (list_remove(&sim->wheel[s], node, seq)) {
        sim->wheel_n--;
        if (!sim->wheel[s]) wheel_unmark(sim, s);
        return 1;
    }
    return 0;
}

/* ---- the loop ------------------------------------------------------------ */

/* Sets the clock to an event's time t. Times saturate at KB__TIME_NEVER
 * (kb__time_add, time_after) rather than wrap: an action there means the
 * run outgrew the clock, and it fails instead of going on at a wrong time. */
static inline void clock_to(kb__sim *sim, kb__time t)
{
    sim->hot.now = t;
    if (__builtin_expect(t == KB__TIME_NEVER, 0))
        kb__sim_fail(sim, KB_ERANGE,
                     "simulated time reached the clock's limit (2^64 - 1 ps, about 213 days): "
                     "a time in this run would not fit");
}

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
    kb__heap_key top;
    kb__timer *node = pop_min(sim, sim->loop_limit, fn, &top);
    if (node) {
        clock_to(sim, top.t);
        sim->hot.events++;
    }
    return node;
}

/* Calls the progress hook and sets its next event count. */
static void progress(kb__sim *sim)
{
    sim->progress_next = sim->hot.events + sim->progress_every;
    sim->progress(sim->progress_user, sim->hot.now, sim->hot.events);
}

void kb__sim_set_progress(kb__sim *sim, kb__progress_fn fn, void *user, uint64_t every)
{
    sim->progress = fn;
    sim->progress_user = fn ? user : NULL;
    sim->progress_every = every ? every : 1;
    sim->progress_next = fn ? sim->hot.events + sim->progress_every : UINT64_MAX;
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
        kb__heap_key top;
        kb__timer *node = pop_min(sim, limit, NULL, &top);
        if (!node) break;
        clock_to(sim, top.t);
        kb__event_fn fn = node->fn;
        void *arg = node->arg;
        uint64_t data = node->data;
        if (top.seq & 1) {
            node->idx = KB__TIMER_IDLE;
        } else if (node->pooled) {
            node->arg = sim->free_nodes;
            sim->free_nodes = node;
        }
        sim->hot.events++;
        fn(sim, arg, data);
        if (__builtin_expect(sim->hot.events >= sim->progress_next, 0)) progress(sim);
    }
    sim->loop_active = false;
    sim->loop_until = NULL;
    return emptied;
}

void kb__sim_fail(kb__sim *sim, int code, const char *what)
{
    if (code == KB_ENOMEM && sim->budget.refused) /* an allocator refused by the budget */
        code = KB_EBUDGET, what = sim->budget.msg;
    if (!sim->fail_pending) kb__err_set(&sim->fail, code, "%s", what);
    sim->fail_pending = true;
    if (!sim->halted) kb__err_set(&sim->halt, code, "%s", what);
    sim->halted = true;
}

int kb__sim_halted(kb__sim *sim, const char *op)
{
    if (!sim->halted || sim->fail_pending) return 0; /* the failure itself is reported first */
    return kb__err_set(
        &sim->err, KB_ESTATE,
        "%s: the simulation stopped at an earlier failure and cannot go on (%.600s); "
        "close this machine (kb_close) and open another",
        op, sim->halt.msg);
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
    if ((rc = kb__sim_halted(sim, op))) return rc;
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
    if (sim) kb__budget_init(&sim->budget);
    if (!sim || heap_reserve(sim, &sim->heap, 1024)) {
        free(sim);
        kb__err_set(err, KB_ENOMEM, "simulator: out of memory creating the event queue");
        return NULL;
    }
    sim->seed = seed;
    sim->seq = 2; /* 0 means "not queued" to kb__sim_schedule callers */
    sim->progress_next = UINT64_MAX;
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
    free(sim);
}

kb__budget *kb__sim_budget(kb__sim *sim)
{
    return &sim->budget;
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
