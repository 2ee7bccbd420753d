/*
 * flow.c — the flow model: a message is one flow on its route, flows that
 * share a resource (a link direction, a memory) share it max-min fairly
 * (docs/timing-model.md, "The flow contract").
 *
 * A flow offered at t0 first waits its latency α, then moves its bytes:
 * alone it would take D more (the drain of the packet closed form at the
 * bottleneck), so α = T_solo − D where T_solo is the exact time of the
 * message alone (kb__fab_solo). Its progress is counted in picoseconds of
 * that solo drain: at rate r against its solo rate r0 (the smallest
 * capacity among its resources) it drains r / r0 of them per picosecond,
 * so a flow that keeps r = r0 ends at exactly t0 + T_solo, to the ps.
 *
 * Its resources are the links of its route after the first, the serial
 * workers of the nodes it crosses (a transit node's: capacity one packet
 * per worker service) and the memories it starts or ends at. The first
 * link serves whole messages in the order they are offered, as the packet
 * model's does (it takes all of a message's packets at once): a flow
 * starts when that link has served the earlier ones at its own rate
 * (l0_free), and does not share it again. A message of one packet (a
 * command, request, acknowledgement or credit)
 * has nothing to share: it takes its solo time from its start.
 *
 * Rates are set by progressive filling (SimGrid's LMM without weights):
 * every flow of a component rises together, a constraint that saturates
 * freezes its flows at its fair share, until every flow is frozen. They
 * change only when a flow joins (after α) or ends, and only in the
 * component of flows and resources connected to the resources it touches;
 * the other flows keep their rates and their pending end. Every change at
 * one picosecond is solved once, by one event posted at that time.
 *
 * A flow that joins resources no other flow uses (and none awaiting a
 * solve), or leaves resources only it used, changes nobody's rate: it
 * takes its solo rate, or just leaves, with no solve.
 *
 * Per message: one event for α, at most one solve (shared), and its end:
 * a flow that shares keeps one timer for it, moved (a heap re-key, with a
 * new sequence number exactly as a new event would take) each time its
 * rate changes, so no stale end events wait in the queue; a message of
 * one packet posts its end once. The packets of a message are not
 * seen one by one: the end is handed over once (KB__GRAIN_MESSAGE), with
 * the last two arrivals of the solo schedule shifted to the flow's end.
 *
 * Layout: a resource is one 64-byte line (its flow array and slots one
 * allocation), and what a solve reads of a flow is its first line: a solve
 * over a 64-SIP machine's lockstep components is bound by cache misses.
 *
 * Invariants: a flow is in its resources' arrays exactly while it drains;
 * a solve advances whole components, so every flow of a component was last
 * advanced (t_last) at the same time. A resource only one flow uses (and
 * no change awaits) takes no part in a solve: it limits nothing but that
 * flow's solo rate and connects it to nobody.
 *
 * A solve covers every flow connected to a resource that changed at its
 * picosecond: on a machine whose SIPs move in lockstep, many components
 * that share nothing (8 SIPs: 14 a solve on average). It splits them
 * (union-find while collecting) and fills each alone, keeping each one's
 * flows and resources in the order of the walk: the choices, and so the
 * rates to the bit, are those of one filling over all of them, since a
 * level freezes flows of one component and changes no other.
 *
 * Cost: a solve is O(flows × path) over its components to collect,
 * advance, split and reschedule them, plus each component's filling:
 * O(levels × (shared resources + flows)) by scans for a small one,
 * O((flows × path) · log(shared resources) + flows · log(flows)) with a
 * heap for a large one; nothing for flows outside them. A message of one
 * packet costs one event and no resources.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/internal.h"

typedef struct flow flow;

/* Resources a flow holds in its own second cache line (a longer route's
 * are allocated). */
#define FLOW_INLINE 14

/* A flow's first 64 bytes are what a solve and a stale end event read
 * (flows are 64-byte aligned: one cache line each for the solver). */
struct flow {
    double left;      /* solo picoseconds of drain still to go */
    double rate;      /* bytes/ns since t_last (0: not solved yet) */
    double next_rate; /* solver: the rate being set */
    double solo;      /* bytes/ns alone: the smallest capacity on its path */
    kb__time t_last;  /* progress counted up to here */
    uint32_t *res;    /* resource ids: links, then memories; then (slot) the
                         index in each resource's flow array */
    uint64_t gen;     /* the join and a posted end carry it: one of a past life is stale */
    uint32_t mark;    /* solver: visited */
    uint16_t n_res;
    uint8_t frozen;                /* solver: rate set */
    uint32_t inl[2 * FLOW_INLINE]; /* res and slot of a route that fits */
    kb__fab_msg *msg;
    uint32_t *slot; /* res + cap_res */
    uint32_t cap_res;
    kb__time t0;    /* offered */
    kb__time gap;   /* solo: last arrival minus the one before */
    kb__time alpha; /* latency before the bytes move */
    flow *next;     /* free list */
    flow *all_next; /* every flow allocated */
    kb__timer end;  /* its end at its present rate, while it drains shared */
};

/* A resource is one cache line (the array is 64-byte aligned). */
typedef struct res {
    double cap;   /* bytes/ns */
    double left;  /* solver: capacity not yet given */
    flow **flows; /* then (fslot, at flows + cap_n): flows[i]->res[fslot[i]]
                     is this resource */
    uint32_t n, cap_n;
    uint32_t mark, unf; /* solver: visited, unfrozen flows */
    uint32_t ci;        /* solver: index in st->cr while collecting and
                           splitting; then (fill_heap) in its component's
                           shared resources */
    uint32_t dirty;
    uint8_t pad[16]; /* to the line */
} res;

_Static_assert(sizeof(res) == 64, "a resource is one cache line");
_Static_assert(offsetof(flow, inl) == 64, "what a solve reads is one cache line, then its ids");

#define RES_FSLOT(r) ((uint32_t *)((r)->flows + (r)->cap_n))

/* An array of n resources, 64-byte aligned, zeroed from index from; the
 * first from copied from old (freed). NULL when out of memory. */
