/*
 * queue.c — the simulator object, the event queue and the event loop.
 *
 * Two structures hold the queued entries; each pop takes the smaller of
 * their two minima, so entries run in exact (time, sequence) order:
 *
 * - The near-time wheel: untracked entries (pooled posts, process
 *   wake-ups) due in [wheel_base, wheel_base + KB__WHEEL_SLOTS) ps sit in
 *   the slot of their exact picosecond, a singly linked list, newest first.
 *   Entries are scheduled in increasing sequence order, so reversing a slot
 *   gives its (time, seq) order; the slot being served is moved to the cur
 *   list (oldest first) and its base becomes wheel_base, and later entries
 *   for that same picosecond are appended to cur. A bitmap with a summary
 *   word level finds the next non-empty slot. Almost every event of the
 *   models is due within a few tens of ns, so a post is a list push and a
 *   pop a bit scan: O(1).
 * - An 8-ary min-heap of (time, sequence) keys stored by value, with the
 *   node pointers in a parallel array, so comparisons never chase pointers
 *   and each sibling group is two cache lines. It holds timers (which track
 *   their heap slot for O(log n) cancellation; the low bit of the sequence
 *   number marks them, so other nodes are never written during sift moves)
 *   and untracked entries outside the wheel's window (far future, or before
 *   wheel_base, which only a main-stack post after a stopped loop can be).
 *
 * Sequence numbers grow by two per scheduling, which gives the strict
 * (time, scheduling order) contract of sim.h.
 *
 * Cost: wheel post and pop O(1); heap post and pop O(log8 n) entry moves
 * (8-ary: fewer dependent levels than 4-ary, measured faster on HOLD and
 * PHOLD); pooled nodes come from 256-node chunks kept until
 * kb__sim_destroy, so steady state allocates nothing.
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

static void sift_up(kb__sim *sim, uint32_t i, kb__heap_key k, kb__timer *node)
{
    kb__heap_key *key = sim->heap_key;
    kb__timer **nodes = sim->heap_node;
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
static void sift_down(kb__sim *sim, uint32_t n, uint32_t i, kb__time t, uint64_t seq,
                      kb__timer *node)
{
    kb__heap_key *key = sim->heap_key;
    kb__timer **nodes = sim->heap_node;
    const kb__heap_key k = {t, seq};
    for (uint32_t c; (c = min_child(key, n, i)) < n && before(&key[c], &k); i = c)
        move_slot(key, nodes, i, c);
    place(key, nodes, i, t, seq, node);
}

static int heap_grow(kb__sim *sim)
{
    uint32_t cap = sim->heap_cap ? sim->heap_cap * 2 : 1024;
    if (cap <= sim->heap_cap) {
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
    if (sim->heap_len) {
        memcpy(key, sim->heap_key, sim->heap_len * sizeof *key);
        memcpy(node, sim->heap_node, sim->heap_len * sizeof *node);
    }
    free(sim->heap_mem);
    free(sim->heap_node);
    sim->heap_mem = mem;
    sim->heap_key = key;
    sim->heap_node = node;
    sim->heap_cap = cap;
    return 0;
}

/* Queues node at `at` in the heap; returns the entry's sequence number (0
 * if the heap could not grow and the node was dropped). */
static inline uint64_t heap_push(kb__sim *sim, kb__time at, kb__timer *node, uint64_t tracked)
{
    if (sim->heap_len == sim->heap_cap && heap_grow(sim)) return 0;
    kb__heap_key k = {at, sim->seq | tracked};
    sim->seq += 2;
    sift_up(sim, sim->heap_len++, k, node);
    return k.seq;
}

static void heap_remove(kb__sim *sim, uint32_t i)
{
    uint32_t n = --sim->heap_len;
    if (i == n) return;
    kb__heap_key last = sim->heap_key[n];
    if (before(&last, &sim->heap_key[i]))
        sift_up(sim, i, last, sim->heap_node[n]);
    else
        sift_down(sim, n, i, last.t, last.seq, sim->heap_node[n]);
}

/* ---- near-time wheel ------------------------------------------------------ */

#define WHEEL_MASK ((kb__time)KB__WHEEL_SLOTS - 1)