static res *res_array(res *old, uint32_t from, uint32_t n)
{
    res *r = aligned_alloc(64, (size_t)(n ? n : 1) * sizeof *r);
    if (!r) return NULL;
    if (from) memcpy(r, old, from * sizeof *r);
    memset(r + from, 0, (size_t)(n - from) * sizeof *r);
    free(old);
    return r;
}

typedef struct flow_state {
    kb__fabric *fab;
    res *res;
    uint32_t n_res, cap_res_arr;
    uint32_t *mem_res; /* per node: its memory's resource id or KB__NO_NODE */
    uint32_t *wk_res;  /* per node: its serial worker's resource id or KB__NO_NODE */
    kb__time *l0_free; /* per link: when it has served the messages offered on it as
                          their first link (FIFO at the source, see start) */
    flow *free, *all;  /* recycled flows; every flow allocated (for fini) */
    uint32_t *dirty;
    size_t n_dirty, cap_dirty;
    int solve_posted;
    uint32_t mark;
    flow **cf; /* solver scratch: the component's flows and resources */
    size_t n_cf, cap_cf;
    uint32_t *cfi; /* solver: per flow of st->cf, the index in st->cr of the resource
                      the walk reached it from */
    size_t cap_cfi;
    uint32_t *cr;
    size_t n_cr, cap_cr;
    uint32_t *sh; /* solver scratch: the component's resources used by >= 2 flows */
    size_t n_sh, cap_sh;
    uint32_t *uf; /* solver: union-find over st->cr (parent index), then component numbers */
    size_t cap_uf;
    flow **pcf; /* solver: st->cf grouped by connected component, in order */
    size_t cap_pcf;
    uint32_t *psh; /* solver: st->sh grouped the same way */
    size_t cap_psh;
    uint32_t *cstart; /* solver: component c's flows are pcf[cstart[2c] ..], its shared
                         resources psh[cstart[2c + 1] ..] */
    size_t cap_cstart;
    uint32_t *heap, *hpos; /* solver: heap of st->sh indices, position of each */
    uint32_t n_heap;
    size_t cap_heap, cap_hpos;
    uint32_t *touched; /* solver: the shared resources a level of fill_heap changed */
    uint32_t n_touched, level;
    uint32_t *tlevel; /* solver: the last level that touched each (0: none) */
    size_t cap_touched, cap_tlevel;
    double *hkey; /* solver: each shared resource's share */
    size_t cap_hkey;
    struct by_solo *order; /* solver: the component's flows by solo rate */
    size_t cap_order;
    struct by_solo *order_tmp; /* solver: sort_by_solo's other half */
    size_t cap_order_tmp;
    uint32_t version; /* of the resources: a route's memo (route_res) made at another is stale */
} flow_state;

static flow_state *state(const kb__fabric *fab)
{
    return fab->model_state;
}

/* Grows *v (elements of size sz) to hold n; 0 or KB_ENOMEM. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c *= 2;
    void *p = realloc(*v, c * sz);
    if (!p) return KB_ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

/* ---- resources ------------------------------------------------------------ */

static int res_add(res *r, flow *f, uint32_t k)
{
    if (r->n == r->cap_n) {
        uint32_t c = r->cap_n ? 2 * r->cap_n : 4;
        flow **fl = malloc(c * (sizeof *fl + sizeof(uint32_t)));
        if (!fl) return KB_ENOMEM;
        if (r->n) {
            memcpy(fl, r->flows, r->n * sizeof *fl);
            memcpy(fl + c, RES_FSLOT(r), r->n * sizeof(uint32_t));
        }
        free(r->flows);
        r->flows = fl;
        r->cap_n = c;
    }
    f->slot[k] = r->n;
    r->flows[r->n] = f;
    RES_FSLOT(r)[r->n++] = k;
    return 0;
}

static void res_remove(res *r, flow *f, uint32_t k)
{
    uint32_t s = f->slot[k], last = --r->n;
    if (s != last) {
        flow *g = r->flows[last];
        uint32_t *fslot = RES_FSLOT(r);
        r->flows[s] = g;
        fslot[s] = fslot[last];
        g->slot[fslot[s]] = s;
    }
}

static void mark_dirty(kb__sim *sim, flow_state *st, uint32_t id);

/* ---- the solver ----------------------------------------------------------- */

#define NO_ROOT  UINT32_MAX
#define COMP_BIT 0x80000000u

/* Union-find over the collected resources (indices in st->cr): the root
 * of i, halving the path on the way. */
static uint32_t uf_find(uint32_t *uf, uint32_t i)
{
    while (uf[i] != i) {
        uf[i] = uf[uf[i]];
        i = uf[i];
    }
    return i;
}

/* Adds resource id to the collected ones, in the set of index root. */
static inline int collect_res(flow_state *st, uint32_t id, uint32_t root)
{
    if (grow((void **)&st->cr, &st->cap_cr, st->n_cr + 1, sizeof *st->cr) ||
        grow((void **)&st->uf, &st->cap_uf, st->n_cr + 1, sizeof *st->uf))
        return KB_ENOMEM;
    res *r = &st->res[id];
    r->mark = st->mark;
    r->ci = (uint32_t)st->n_cr;
    st->uf[st->n_cr] = root == NO_ROOT ? (uint32_t)st->n_cr : root;
    st->cr[st->n_cr++] = id;
    return 0;
}

/* The flows and resources connected to the dirty resources, in the order
 * of a breadth-first walk from them (the order the filling breaks ties
 * in), and which of them are connected to which (st->uf). */
static int collect(flow_state *st)
{
    uint32_t m = ++st->mark;
    st->n_cf = st->n_cr = 0;
    /* The walk's loads are cache misses on a large machine: each level's
     * are prefetched together, so they overlap. */
    for (size_t i = 0; i < st->n_dirty; i++)
        __builtin_prefetch(&st->res[st->dirty[i]], 1);
    for (size_t i = 0; i < st->n_dirty; i++) {
        res *r = &st->res[st->dirty[i]];
        r->dirty = 0;
        if (r->mark != m && collect_res(st, st->dirty[i], NO_ROOT)) return KB_ENOMEM;
    }
    st->n_dirty = 0;
    for (size_t i = 0; i < st->n_cr; i++) {
        res *r = &st->res[st->cr[i]];
        for (uint32_t j = 0; j < r->n; j++) {
            __builtin_prefetch(r->flows[j], 1);
            __builtin_prefetch((char *)r->flows[j] + 64);
        }
        for (uint32_t j = 0; j < r->n; j++) {
            flow *f = r->flows[j];
            if (f->mark == m) continue;
            f->mark = m;
            for (uint32_t k = 0; k < f->n_res; k++)
                __builtin_prefetch(&st->res[f->res[k]], 1);
            if (grow((void **)&st->cf, &st->cap_cf, st->n_cf + 1, sizeof *st->cf) ||
                grow((void **)&st->cfi, &st->cap_cfi, st->n_cf + 1, sizeof *st->cfi))
                return KB_ENOMEM;
            st->cfi[st->n_cf] = (uint32_t)i;
            st->cf[st->n_cf++] = f;
            uint32_t root = uf_find(st->uf, (uint32_t)i);
            for (uint32_t k = 0; k < f->n_res; k++) {
                res *q = &st->res[f->res[k]];
                if (q->mark != m) {
                    /* only f's (and not dirty: those are collected first):
                       it limits nothing but f's solo rate, connects nothing */
                    if (q->n < 2) continue;
                    if (collect_res(st, f->res[k], root)) return KB_ENOMEM;
                    continue;
                }
                uint32_t o = uf_find(st->uf, q->ci);
                if (o < root)
                    st->uf[root] = o, root = o;
                else if (o > root)
                    st->uf[o] = root;
            }
        }
    }
    return 0;
}

/* The component number of collected resource i, once split numbered them. */
static uint32_t comp_of(const uint32_t *uf, uint32_t i)
{
    uint32_t v = uf[i];
    return (v & COMP_BIT ? v : uf[v]) & ~COMP_BIT;
}

/* Groups the collected flows (st->cf) and shared resources (st->sh) by
 * connected component into st->pcf and st->psh, each group in the order
 * of st->cf and st->sh, the components numbered in order of their first
 * flow: component c has the flows pcf[cstart[c] .. cstart[c + 1]) and the
 * shared resources psh[cstart[n + 1 + c] .. cstart[n + 2 + c]). Returns
 * the number of components n; 0 when out of memory. */
static size_t split(flow_state *st)
{
    uint32_t *uf = st->uf;
    for (size_t i = 0; i < st->n_cr; i++) /* every index points at its root */
        uf[i] = uf_find(uf, (uint32_t)i);
    /* A root's entry becomes its component number, with COMP_BIT set (the
     * indices are below 2^31: uf_find never returns one with it). */
    size_t n = 0;
    for (size_t i = 0; i < st->n_cf; i++) {
        uint32_t r = st->cfi[i];
        if (!(uf[r] & COMP_BIT)) r = uf[r];
        if (!(uf[r] & COMP_BIT)) uf[r] = COMP_BIT | (uint32_t)n++;
    }
    if (grow((void **)&st->pcf, &st->cap_pcf, st->n_cf, sizeof *st->pcf) ||
        grow((void **)&st->psh, &st->cap_psh, st->n_sh, sizeof *st->psh) ||
        grow((void **)&st->cstart, &st->cap_cstart, 2 * n + 2, sizeof *st->cstart))
        return 0;
    uint32_t *fo = st->cstart, *so = st->cstart + n + 1;
    memset(fo, 0, (2 * n + 2) * sizeof *fo);
    for (size_t i = 0; i < st->n_cf; i++)
        fo[comp_of(uf, st->cfi[i]) + 1]++;
    for (size_t i = 0; i < st->n_sh; i++)
        so[comp_of(uf, st->res[st->sh[i]].ci) + 1]++;
    for (size_t c = 0; c < n; c++)
        fo[c + 1] += fo[c], so[c + 1] += so[c];
    /* Place, then shift the offsets back (each placement moved one up). */
    for (size_t i = 0; i < st->n_cf; i++)
        st->pcf[fo[comp_of(uf, st->cfi[i])]++] = st->cf[i];
    for (size_t i = 0; i < st->n_sh; i++)
        st->psh[so[comp_of(uf, st->res[st->sh[i]].ci)]++] = st->sh[i];
    for (size_t c = n; c > 0; c--)
        fo[c] = fo[c - 1], so[c] = so[c - 1];
    fo[0] = so[0] = 0;
    return n;
}

/* Brings the component's flows to now (their drained progress) and makes
 * its resources ready for a filling. */
static int advance(flow_state *st, kb__time now)
{
    st->n_sh = 0;
    if (grow((void **)&st->sh, &st->cap_sh, st->n_cr, sizeof *st->sh)) return KB_ENOMEM;
    for (size_t i = 0; i < st->n_cr; i++) {
        res *r = &st->res[st->cr[i]];
        r->left = r->cap;
        r->unf = r->n;
        if (r->n >= 2) st->sh[st->n_sh++] = st->cr[i];
    }
    for (size_t i = 0; i < st->n_cf; i++) {
        flow *f = st->cf[i];
        if (f->rate > 0) f->left -= f->rate / f->solo * (double)(now - f->t_last);
        if (f->left < 0) f->left = 0;
        f->t_last = now;
        f->frozen = 0;
    }
    return 0;
}

/* ---- progressive filling -------------------------------------------------- */

/* One connected component: its flows and its shared resources (ids). */
typedef struct comp {
    flow **cf;
    size_t n_cf;
    const uint32_t *sh;
    size_t n_sh;
} comp;

/* The solver's heap of shared resources, keyed by (fair share left / unf,
 * index in st->sh): its top is the resource the scan in order with a
 * strict < would pick. hkey caches each one's share, computed as the scan
 * would compute it; hpos is its heap position (NO_POS: out). */
#define NO_POS UINT32_MAX