static inline void wheel_mark(kb__sim *sim, uint32_t s)
{
    sim->wheel_bit[s >> 6] |= (uint64_t)1 << (s & 63);
    sim->wheel_sum[s >> 12] |= (uint64_t)1 << ((s >> 6) & 63);
}

static inline void wheel_unmark(kb__sim *sim, uint32_t s)
{
    uint64_t *w = &sim->wheel_bit[s >> 6];
    *w &= ~((uint64_t)1 << (s & 63));
    if (!*w) sim->wheel_sum[s >> 12] &= ~((uint64_t)1 << ((s >> 6) & 63));
}

/* First word >= w (of KB__WHEEL_WORDS) with a non-empty slot, or
 * KB__WHEEL_WORDS. */
static inline uint32_t wheel_word_from(const kb__sim *sim, uint32_t w)
{
    uint32_t i = w >> 6;
    uint64_t m = sim->wheel_sum[i] & (~(uint64_t)0 << (w & 63));
    for (;;) {
        if (m) return (i << 6) + (uint32_t)__builtin_ctzll(m);
        if (++i == KB__WHEEL_WORDS / 64) return KB__WHEEL_WORDS;
        m = sim->wheel_sum[i];
    }
}

/* The first non-empty slot at or after slot s, circularly; the wheel must
 * hold an entry. In time order because every entry lies in [wheel_base,
 * wheel_base + KB__WHEEL_SLOTS) and s is wheel_base's slot. */
static inline uint32_t wheel_next(const kb__sim *sim, uint32_t s)
{
    uint32_t w = s >> 6;
    uint64_t m = sim->wheel_bit[w] & (~(uint64_t)0 << (s & 63));
    if (m) return (w << 6) + (uint32_t)__builtin_ctzll(m);
    uint32_t v = w + 1 < KB__WHEEL_WORDS ? wheel_word_from(sim, w + 1) : KB__WHEEL_WORDS;
    if (v == KB__WHEEL_WORDS) v = wheel_word_from(sim, 0);
    return (v << 6) + (uint32_t)__builtin_ctzll(sim->wheel_bit[v]);
}

/* Queues an untracked node at `at` (>= now); returns its sequence number. */
static inline uint64_t queue_untracked(kb__sim *sim, kb__time at, kb__timer *node)
{
    if (at < sim->wheel_base || at - sim->wheel_base > WHEEL_MASK) {
        /* An empty wheel moves to now (nothing queued is earlier). */
        if (sim->wheel_n || sim->cur_head || at - sim->hot.now > WHEEL_MASK)
            return heap_push(sim, at, node, 0);
        sim->wheel_base = sim->hot.now;
    }
    uint64_t seq = sim->seq;
    sim->seq += 2;
    node->at = at;
    node->seq = seq;
    if (sim->cur_head && at == sim->cur_t) {
        node->next = NULL;
        sim->cur_tail->next = node;
        sim->cur_tail = node;
        return seq;
    }
    uint32_t s = (uint32_t)(at & WHEEL_MASK);
    node->next = sim->wheel[s];
    if (!node->next) wheel_mark(sim, s);
    sim->wheel[s] = node;
    sim->wheel_n++;
    return seq;
}

/* Makes slot s (due at t) the cur list, oldest first; t becomes the base. */
static void wheel_serve(kb__sim *sim, uint32_t s, kb__time t)
{
    kb__timer *n = sim->wheel[s], *prev = NULL;
    sim->wheel[s] = NULL;
    wheel_unmark(sim, s);
    sim->cur_tail = n;
    while (n) {
        kb__timer *next = n->next;
        n->next = prev;
        prev = n;
        n = next;
        sim->wheel_n--;
    }
    sim->cur_head = prev;
    sim->cur_t = t;
    sim->wheel_base = t;
}

static inline bool queue_empty(const kb__sim *sim)
{
    return sim->heap_len == 0 && !sim->cur_head && !sim->wheel_n;
}

/* Pops the smallest entry if its time is <= limit and (when only is not
 * NULL) it is an untracked entry with callback only; NULL otherwise. When
 * no slot is being served and the wheel's earliest slot is due no later
 * than the heap's minimum (and the limit), that slot is served first: the
 * next pop is then at its time, and whatever is queued later for that
 * picosecond has a larger sequence number, so it belongs behind cur. */