static int sh_before(const flow_state *st, uint32_t a, uint32_t b)
{
    return st->hkey[a] < st->hkey[b] || (st->hkey[a] == st->hkey[b] && a < b);
}

static void heap_put(flow_state *st, uint32_t at, uint32_t i)
{
    st->heap[at] = i;
    st->hpos[i] = at;
}

static void sift_up(flow_state *st, uint32_t at)
{
    uint32_t i = st->heap[at];
    while (at) {
        uint32_t up = (at - 1) / 2;
        if (!sh_before(st, i, st->heap[up])) break;
        heap_put(st, at, st->heap[up]);
        at = up;
    }
    heap_put(st, at, i);
}

static void sift_down(flow_state *st, uint32_t at)
{
    uint32_t i = st->heap[at];
    for (;;) {
        uint32_t c = 2 * at + 1;
        if (c >= st->n_heap) break;
        if (c + 1 < st->n_heap && sh_before(st, st->heap[c + 1], st->heap[c])) c++;
        if (!sh_before(st, st->heap[c], i)) break;
        heap_put(st, at, st->heap[c]);
        at = c;
    }
    heap_put(st, at, i);
}

/* Shared resource i of the component (sh) changed its left or unf: re-key
 * or drop it. */
static void sh_changed(flow_state *st, const uint32_t *sh, uint32_t i)
{
    const res *r = &st->res[sh[i]];
    uint32_t at = st->hpos[i];
    if (at == NO_POS) return;
    if (!r->unf) {
        st->hpos[i] = NO_POS;
        uint32_t last = st->heap[--st->n_heap];
        if (at == st->n_heap) return;
        heap_put(st, at, last);
        sift_up(st, at);
        sift_down(st, st->hpos[last]);
        return;
    }
    st->hkey[i] = r->left / r->unf;
    sift_up(st, at);
    sift_down(st, st->hpos[i]);
}

typedef struct by_solo {
    double solo;
    uint32_t i; /* index in the component's flows */
} by_solo;

/* Whether x comes before y: by solo rate, then index (a strict total
 * order: the index is unique). */
static inline bool by_solo_before(const by_solo *x, const by_solo *y)
{
    return x->solo < y->solo || (x->solo == y->solo && x->i < y->i);
}

/* Sorts the n entries of a by by_solo_before, by merging runs of doubling
 * width through tmp (n entries): the one order a strict total order gives.
 * Returns the sorted array (a or tmp). */
static by_solo *sort_by_solo(by_solo *a, by_solo *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = by_solo_before(&a[j], &a[i]) ? a[j++] : a[i++];
            while (i < mid)
                tmp[k++] = a[i++];
            while (j < hi)
                tmp[k++] = a[j++];
        }
        by_solo *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

/* Freezes the unfrozen flows of best (or alone) at share. With the heap,
 * the shared resources the level changes are re-keyed once each when the
 * level is done, in the order it first touched them: the heap is read
 * only between levels, and each re-key changes one key of a valid heap
 * to its final left / unf, so the next level's top (a strict order on
 * (share, index)) is the one a re-key per change would leave. */
static void freeze(flow_state *st, const comp *c, res *best, flow *alone, double share,
                   size_t *open, int heap)
{
    uint32_t level = heap ? ++st->level : 0;
    for (uint32_t j = 0, n = best ? best->n : 1; j < n; j++) {
        flow *f = best ? best->flows[j] : alone;
        if (f->frozen) continue;
        f->frozen = 1;
        f->next_rate = share;
        (*open)--;
        for (uint32_t k = 0; k < f->n_res; k++) {
            res *r = &st->res[f->res[k]];
            if (r->n < 2) continue; /* limits only f: its solo rate */
            r->left -= share;
            r->unf--;
            if (heap && st->tlevel[r->ci] != level) {
                st->tlevel[r->ci] = level;
                st->touched[st->n_touched++] = r->ci;
            }
        }
    }
    if (!heap) return;
    for (uint32_t i = 0; i < st->n_touched; i++)
        sh_changed(st, c->sh, st->touched[i]);
    st->n_touched = 0;
}

/* Progressive filling by scans: each level looks at every shared
 * resource and every flow of the component (small components). */
static void fill_scan(flow_state *st, const comp *c)
{
    size_t open = c->n_cf;
    while (open) {
        res *best = NULL;
        flow *alone = NULL;
        double share = 0;
        for (size_t i = 0; i < c->n_sh; i++) {
            res *r = &st->res[c->sh[i]];
            if (!r->unf) continue;
            double s = r->left / r->unf;
            if (!best || s < share) best = r, share = s;
        }
        for (size_t i = 0; i < c->n_cf; i++) {
            flow *f = c->cf[i];
            if (!f->frozen && ((!best && !alone) || f->solo < share)) alone = f, share = f->solo;
        }
        if (alone) best = NULL;
        if (share < 1e-9) share = 1e-9;
        freeze(st, c, best, alone, share, &open, 0);
    }
}

/* Progressive filling with the shared resources in a heap by share and
 * the flows in order of solo rate: a level costs O(log) per resource whose
 * share it changes (large components). The same choices as fill_scan. */
static int fill_heap(flow_state *st, const comp *c)
{
    if (grow((void **)&st->heap, &st->cap_heap, c->n_sh, sizeof *st->heap) ||
        grow((void **)&st->hpos, &st->cap_hpos, c->n_sh, sizeof *st->hpos) ||
        grow((void **)&st->hkey, &st->cap_hkey, c->n_sh, sizeof *st->hkey) ||
        grow((void **)&st->order, &st->cap_order, c->n_cf, sizeof *st->order) ||
        grow((void **)&st->order_tmp, &st->cap_order_tmp, c->n_cf, sizeof *st->order_tmp) ||
        grow((void **)&st->touched, &st->cap_touched, c->n_sh, sizeof *st->touched) ||
        grow((void **)&st->tlevel, &st->cap_tlevel, c->n_sh, sizeof *st->tlevel))
        return KB_ENOMEM;
    st->n_heap = (uint32_t)c->n_sh;
    st->level = 0;
    st->n_touched = 0;
    for (uint32_t i = 0; i < c->n_sh; i++) {
        res *r = &st->res[c->sh[i]];
        r->ci = i;
        st->tlevel[i] = 0;
        st->hkey[i] = r->left / r->unf;
        heap_put(st, i, i);
    }
    for (uint32_t i = st->n_heap / 2; i-- > 0;)
        sift_down(st, i);
    by_solo *order = st->order;
    for (uint32_t i = 0; i < c->n_cf; i++)
        order[i] = (by_solo){c->cf[i]->solo, i};
    order = sort_by_solo(order, st->order_tmp, c->n_cf);
    size_t open = c->n_cf, next = 0;
    while (open) {
        res *best = st->n_heap ? &st->res[c->sh[st->heap[0]]] : NULL;
        double share = best ? st->hkey[st->heap[0]] : 0;
        flow *alone = NULL;
        while (c->cf[order[next].i]->frozen)
            next++;
        flow *first = c->cf[order[next].i];
        if (!best || first->solo < share) alone = first, share = first->solo;
        if (alone) best = NULL;
        if (share < 1e-9) share = 1e-9;
        freeze(st, c, best, alone, share, &open, 1);
    }
    return 0;
}

/* Progressive filling: the tightest constraint freezes its flows at its
 * fair share, until every flow of the component is frozen. A resource
 * only one flow uses limits nothing but that flow, as its solo rate (the
 * smallest capacity on its path) does: so the constraints are the shared
 * resources (st->sh) and each flow's solo rate. Ties: the first shared
 * resource in the component's order, then the first flow. Both ways of
 * finding the tightest make the same choices and the same arithmetic in
 * the same order, hence the same rates to the bit; scans are cheaper up
 * to FILL_SCAN_MAX flows and shared resources. */
#define FILL_SCAN_MAX 64

static int fill(flow_state *st, const comp *c)
{
    if (c->n_cf + c->n_sh <= FILL_SCAN_MAX) {
        fill_scan(st, c);
        return 0;
    }
    return fill_heap(st, c);
}

static void end_due(kb__sim *sim, void *arg, uint64_t data);
/* end_due's data when it comes from the flow's timer (always current). */
#define END_TIMER UINT64_MAX
static int alone(const struct flow_state *st, const flow *f, uint32_t n_flows);

/* Sets the new rates: a flow whose rate changed gets a new end event. */
static void reschedule(kb__sim *sim, flow_state *st, kb__time now)
{
    for (size_t i = 0; i < st->n_cf; i++) {
        flow *f = st->cf[i];
        if (f->next_rate == f->rate) continue;
        f->rate = f->next_rate;
        double dt = f->left / (f->rate / f->solo);
        kb__timer_start(sim, &f->end, (kb__time)ceil(dt - 1e-6 > 0 ? dt - 1e-6 : 0));
    }
}

static void solve_due(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    flow_state *st = arg;
    kb__time now = kb__sim_now(sim);
    st->solve_posted = 0;
    if (collect(st) || advance(st, now)) {
        kb__sim_fail(sim, KB_ENOMEM, "fabric (flow): out of host memory for the rate solver");
        return;
    }
    /* Components that share no resource do not interact: each is filled
     * alone, making the same choices as one filling over all of them. */
    size_t n = split(st);
    for (size_t c = 0; n && c < n; c++) {
        const uint32_t *fo = st->cstart, *so = st->cstart + n + 1;
        uint32_t nf = fo[c + 1] - fo[c], ns = so[c + 1] - so[c];
        /* a component may share no resource: psh is then NULL, not offset */
        comp k = {nf ? st->pcf + fo[c] : NULL, nf, ns ? st->psh + so[c] : NULL, ns};
        if (fill(st, &k)) n = 0;
    }
    if (!n && st->n_cf) {
        kb__sim_fail(sim, KB_ENOMEM, "fabric (flow): out of host memory for the rate solver");
        return;
    }
    reschedule(sim, st, now);
}

static void mark_dirty(kb__sim *sim, flow_state *st, uint32_t id)
{
    res *r = &st->res[id];
    if (!r->dirty) {
        if (grow((void **)&st->dirty, &st->cap_dirty, st->n_dirty + 1, sizeof *st->dirty)) {
            kb__sim_fail(sim, KB_ENOMEM, "fabric (flow): out of host memory");
            return;
        }
        r->dirty = 1;
        st->dirty[st->n_dirty++] = id;
    }
    if (!st->solve_posted) {
        st->solve_posted = 1;
        kb__sim_post_at(sim, kb__sim_now(sim), solve_due, st, 0);
    }
}

/* ---- a flow's life -------------------------------------------------------- */

static flow *flow_get(flow_state *st, uint32_t n_res)
{
    flow *f = st->free;
    if (f) {
        st->free = f->next;
    } else {
        f = aligned_alloc(64, (sizeof *f + 63) / 64 * 64);
        if (!f) return NULL;
        memset(f, 0, sizeof *f);
        kb__timer_init(&f->end, end_due, f, END_TIMER);
        f->res = f->inl;
        f->slot = f->inl + FLOW_INLINE;
        f->cap_res = FLOW_INLINE;
        f->all_next = st->all;
        st->all = f;
    }
    if (f->cap_res < n_res) {
        uint32_t *r = malloc(2 * (size_t)n_res * sizeof *r);
        if (!r) {
            f->next = st->free, st->free = f;
            return NULL;
        }
        if (f->res != f->inl) free(f->res);
        f->res = r;
        f->slot = r + n_res;
        f->cap_res = n_res;
    }
    return f;
}

/* The hops of flow f that ended at `end`, alone-shaped: on each link h,
 * when its first packet starts service (from f->t0 on, forward) and its
 * last packet ends it (from `end`, back); fn(arg, h, link, head, tail). */