static inline kb__timer *pop_min(kb__sim *sim, kb__time limit, kb__event_fn only, kb__heap_key *out)
{
    uint32_t n = sim->heap_len;
    if (!sim->cur_head && sim->wheel_n) {
        uint32_t s = wheel_next(sim, (uint32_t)(sim->wheel_base & WHEEL_MASK));
        kb__time t = sim->wheel_base + (((kb__time)s - sim->wheel_base) & WHEEL_MASK);
        if (t <= limit && (n == 0 || t <= sim->heap_key[0].t)) wheel_serve(sim, s, t);
    }
    kb__timer *c = sim->cur_head;
    if (c && (n == 0 || sim->cur_t < sim->heap_key[0].t ||
              (sim->cur_t == sim->heap_key[0].t && c->seq < sim->heap_key[0].seq))) {
        if (sim->cur_t > limit || (only && c->fn != only)) return NULL;
        sim->cur_head = c->next;
        out->t = sim->cur_t;
        out->seq = c->seq;
        return c;
    }
    if (n == 0) return NULL;
    kb__heap_key top = sim->heap_key[0];
    kb__timer *node = sim->heap_node[0];
    if (top.t > limit || (only && ((top.seq & 1) || node->fn != only))) return NULL;
    sim->heap_len = --n;
    if (n) sift_down(sim, n, 0, sim->heap_key[n].t, sim->heap_key[n].seq, sim->heap_node[n]);
    /* Nothing in the wheel is earlier than top (see above): keep its window
     * moving with the clock. */
    if (top.t > sim->wheel_base) sim->wheel_base = top.t;
    *out = top;
    return node;
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
    if (t->idx != KB__TIMER_IDLE) heap_remove(sim, t->idx);
    t->idx = KB__TIMER_IDLE;
    t->at = time_after(sim, delay);
    heap_push(sim, t->at, t, 1);
}

int kb__timer_stop(kb__sim *sim, kb__timer *t)
{
    if (t->idx == KB__TIMER_IDLE) return 0;
    heap_remove(sim, t->idx);
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

/* Unlinks node from the list at *head (whose last node is *tail, if tail is
 * given); 1 if it was there. */
static int list_remove(kb__timer **head, kb__timer **tail, const kb__timer *node, uint64_t seq)
{
    kb__timer *prev = NULL;
    for (kb__timer *n = *head; n; prev = n, n = n->next) {
        if (n != node || n->seq != seq) continue;
        if (prev)
            prev->next = n->next;
        else
            *head = n->next;
        if (tail && *tail == n) *tail = prev;
        return 1;
    }
    return 0;
}

int kb__sim_unschedule(kb__sim *sim, kb__timer *node, uint64_t seq)
{
    if (sim->cur_head && node->at == sim->cur_t &&
        list_remove(&sim->cur_head, &sim->cur_tail, node, seq))
        return 1;
    uint32_t s = (uint32_t)(node->at & WHEEL_MASK);
    if (sim->wheel[s] && list_remove(&sim->wheel[s], NULL, node, seq)) {
        sim->wheel_n--;
        if (!sim->wheel[s]) wheel_unmark(sim, s);
        return 1;
    }
    for (uint32_t i = 0; i < sim->heap_len; i++)
        if (sim->heap_node[i] == node && sim->heap_key[i].seq == seq) {
            heap_remove(sim, i);
            return 1;
        }
    return 0;
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
    kb__heap_key top;
    kb__timer *node = pop_min(sim, sim->loop_limit, fn, &top);
    if (node) {
        sim->hot.now = top.t;
        sim->hot.events++;
    }
    return node;
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
        sim->hot.now = top.t;
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
    if (sim) {
        sim->wheel = calloc(KB__WHEEL_SLOTS, sizeof *sim->wheel);
        sim->wheel_bit = calloc(KB__WHEEL_WORDS, sizeof *sim->wheel_bit);
    }
    if (!sim || !sim->wheel || !sim->wheel_bit || heap_grow(sim)) {
        if (sim) {
            free(sim->wheel);
            free(sim->wheel_bit);
        }
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
    free(sim->heap_mem);
    free(sim->heap_node);
    free(sim->wheel);
    free(sim->wheel_bit);
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