static void hops(const kb__fabric *fab, const flow *f, kb__time end,
                 void (*fn)(void *arg, uint32_t h, const kb__link *l, kb__time head, kb__time tail),
                 void *arg)
{
    const kb__fab_msg *msg = f->msg;
    const kb__route *r = msg->route;
    uint32_t last = kb__fab_msg_pkt_size(msg, msg->npkts - 1);
    uint32_t first = kb__fab_msg_pkt_size(msg, 0);
    kb__time back = 0; /* after hop h: the hops after it, their wire and last packet */
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__link *l = &fab->links[r->links[h]];
        back += l->ow_ps + kb__link_svc(fab, l, last);
    }
    kb__time head = f->t0;
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__link *l = &fab->links[r->links[h]];
        back -= l->ow_ps + kb__link_svc(fab, l, last);
        fn(arg, h, l, head, end - back - l->ow_ps);
        head += kb__link_svc(fab, l, first) + l->ow_ps;
    }
}

static void trace_hop(void *arg, uint32_t h, const kb__link *l, kb__time head, kb__time tail)
{
    (void)l;
    kb__fab_msg *msg = arg;
    msg->trace[h].head = head - msg->t_start;
    msg->trace[h].tail = tail - msg->t_start;
}

/* A message's busy time on each link (what count() counted) in the link
 * utilization: on the first link, which serves it whole at its own rate
 * (l0_free), from the flow's start; on the others spread over its time
 * there, from its first packet's start to its last packet's end. */
static void util_hop(void *arg, uint32_t h, const kb__link *l, kb__time head, kb__time tail)
{
    const flow *f = arg;
    const kb__fab_msg *msg = f->msg;
    kb__fabric *fab = msg->fab;
    kb__time busy = (kb__time)(msg->npkts - 1) * kb__link_svc(fab, l, msg->pkt_bytes) +
                    kb__link_svc(fab, l, kb__fab_msg_pkt_size(msg, msg->npkts - 1));
    if (!h || tail < head + busy) tail = head + busy;
    kb__fab_util_spread(fab, l, head, tail, busy);
}

static void end_due(kb__sim *sim, void *arg, uint64_t data)
{
    flow *f = arg;
    if (data != END_TIMER && data != f->gen) return; /* a join's or a stale end */
    flow_state *st = state(f->msg->fab);
    kb__time now = kb__sim_now(sim);
    int solo = alone(st, f, 1);
    for (uint32_t k = 0; k < f->n_res; k++) {
        res_remove(&st->res[f->res[k]], f, k);
        if (!solo) mark_dirty(sim, st, f->res[k]); /* else nobody else's rate changes */
    }
    kb__fab_msg *msg = f->msg;
    if (msg->trace) hops(st->fab, f, now, trace_hop, msg);
    if (st->fab->util) hops(st->fab, f, now, util_hop, f);
    msg->flow = NULL;
    msg->delivered = msg->npkts;
    msg->t_end = msg->t_arrive = now;
    msg->t_prev = now - f->gap;
    f->gen++; /* nothing of this life may end the next */
    f->next = st->free;
    st->free = f;
    if (msg->on_packet) msg->on_packet(sim, msg, msg->npkts - 1);
    if (msg->on_done) msg->on_done(sim, msg, msg->npkts - 1);
}

/* Whether f is alone on every one of its resources (n_flows of them each:
 * 0 before it joins, 1 before it leaves) and none awaits a solve: then
 * its rate is its solo rate and nobody else's changes. */
static int alone(const flow_state *st, const flow *f, uint32_t n_flows)
{
    for (uint32_t k = 0; k < f->n_res; k++) {
        const res *r = &st->res[f->res[k]];
        if (r->n != n_flows || r->dirty) return 0;
    }
    return 1;
}

static void join_due(kb__sim *sim, void *arg, uint64_t data)
{
    flow *f = arg;
    if (data != f->gen) return;
    flow_state *st = state(f->msg->fab);
    kb__time now = kb__sim_now(sim);
    f->t_last = now;
    f->rate = 0;
    if (alone(st, f, 0)) { /* no solve: its solo rate until something joins */
        for (uint32_t k = 0; k < f->n_res; k++) {
            res *r = &st->res[f->res[k]];
            if (res_add(r, f, k)) {
                kb__sim_fail(sim, KB_ENOMEM, "fabric (flow): out of host memory");
                return;
            }
        }
        f->rate = f->solo;
        kb__timer_start(sim, &f->end, (kb__time)ceil(f->left));
        return;
    }
    for (uint32_t k = 0; k < f->n_res; k++) {
        if (res_add(&st->res[f->res[k]], f, k)) {
            kb__sim_fail(sim, KB_ENOMEM, "fabric (flow): out of host memory");
            return;
        }
        mark_dirty(sim, st, f->res[k]);
    }
}

/* Counts msg on its links as the packet model would: bytes, packets, the
 * service time of each of its packets. */
static void count(kb__fabric *fab, const kb__fab_msg *msg)
{
    const kb__route *r = msg->route;
    uint32_t last = kb__fab_msg_pkt_size(msg, msg->npkts - 1);
    for (uint32_t h = 0; h < r->n; h++) {
        kb__link *l = &fab->links[r->links[h]];
        kb__time busy = (kb__time)(msg->npkts - 1) * kb__link_svc(fab, l, msg->pkt_bytes) +
                        kb__link_svc(fab, l, last);
        l->bytes += msg->bytes;
        l->packets += msg->npkts;
        l->busy_ps += busy;
    }
    fab->packet_hops += (uint64_t)msg->npkts * r->n;
}

/* Whether memo entry x is msg's solo schedule. */
static int solo_is(const struct kb__route_solo *x, const kb__fab_msg *msg)
{
    return x->bytes == msg->bytes && x->pkt_bytes == msg->pkt_bytes &&
           x->short_at == msg->short_at && x->short_lead == msg->short_lead;
}

/* The solo schedule of msg on its route r, from the route's memo of its
 * last two (bytes, packet size, short packet's place) keys, computed on a
 * miss; NULL when out of host memory. */
static const struct kb__route_solo *solo_of(const kb__fabric *fab, const kb__route *r,
                                            const kb__fab_msg *msg)
{
    struct kb__route_solo *m =
        ((kb__route *)r)->solo; /* the memo is not part of the route's value */
    if (solo_is(&m[0], msg)) return &m[0];
    struct kb__route_solo s = m[1];
    if (!solo_is(&s, msg)) {
        kb__time total, prev;
        if (msg->short_at + 1 >= msg->npkts)
            kb__fab_solo(fab, r, msg->bytes, msg->pkt_bytes, &total, &prev);
        else if (kb__fab_solo_short(fab, r, msg->bytes, msg->pkt_bytes, msg->short_at,
                                    msg->short_lead, &total, &prev))
            return NULL;
        kb__time drain = kb__fab_drain(fab, r, msg->bytes, msg->pkt_bytes);
        if (drain > total) drain = total;
        if (drain == 0) drain = 1, total = total ? total : 1;
        s = (struct kb__route_solo){msg->bytes, msg->pkt_bytes, msg->short_at, msg->short_lead,
                                    total,      prev,           drain};
    }
    m[1] = m[0];
    m[0] = s;
    return &m[0];
}

/* The resources of a flow on route r (the links after the first, the
 * nodes' serial workers, the memories at its ends) and their smallest
 * capacity, kept on the route (a memo, not part of its value) until the
 * resources change; NULL when out of host memory. */
static const struct kb__route_flow *route_res(flow_state *st, const kb__route *r)
{
    struct kb__route_flow *m = &((kb__route *)r)->flow;
    if (m->res && m->version == st->version) return m;
    uint32_t *ids = realloc(m->res, (r->n + 2 + r->workers) * sizeof *ids);
    if (!ids) return NULL;
    uint32_t n = 0, mf = st->mem_res[r->nodes[0]], mt = st->mem_res[r->nodes[r->n]];
    for (uint32_t h = 1; h < r->n; h++) /* link 0: FIFO at the source (start) */
        ids[n++] = r->links[h];
    for (uint32_t h = 1; r->workers && h < r->n; h++) /* the nodes' serial workers */
        if (st->wk_res[r->nodes[h]] != KB__NO_NODE) ids[n++] = st->wk_res[r->nodes[h]];
    if (mf != KB__NO_NODE) ids[n++] = mf;
    if (mt != KB__NO_NODE && mt != mf) ids[n++] = mt;
    double min_cap = INFINITY;
    for (uint32_t k = 0; k < n; k++)
        if (st->res[ids[k]].cap < min_cap) min_cap = st->res[ids[k]].cap;
    *m = (struct kb__route_flow){ids, n, st->version, min_cap};
    return m;
}

/* Forgets every route's route_res memo (a new flow state numbers its
 * resources anew). */
static void route_res_forget(kb__fabric *fab)
{
    for (size_t i = 0; i < fab->n_slots; i++) {
        kb__route *r = fab->slots[i].route;
        if (!r) continue;
        free(r->flow.res);
        r->flow = (struct kb__route_flow){0};
    }
}

/* Starts msg's flow, offered at t >= now. */
static void start(kb__sim *sim, kb__fab_msg *msg, kb__time t)
{
    kb__fabric *fab = msg->fab;
    flow_state *st = state(fab);
    const kb__route *r = msg->route;
    int shares = msg->npkts > 1; /* a message of one packet shares nothing */
    const struct kb__route_flow *rf = shares ? route_res(st, r) : NULL;
    flow *f = shares && !rf ? NULL : flow_get(st, rf ? rf->n_res : 0);
    if (!f) {
        kb__sim_fail(sim, KB_ENOMEM, "fabric (flow): out of host memory for a flow");
        return;
    }
    f->msg = msg;
    msg->flow = f;
    f->n_res = 0;
    if (shares) {
        /* the first link caps it, unshared; then the smallest capacity of
           its resources, if smaller (the same comparisons, so the same
           value, as taking them one by one) */
        f->solo = fab->links[r->links[0]].bw_gbs;
        if (rf->min_cap < f->solo) f->solo = rf->min_cap;
        memcpy(f->res, rf->res, rf->n_res * sizeof *f->res);
        f->n_res = (uint16_t)rf->n_res;
    }
    const struct kb__route_solo *so = solo_of(fab, r, msg);
    if (!so) {
        kb__sim_fail(sim, KB_ENOMEM, "fabric (flow): out of host memory for a solo schedule");
        return;
    }
    kb__time total = so->total, drain = so->drain, prev = so->prev;
    /* The first link serves whole messages in the order they are offered
     * (the packet model offers all of a message's packets at once there):
     * the flow starts when the link has served the earlier ones. */
    const kb__link *l0 = &fab->links[r->links[0]];
    kb__time *free0 = &st->l0_free[r->links[0]];
    if (*free0 > t) t = *free0;
    kb__time s0 = kb__link_svc(fab, l0, kb__fab_msg_pkt_size(msg, msg->npkts - 1));
    if (!msg->short_at && msg->short_lead > s0) /* a read's short packet first, then a wait */
        s0 = msg->short_lead;
    *free0 = t + (kb__time)(msg->npkts - 1) * kb__link_svc(fab, l0, msg->pkt_bytes) + s0;
    f->t0 = t;
    f->alpha = total - drain;
    f->left = (double)drain;
    f->gap = total - prev;
    f->rate = 0;
    count(fab, msg);
    if (!f->n_res) { /* nothing to share (see the top) */
        kb__sim_post_at(sim, t + total, end_due, f, ++f->gen);
        return;
    }
    kb__sim_post_at(sim, t + f->alpha, join_due, f, ++f->gen);
}

/* ---- the model's operations ----------------------------------------------- */

static void flow_send(kb__sim *sim, kb__fab_msg *msg)
{
    msg->t_start = kb__sim_now(sim);
    start(sim, msg, msg->t_start);
}

static void flow_send_at(kb__sim *sim, kb__fab_msg *msg, kb__time at)
{
    kb__time now = kb__sim_now(sim);
    msg->t_start = at > now ? at : now;
    start(sim, msg, msg->t_start);
}

/* Packets offered over time: the flow starts when packet i, offered at
 * at[i], is no later than back to back on the first link from there, so a
 * source faster than that link (a memory read) starts it with its first
 * packet. */
static int flow_inject(kb__sim *sim, kb__fab_msg *msg, kb__time *at, int in_order)
{
    (void)in_order;
    const kb__fabric *fab = msg->fab;
    kb__time p0 = kb__link_svc(fab, &fab->links[msg->route->links[0]], msg->pkt_bytes);
    kb__time t = kb__sim_now(sim);
    for (uint32_t i = 0; i < msg->npkts; i++) {
        kb__time off = (kb__time)i * p0;
        if (at[i] > off && at[i] - off > t) t = at[i] - off;
    }
    start(sim, msg, t);
    return 0;
}

static void flow_fini(kb__fabric *fab);

/* A node's serial worker is a resource of the node: its capacity is a
 * full packet per worker service (overhead + p / B), in bytes/ns. */
static int add_workers(kb__fabric *fab, flow_state *st, kb__err *err)
{
    st->wk_res = malloc((fab->n_nodes ? fab->n_nodes : 1) * sizeof *st->wk_res);
    if (!st->wk_res) return kb__err_set(err, KB_ENOMEM, "fabric (flow): out of memory");
    for (uint32_t i = 0; i < fab->n_nodes; i++) {
        st->wk_res[i] = KB__NO_NODE;
        const kb__fab_worker *w = fab->workers ? &fab->workers[i] : NULL;
        if (!w || !(w->bw_gbs > 0)) continue;
        if (st->n_res == st->cap_res_arr) {
            uint32_t c = 2 * st->cap_res_arr + 16;
            res *r = realloc(st->res, c * sizeof *r);
            if (!r) return kb__err_set(err, KB_ENOMEM, "fabric (flow): out of memory");
            st->res = r;
            st->cap_res_arr = c;
        }
        st->res[st->n_res] = (res){.cap = (double)fab->packet_bytes * 1000.0 / (double)w->pkt_ps};
        st->wk_res[i] = st->n_res++;
    }
    return 0;
}

static int flow_init(kb__fabric *fab, kb__err *err)
{
    flow_state *st = calloc(1, sizeof *st);
    if (st) st->mem_res = malloc((fab->n_nodes ? fab->n_nodes : 1) * sizeof *st->mem_res);
    if (st && st->mem_res) st->res = res_array(NULL, 0, fab->n_links);
    if (st && st->res) st->l0_free = calloc(fab->n_links ? fab->n_links : 1, sizeof *st->l0_free);
    if (!st || !st->mem_res || !st->res || !st->l0_free) {
        if (st) free(st->mem_res), free(st->res);
        free(st);
        return kb__err_set(err, KB_ENOMEM, "fabric (flow): out of memory for %u links",
                           fab->n_links);
    }
    st->fab = fab;
    st->version = 1;
    route_res_forget(fab);
    st->n_res = st->cap_res_arr = fab->n_links;
    for (uint32_t i = 0; i < fab->n_nodes; i++)
        st->mem_res[i] = KB__NO_NODE;
    for (uint32_t i = 0; i < fab->n_links; i++)
        st->res[i].cap = fab->links[i].bw_gbs;
    fab->model_state = st;
    int rc = add_workers(fab, st, err);
    if (rc) flow_fini(fab);
    return rc;
}

static void flow_fini(kb__fabric *fab)
{
    flow_state *st = state(fab);
    if (!st) return;
    route_res_forget(fab);
    for (flow *f = st->all, *n; f; f = n) {
        n = f->all_next;
        if (f->res != f->inl) free(f->res);
        free(f);
    }
    for (uint32_t i = 0; i < st->n_res; i++) {
        free(st->res[i].flows);
    }
    free(st->res);
    free(st->mem_res);
    free(st->wk_res);
    free(st->l0_free);
    free(st->dirty);
    free(st->cf);
    free(st->cfi);
    free(st->cr);
    free(st->sh);
    free(st->uf);
    free(st->pcf);
    free(st->psh);
    free(st->cstart);
    free(st->heap);
    free(st->hpos);
    free(st->hkey);
    free(st->touched);
    free(st->tlevel);
    free(st->order);
    free(st->order_tmp);
    free(st);
    fab->model_state = NULL;
}

static void flow_reset(kb__fabric *fab)
{
    flow_state *st = state(fab);
    memset(st->l0_free, 0, fab->n_links * sizeof *st->l0_free);
}

static int flow_attach_memory(kb__fabric *fab, uint32_t node, double bw_gbs, kb__err *err)
{
    flow_state *st = state(fab);
    st->version++; /* the routes' resources and capacities may change */
    if (node >= fab->n_nodes || !(bw_gbs > 0))
        return kb__err_set(err, KB_EINVAL, "fabric (flow): memory node %u of %u, %g GB/s", node,
                           fab->n_nodes, bw_gbs);
    if (st->mem_res[node] != KB__NO_NODE) {
        st->res[st->mem_res[node]].cap = bw_gbs;
        return 0;
    }
    if (st->n_res == st->cap_res_arr) {
        uint32_t c = 2 * st->cap_res_arr + 16;
        res *r = res_array(st->res, st->n_res, c);
        if (!r) return kb__err_set(err, KB_ENOMEM, "fabric (flow): out of memory");
        st->res = r;
        st->cap_res_arr = c;
    }
    st->res[st->n_res] = (res){.cap = bw_gbs};
    st->mem_res[node] = st->n_res++;
    return 0;
}

const kb__fabric_model kb__fab_flow_model = {
    .version = KB__FABRIC_MODEL_VERSION,
    .name = "flow",
    .doc = "one max-min fair flow per message (fast, approximate)",
    .grain = KB__GRAIN_MESSAGE,
    .calibrates_rings = true,
    .init = flow_init,
    .fini = flow_fini,
    .reset = flow_reset,
    .send = flow_send,
    .send_at = flow_send_at,
    .inject = flow_inject,
    .attach_memory = flow_attach_memory,
};
