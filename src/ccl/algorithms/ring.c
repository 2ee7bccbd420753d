/*
 * ring.c — ring collectives over a ring_1d plan: all-reduce (reduce-scatter
 * then all-gather), reduce-scatter, all-gather, a pipelined broadcast and
 * reduce, and an all-to-all by forwarding; and the hierarchical all-reduce,
 * reduce-scatter and all-gather (ring streams over a hierarchical plan's
 * two rings, below).
 *
 * The ring stream. The buffer is cut into p chunks ("ring chunks" q, mapped
 * to data chunks by D(q)); each chunk into pieces of at most s->piece
 * elements. At step t of the reduce-scatter rank r sends ring chunk r - t and
 * receives r - t - 1, which it combines with its own data and sends on at
 * step t + 1; after p - 1 steps rank r holds ring chunk r + 1 fully reduced.
 * The all-gather then forwards finished chunks p - 1 more steps (send
 * r + 1 - t, receive r - t). So every rank's outbound messages are
 *
 *   O[k] = its own piece k          (k < m, step 0)
 *   O[k] = R[k - m]                 (k >= m)
 *
 * where R[i] is what it made of inbound message I[i] (combined, or just
 * received) and m the pieces per chunk in this round. The kernel walks k
 * once: it posts the receive of I[k] (tl_recv_async) before it sends O[k],
 * so every rank always has a receive pending on the message its
 * predecessor is sending: rings with any number of slots drain and no rank
 * waits on a message that is not on its way. It then waits for I[k - lag]
 * (lag < m, at most RING_LAG_MAX), so the send of O[k + 1] never waits for
 * the message that just arrived; the own-data load for I[k] is issued
 * right behind its receive and runs while the message is in flight.
 * Pending receives hold no DMA channel, so they cost only TCM.
 *
 * R[i] stays in TCM until it is sent m messages later, so one round keeps
 * at most m <= s->window pieces; a chunk with more pieces is done in rounds
 * of s->window pieces (each a complete stream over the same steps).
 *
 * Data chunks: all-reduce uses D(q) = q. Reduce-scatter must leave in rank
 * r the chunk of its buffer index s->index[r], so D(q) = index[q - 1] (rank
 * q - 1 finishes ring chunk q); all-gather starts with rank r's own buffer
 * as ring chunk r + 1, the same map.
 *
 * Reduction order (bitwise identical results): chunk D(q)'s value is
 * x_q, then ((x_q op x_{q+1}) op x_{q+2}) ... op x_{q-1}, ranks mod p, each
 * op rounded to the buffer dtype; avg divides that sum once by p. The
 * all-gather copies the finished tile, so every rank stores the same bits.
 */
#include "ccl/algorithms/algorithms.h"

#include <stdio.h>
#include <stdlib.h>

#include "ccl/board.h"
#include "kernel/tl_internal.h"

/* The modes of a ring stream. AR, RS and AG are the collectives over the
 * whole ring; RS_IN_PLACE and AG_IN_PLACE are the halves of AR run apart
 * (data chunk q of the region, in the input buffer), for the hierarchical
 * all-reduce. */
typedef enum ring_mode { RING_AR, RING_RS, RING_AG, RING_RS_IN_PLACE, RING_AG_IN_PLACE } ring_mode;

typedef struct ring {
    tl_ctx *k;
    const kb_ccl_sched *s;
    tl_tensor *in, *out;
    ring_mode md;
    int r, p;             /* this rank's place in the ring, ring size */
    int to, from;         /* the ports to NEXT and from PREV */
    int finish;           /* the last reduce-scatter step finishes the value (avg) */
    int own_from_out;     /* AG: its own block is in the output already (load it there) */
    int64_t base, n;      /* the region worked on: elements [base, base + n) (AG: n per block) */
    int64_t goff, gstep;  /* ring rank q is rank goff + q·gstep of the call (for s->index) */
    int nchunks;          /* RS/AR: the region is cut in nchunks data chunks (0: p) */
    int rs_steps, steps;  /* reduce-scatter steps, all steps */
    int64_t first, m;     /* this round: first piece of each chunk, pieces */
    kb__ccl_board *board; /* calibrated: its board (ccl/board.h), else NULL */
    kb__time at_half, at_end; /* calibrated: when warm-up steps w/2 and w arrived */
    kb__ccl_pe_snaps pe;      /* and the PE's counters then, and at the start */
} ring;

/* A piece: ring chunk q's piece j of this round. clo is the chunk's first
 * element in the buffer it is stored to, a the piece's offset in the chunk. */
typedef struct piece {
    int t; /* step */
    int64_t clo, a, len;
    tl_recv_handle h;
    tl_tile own;
} piece;

static int wrap(int q, int p)
{
    return ((q % p) + p) % p;
}

static int in_place(const ring *g)
{
    return g->md == RING_AR || g->md == RING_RS_IN_PLACE || g->md == RING_AG_IN_PLACE;
}

static int gathers(const ring *g)
{
    return g->md == RING_AG || g->md == RING_AG_IN_PLACE;
}

static int data_chunk(const ring *g, int q)
{
    q = wrap(q, g->p);
    if (in_place(g)) return q;
    return (int)g->s->index[g->goff + (int64_t)wrap(q - 1, g->p) * g->gstep];
}

static void piece_at(const ring *g, int q, int64_t j, piece *x)
{
    int64_t lo, hi, n = g->n;
    int c = data_chunk(g, q);
    if (g->md == RING_AG) {
        lo = (int64_t)c * n, hi = lo + n;
    } else {
        kb__ccl_chunk(n, g->nchunks ? g->nchunks : g->p, c, &lo, &hi);
        lo += g->base, hi += g->base;
    }
    x->clo = lo;
    x->a = (g->first + j) * g->s->piece;
    x->len = hi - lo - x->a < g->s->piece ? hi - lo - x->a : g->s->piece;
    if (x->len < 0) x->len = 0;
}

/* Outbound message k < m: this rank's own piece (all-gather also copies it
 * to its place in the output, unless it is there already). */
static tl_tile own_piece(ring *g, int64_t k)
{
    piece x;
    piece_at(g, gathers(g) ? g->r + 1 : g->r, k, &x);
    if (!x.len) return TL_NONE;
    if (g->md != RING_AG) return kb__ccl_load(g->k, g->in, x.clo + x.a, x.len);
    if (g->own_from_out) return kb__ccl_load(g->k, g->out, x.clo + x.a, x.len);
    tl_tile v = kb__ccl_load(g->k, g->in, x.a, x.len);
    kb__ccl_store(g->k, g->out, x.clo + x.a, x.len, v);
    return v;
}

/* The ring chunk that arrives at step t: r - t - 1 in the reduce-scatter,
 * r - (t - rs_steps) in the all-gather. */
static int chunk_at_step(const ring *g, int t)
{
    return t < g->rs_steps ? g->r - t - 1 : g->r - (t - g->rs_steps);
}

/* Stores piece x, whose final value v is in TCM: the reduce-scatter's last
 * step (finished) or an all-gather step, to the place the stream leaves it. */
static void store_piece(ring *g, const piece *x, tl_tile v)
{
    if (!in_place(g) && !gathers(g))
        kb__ccl_store(g->k, g->out, x->a, x->len, v);
    else
        kb__ccl_store(g->k, in_place(g) ? g->in : g->out, x->clo + x->a, x->len, v);
}

/* Posts the receive of inbound message k and, in the reduce-scatter, the
 * load of the own data it will be combined with. */
static void post(ring *g, int64_t k, piece *x)
{
    x->t = (int)(k / g->m);
    piece_at(g, chunk_at_step(g, x->t), k % g->m, x);
    if (!x->len) return;
    x->h = tl_recv_async(g->k, g->from, 1, &x->len, g->s->dtype);
    x->own = x->t < g->rs_steps ? kb__ccl_load(g->k, g->in, x->clo + x->a, x->len) : TL_NONE;
}

/* Waits for x and makes R: combined (reduce-scatter; finished and stored
 * at its last step) or received and stored (all-gather). */
static tl_tile arrive(ring *g, piece *x)
{
    tl_ctx *k = g->k;
    tl_tile got = tl_wait(k, x->h);
    if (x->t >= g->rs_steps) {
        store_piece(g, x, got);
        return got;
    }
    tl_tile v = kb__ccl_combine(k, g->s->op, got, x->own);
    tl_free(k, got);
    tl_free(k, x->own);
    if (x->t + 1 < g->rs_steps) return v;
    if (g->finish) v = kb__ccl_finish(k, g->s, v);
    store_piece(g, x, v);
    return v;
}

#define RING_LAG_MAX KB__CCL_RING_LAG_MAX

static int64_t lag_of(int64_t m, const kb_ccl_sched *s)
{
    return kb__ccl_ring_lag(m, s->window);
}

/* The messages of a round in flight: the receives I[i - lag .. i] with
 * their own-data loads, the own pieces O[i .. i + lag], the held R. */
typedef struct ring_io {
    tl_tile held[KB__CCL_WINDOW_MAX], own[RING_LAG_MAX + 1];
    piece pend[RING_LAG_MAX + 1];
} ring_io;

/* ---- calibrated rings (ccl/board.h; docs/timing-model.md) -----------------
 *
 * A long ring's steps settle at once to the pace of its slowest hop: in the
 * 256-rank ring all-reduce the ranks after the SIP links run every step at
 * the ring's pace from the first, and the step-k arrival of the latest rank
 * plus (steps - k) times that pace is the ring's last arrival (within a few
 * ns under the flow model). So a calibrated stream runs its first `warmup`
 * steps message by message and posts to its board; once calibrated, each
 * rank waits out the remaining steps and stores what its last step brings. */

/* The program's clock: the simulator's, or the scalar side's when ahead. */
static kb__time prog_now(tl_ctx *k)
{
    kb__time now = kb__sim_now(k->prog.sim);
    return k->prog.t_scalar > now ? k->prog.t_scalar : now;
}

/* Records when warm-up step n (1-based) arrived, and the PE's counters. */
static void step_arrived(ring *g, int n)
{
    int w = g->board->ph->warmup;
    if (n == w / 2) {
        g->at_half = prog_now(g->k);
        kb__ccl_pe_snap_take(g->k->prog.pe, &g->pe.mid);
    } else if (n == w) {
        g->at_end = prog_now(g->k);
        kb__ccl_pe_snap_take(g->k->prog.pe, &g->pe.end);
    }
}

/* Whether a stream of `steps` steps whose chunk has `pieces` pieces runs
 * calibrated on board b: one round, at least four warm-ups long, and
 * every chunk holding data (`full`): a stream whose region has fewer
 * elements than ranks skips the empty chunks' steps, so its warm-up steps
 * do not give the pace of the later ones. */
static int calibrates(const kb__ccl_board *b, const kb_ccl_sched *s, int steps, int64_t pieces,
                      int full)
{
    return b && full && pieces <= s->window && steps >= 4 * b->ph->warmup;
}

/* Data mode: the buffer this stream writes gets its final value, now that
 * its last step arrived: the chunk it finished (reduce-scatter), or every
 * chunk (all-gather). */
static void rest_data(ring *g)
{
    kb__ccl_board *b = g->board;
    int64_t lo, hi; /* in the region */
    kb__ccl_chunk(g->n, g->p, data_chunk(g, g->r + 1), &lo, &hi);
    switch (g->md) {
    case RING_RS_IN_PLACE:
        kb__ccl_board_write(b, g->k, g->in, g->base + lo, lo, hi - lo);
        break;
    case RING_RS:
        kb__ccl_board_write(b, g->k, g->out, 0, lo, hi - lo);
        break;
    case RING_AG_IN_PLACE:
        kb__ccl_board_write(b, g->k, g->in, g->base, 0, g->n);
        break;
    default: /* RING_AG */
        kb__ccl_board_write(b, g->k, g->out, 0, 0, g->n * g->p);
        break;
    }
}

/* The trace span of the steps a calibrated stream did not run (it is
 * called once they are over): on the rank's DMA track, from its warm-up's
 * last arrival to now, named by the steps (1-based) and with the bytes
 * they would have brought this rank as its work. */
static void trace_rest(const ring *g, int w)
{
    int64_t elems = 0;
    for (int t = w; t < g->steps; t++)
        for (int64_t j = 0; j < g->m; j++) {
            piece x;
            piece_at(g, chunk_at_step(g, t), j, &x);
            elems += x.len;
        }
    const kb__pe_prog *pg = &g->k->prog;
    char name[64];
    snprintf(name, sizeof name, "ring steps %d-%d calibrated", w + 1, g->steps);
    kb__trace_span(pg->sim, g->at_end, pg->pe->index, "calibrated", name, KB__PE_DMA, pg->index,
                   (uint64_t)elems * kb__dtype_size((kb__dtype)g->s->dtype));
}

/* After the warm-up: posts; when calibrated, drops the held pieces, waits
 * out the remaining steps and stores what the last step brings (finished
 * first in a reduce-scatter) and returns 1; else 0. */
static int ring_rest(ring *g, ring_io *io)
{
    tl_ctx *k = g->k;
    kb__pe_prog *pg = &k->prog;
    kb__ccl_board *b = g->board;
    int w = b->ph->warmup;
    static const kb__ccl_value value[] = {[RING_RS] = KB__CCL_VALUE_INDEXED,
                                          [RING_AG] = KB__CCL_VALUE_BLOCKS,
                                          [RING_RS_IN_PLACE] = KB__CCL_VALUE_REDUCED,
                                          [RING_AG_IN_PLACE] = KB__CCL_VALUE_GATHERED};
    kb__ccl_post mine = {.r = (uint32_t)g->r,
                         .p = (uint32_t)g->p,
                         .program = (uint32_t)tl_rank(k),
                         .steps = g->steps,
                         .end = g->at_end,
                         .pace = (g->at_end - g->at_half) / (kb__time)(w - w / 2),
                         .pe = &g->pe,
                         .kind = value[g->md],
                         .base = g->base,
                         .n = g->n,
                         .finish = g->finish};
    if (!kb__ccl_board_post(b, k, &mine)) return 0;
    for (int64_t j = 0; j < g->m; j++)
        if (io->held[j].slot) tl_free(k, io->held[j]);
    kb__time end = kb__ccl_board_end(b), now = prog_now(k);
    if (end > now) kb__pe_scalar_time(pg, end - now);
    kb__pe_sync(pg);
    if (kb__trace_on(pg->sim)) trace_rest(g, w);
    int data = b->views != NULL;
    if (data) rest_data(g);
    /* the last step's pieces, stored as they arrive (finished before in a
     * reduce-scatter: the finish's MATH op is not charged here) */
    int q = chunk_at_step(g, g->steps - 1);
    for (int64_t j = 0; j < g->m; j++) {
        piece x;
        piece_at(g, q, j, &x);
        if (!x.len) continue;
        kb__tile_desc d = {.dtype = (kb__dtype)g->s->dtype, .ndim = 1, .shape = {x.len}};
        kb__pe_buf *buf;
        tl_tile v = kb__tl_new(k, &d, &buf, !data);
        if (data) kb__ccl_board_read(b, kb__pe_buf_bytes(buf), x.clo + x.a - g->base, x.len);
        store_piece(g, &x, v);
        tl_free(k, v);
    }
    return 1;
}

/* Messages [from, to) of one round: from is 0, or a step at which every
 * earlier message arrived and io holds the last m results. */
static void round_part(ring *g, ring_io *io, int64_t from, int64_t to)
{
    tl_ctx *k = g->k;
    int64_t m = g->m, d = lag_of(m, g->s), q = d + 1;
    for (int64_t j = 0; from == 0 && j < q && j < m; j++)
        io->own[j] = own_piece(g, j);
    for (int64_t i = from; i < to + d; i++) {
        if (i < to) {
            post(g, i, &io->pend[i % q]);
            tl_tile o = i < m ? io->own[i % q] : io->held[(i - m) % m];
            if (i + q < m) io->own[i % q] = own_piece(g, i + q);
            if (o.slot) {
                tl_send(k, g->to, o);
                tl_free(k, o);
            }
        }
        int64_t j = i - d;
        if (j < from) continue;
        piece *x = &io->pend[j % q];
        io->held[j % m] = TL_NONE;
        if (x->len) {
            tl_tile v = arrive(g, x);
            if (x->t + 1 < g->steps)
                io->held[j % m] = v;
            else
                tl_free(k, v);
        }
        if (g->board && (j + 1) % m == 0) step_arrived(g, (int)((j + 1) / m));
    }
}

/* One round, every message. */
static void round_run(ring *g)
{
    ring_io io;
    round_part(g, &io, 0, (int64_t)g->steps * g->m);
}

/* p == 1: reduce-scatter and all-gather copy the buffer. */
static void copy_all(tl_ctx *k, const kb_ccl_sched *s, tl_tensor *in, tl_tensor *out)
{
    for (int64_t a = 0; a < s->elems; a += s->piece) {
        int64_t len = s->elems - a < s->piece ? s->elems - a : s->piece;
        tl_tile v = kb__ccl_load(k, in, a, len);
        kb__ccl_store(k, out, a, len, v);
        tl_free(k, v);
    }
}

/* Runs the stream g describes (md, r, p, ports, region set; p >= 2) in
 * rounds of at most s->window pieces per chunk. */
static void ring_go(ring *g)
{
    g->rs_steps = gathers(g) ? 0 : g->p - 1;
    g->steps = g->md == RING_AR ? 2 * (g->p - 1) : g->p - 1;
    int64_t chunk = g->md == RING_AG ? g->n : tl_cdiv(g->n, g->p);
    int64_t pieces = tl_cdiv(chunk, g->s->piece);
    if (g->md != RING_AR &&
        calibrates(g->board, g->s, g->steps, pieces, g->md == RING_AG || g->n >= g->p)) {
        ring_io io;
        int64_t w = (int64_t)g->board->ph->warmup * pieces;
        g->first = 0, g->m = pieces;
        kb__ccl_board_start(g->board, g->k);
        kb__ccl_pe_snap_take(g->k->prog.pe, &g->pe.start);
        round_part(g, &io, 0, w);
        if (!ring_rest(g, &io)) round_part(g, &io, w, (int64_t)g->steps * pieces);
        return;
    }
    g->board = NULL;
    for (g->first = 0; g->first < pieces; g->first += g->m) {
        g->m = pieces - g->first < g->s->window ? pieces - g->first : g->s->window;
        round_run(g);
    }
}

/* A stream of mode md over the whole call: ring rank = tl_rank, the ring's
 * ports, the whole buffer. */
static ring ring_whole(tl_ctx *k, ring_mode md)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    return (ring){.k = k,
                  .s = s,
                  .in = tl_arg_tensor(k, 0),
                  .out = tl_arg_tensor(k, 1),
                  .md = md,
                  .r = tl_rank(k),
                  .p = (int)s->world,
                  .to = TL_DIR_NEXT,
                  .from = TL_DIR_PREV,
                  .finish = 1,
                  .n = s->elems,
                  .gstep = 1};
}

/* An all-reduce stream g over its region: calibrated as its two halves, a
 * reduce-scatter on board rs and an all-gather on board ag, each with its
 * own warm-up (the all-gather's steps store what arrives and may run at
 * another pace), when `calibrate` (the same for every ring of the phase);
 * else one stream. */
static void allreduce_go(ring *g, kb__ccl_board *rs, kb__ccl_board *ag, int calibrate)
{
    if (!calibrate) {
        g->board = NULL;
        ring_go(g);
        return;
    }
    g->md = RING_RS_IN_PLACE, g->board = rs;
    ring_go(g);
    kb__ccl_fence(g->k); /* the all-gather loads what the last step stored */
    g->md = RING_AG_IN_PLACE, g->finish = 0, g->board = ag;
    ring_go(g);
}

static void ring_run(tl_ctx *k, ring_mode md)
{
    ring g = ring_whole(k, md);
    g.board = kb__ccl_board_of(k, 0, 0);
    if (g.p == 1) {
        if (md != RING_AR) copy_all(k, g.s, g.in, g.out);
        return;
    }
    if (md != RING_AR) {
        ring_go(&g);
        return;
    }
    int64_t pieces = tl_cdiv(tl_cdiv(g.n, g.p), g.s->piece);
    allreduce_go(&g, g.board, kb__ccl_board_of(k, 1, 0),
                 calibrates(g.board, g.s, g.p - 1, pieces, g.n >= g.p));
}

void kb__ccl_ring_allreduce(tl_ctx *k)
{
    ring_run(k, RING_AR);
}

void kb__ccl_ring_reduce_scatter(tl_ctx *k)
{
    ring_run(k, RING_RS);
}

void kb__ccl_ring_all_gather(tl_ctx *k)
{
    ring_run(k, RING_AG);
}

/* ---- hierarchical (plan topology `hierarchical`) ----------------------------
 *
 * Ranks form S groups of L = s->group (one per SIP), rank r = g·L + l. The
 * group's ring runs through W/E, the ring of the S ranks with the same l
 * (peers) through N/S.
 *
 * All-reduce: (1) reduce-scatter inside the group, in place: rank l ends
 * with data chunk l + 1 of L reduced over its group; (2) all-reduce of that
 * chunk over its peers (they hold the same chunk): a ring all-reduce of
 * N/L elements whose reduce-scatter finishes (avg: the one division by p);
 * (3) all-gather inside the group, in place. Order of a value: chunk c is
 * reduced over its group in that ring's order, then those S partials in
 * the peers' ring order; made once, copied to every buffer, so every
 * buffer holds the same bits. Each phase is a ring stream on its own
 * ports; the phases of one rank follow one another, and a phase waits only
 * on ranks in the same or an earlier phase, so no slot count deadlocks.
 *
 * All-gather: (1) all-gather over the peers: rank (g, l) gets the inputs
 * of every (g', l) into their output blocks; (2) for each group g' in turn,
 * an all-gather inside the group of the blocks of g' (each rank's own one
 * is in its output after (1)). The cross-SIP links carry each input once
 * per other SIP, as a flat ring does, but in S - 1 steps instead of p - 1.
 *
 * Reduce-scatter (elements divide by p, so every block has N/p): rank
 * (g, l) must end with block b(g, l) = s->index[g·L + l] reduced over all p
 * ranks. Its value is the peers' ring reduce-scatter of S blocks, the
 * contribution of group h to block b(g', l) being that block reduced over
 * group h. Step t = 0 .. S - 1 of that ring at rank (g, l) handles region
 * R = g - t - 1 (mod S), the blocks b(R, 0 .. L - 1): (1) a reduce-scatter
 * inside the group over region R leaves block b(R, l) reduced over the
 * group in this rank's output (which holds N/p: the one block it may use
 * as scratch); (2) it loads it back, combines it with the partial its
 * predecessor peer sent (t > 0), and sends the result to its successor,
 * or at the last step (R = g) finishes it (avg) and stores it. So a rank
 * needs no storage beyond its output, every SIP link carries (S - 1)/S of
 * a block per rank of the SIP, as a flat ring's, and the steps are
 * S (L - 1) + S - 1 instead of p - 1. Rounds of at most half a window of
 * pieces: a round's partials are held in tiles (and as many receives
 * posted) while the next group step runs. A rank posts the receives of
 * step t + 1 before it sends the partials of step t: a step waits only on
 * its group's step and its predecessor's previous one, so no slot count
 * deadlocks. Value of block b(g, l): x_{g+1}, then ((x_{g+1} op x_{g+2})
 * ...) op x_g over the groups (mod S), x_h being the block reduced over
 * group h in its ring's order; each op rounded to the dtype, avg divided
 * once by p at the end. */
void kb__ccl_hier_allreduce(tl_ctx *k)
{
    ring g = ring_whole(k, RING_RS_IN_PLACE);
    int L = (int)g.s->group, S = g.p / L, r = g.r;
    if (g.p == 1) return;
    if (L > 1) {
        g.r = r % L, g.p = L, g.finish = S == 1;
        g.board = kb__ccl_board_of(k, 0, (uint32_t)(r / L));
        ring_go(&g);
        kb__ccl_fence(k); /* phase 2 loads what its last step stored */
    }
    if (S > 1) {
        ring h = ring_whole(k, RING_AR);
        kb__ccl_chunk(g.s->elems, L, (r % L + 1) % L, &h.base, &h.n);
        h.n -= h.base;
        h.r = r / L, h.p = S, h.to = TL_DIR_S, h.from = TL_DIR_N;
        /* every peer ring calibrates or none: judged on the largest region
         * (its pieces) and the smallest (its chunks hold data) */
        int64_t most = tl_cdiv(g.s->elems, L), pieces = tl_cdiv(tl_cdiv(most, S), g.s->piece);
        kb__ccl_board *rs = kb__ccl_board_of(k, 1, (uint32_t)(r % L));
        allreduce_go(&h, rs, kb__ccl_board_of(k, 2, (uint32_t)(r % L)),
                     calibrates(rs, g.s, S - 1, pieces, g.s->elems / L >= S));
        kb__ccl_fence(k); /* and phase 3 the value stored now */
    }
    if (L > 1) {
        g.md = RING_AG_IN_PLACE, g.finish = 0;
        g.board = kb__ccl_board_of(k, 3, (uint32_t)(r / L));
        ring_go(&g);
    }
}

void kb__ccl_hier_all_gather(tl_ctx *k)
{
    ring g = ring_whole(k, RING_AG);
    int L = (int)g.s->group, S = g.p / L, r = g.r;
    if (g.p == 1) {
        copy_all(k, g.s, g.in, g.out);
        return;
    }
    if (S > 1) {
        g.r = r / L, g.p = S, g.to = TL_DIR_S, g.from = TL_DIR_N;
        g.goff = r % L, g.gstep = L;
        ring_go(&g);
        kb__ccl_fence(k); /* phase 2 loads the blocks stored now */
    }
    for (int grp = 0; L > 1 && grp < S; grp++) {
        ring h = ring_whole(k, RING_AG);
        h.r = r % L, h.p = L, h.goff = (int64_t)grp * L, h.own_from_out = S > 1;
        ring_go(&h);
    }
}

void kb__ccl_hier_reduce_scatter(tl_ctx *k)
{
    ring g = ring_whole(k, RING_RS);
    const kb_ccl_sched *s = g.s;
    int P = g.p, L = (int)s->group, S = P / L, grp = g.r / L, l = g.r % L;
    if (S == 1 || P == 1) {
        ring_run(k, RING_RS);
        return;
    }
    int64_t B = s->elems / P, pieces = tl_cdiv(B, s->piece);
    int64_t half = s->window / 2 > 0 ? s->window / 2 : 1;
    g.r = l, g.p = L, g.finish = 0, g.nchunks = P;
    g.rs_steps = g.steps = L - 1;
    tl_recv_handle h[KB__CCL_WINDOW_MAX];
    tl_tile held[KB__CCL_WINDOW_MAX];
    for (int64_t first = 0; first < pieces; first += half) {
        int64_t m = pieces - first < half ? pieces - first : half;
        for (int t = 0; t < S; t++) {
            int R = wrap(grp - t - 1, S);
            int64_t lo = 0, hi;
            if (L > 1) { /* (1): block b(R, l) over the group, into the output */
                g.goff = (int64_t)R * L, g.first = first, g.m = m;
                round_run(&g);
                kb__ccl_fence(k); /* (2) loads what it stored */
            } else {
                kb__ccl_chunk(s->elems, P, (int)s->index[R], &lo, &hi);
            }
            for (int64_t j = 0; j < m; j++) {
                int64_t a = (first + j) * s->piece, len = B - a < s->piece ? B - a : s->piece;
                tl_tile v = kb__ccl_load(k, L > 1 ? g.out : g.in, lo + a, len);
                if (t > 0) {
                    tl_tile got = tl_wait(k, h[j]);
                    tl_tile c = kb__ccl_combine(k, s->op, got, v);
                    tl_free(k, got);
                    tl_free(k, v);
                    v = c;
                }
                if (t + 1 < S) {
                    held[j] = v;
                    continue;
                }
                v = kb__ccl_finish(k, s, v);
                kb__ccl_store(k, g.out, a, len, v);
                tl_free(k, v);
            }
            if (t + 1 == S) break;
            for (int64_t j = 0; j < m; j++) {
                int64_t a = (first + j) * s->piece, len = B - a < s->piece ? B - a : s->piece;
                h[j] = tl_recv_async(k, TL_DIR_N, 1, &len, s->dtype);
            }
            for (int64_t j = 0; j < m; j++) {
                tl_send(k, TL_DIR_S, held[j]);
                tl_free(k, held[j]);
            }
        }
    }
}

/* Broadcast: the root sends its buffer piece by piece to NEXT; every other
 * rank receives from PREV, stores, and passes the piece on unless NEXT is
 * the root. Pieces pipeline along the ring (a chain: nobody waits on a
 * rank downstream, so no slot count can deadlock it). */
void kb__ccl_ring_broadcast(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int r = tl_rank(k), p = (int)s->world, root = (int)s->root;
    if (p == 1) return;
    int last = wrap(r + 1, p) == root;
    for (int64_t a = 0; a < s->elems; a += s->piece) {
        int64_t len = s->elems - a < s->piece ? s->elems - a : s->piece;
        tl_tile v;
        if (r == root) {
            v = kb__ccl_load(k, buf, a, len);
        } else {
            v = tl_recv(k, TL_DIR_PREV, 1, &len, s->dtype);
            kb__ccl_store(k, buf, a, len, v);
        }
        if (!last) tl_send(k, TL_DIR_NEXT, v);
        tl_free(k, v);
    }
}

/* Reduce: a chain to the root along the ring, the broadcast run backwards.
 * Rank root + 1 sends its buffer piece by piece to NEXT; every rank after
 * it combines what it receives with its own piece and sends that on; the
 * root combines last, finishes (avg divides by p) and stores. So the
 * root's buffer gets ((x_{root+1} op x_{root+2}) op ...) op x_root, each op
 * rounded to the dtype, and the other buffers stay as they were. The own
 * piece's load is issued before the receive, so it runs while the piece
 * travels. */
void kb__ccl_ring_reduce(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int r = tl_rank(k), p = (int)s->world, root = (int)s->root;
    if (p == 1) return; /* op over one buffer, avg by 1: the buffer */
    int first = wrap(root + 1, p) == r;
    for (int64_t a = 0; a < s->elems; a += s->piece) {
        int64_t len = s->elems - a < s->piece ? s->elems - a : s->piece;
        tl_tile v = kb__ccl_load(k, buf, a, len);
        if (!first) {
            tl_tile got = tl_recv(k, TL_DIR_PREV, 1, &len, s->dtype);
            tl_tile c = kb__ccl_combine(k, s->op, got, v);
            tl_free(k, got);
            tl_free(k, v);
            v = c;
        }
        if (r == root) {
            v = kb__ccl_finish(k, s, v);
            kb__ccl_store(k, buf, a, len, v);
        } else {
            tl_send(k, TL_DIR_NEXT, v);
        }
        tl_free(k, v);
    }
}

/* All-to-all: buffer b's chunk c goes to chunk b of buffer c's output:
 * chunks of N/p elements, or with s->counts (all_to_all_v) counts[b·p +
 * c] elements, each in buffer's chunks back to back by destination index
 * and each out buffer's by source index. The ring's queues run both ways,
 * so a chunk goes the short way round: to the rank d places on (d <= p/2)
 * through NEXT, to the rank d places back (d <= (p-1)/2) through PREV,
 * forwarded by the d - 1 ranks between. In phase d every rank sends its
 * own chunk for rank r + d to NEXT, then passes on the first d - 1 chunks
 * it receives from PREV (from r - 1, r - 2, ..., bound past it) and keeps
 * the d-th (from r - d, bound for it); the same mirrored toward PREV, at
 * once. A phase is, each way, a stream like the all-gather's over d
 * steps, O[k] = own piece k (k < m), O[k] = I[k - m] after; a way's
 * phases follow one another in one stream, where that still holds, so no
 * phase waits for the last to drain. Rounds of at most half the window of
 * pieces per chunk (two streams share the tile scratch), the receives
 * lagging behind the sends (see round_run). A place of the stream is a
 * piece of a known chunk, so with uneven chunks every rank skips the same
 * empty pieces on both ends. The chunk a rank keeps is copied during phase
 * 1, piece by piece behind the sends. Each way of a link carries about
 * p²/8 chunks, against p - 1 in an all-gather (one way). Copies only:
 * every output holds the input bits. */
typedef struct a2a {
    tl_ctx *k;
    const kb_ccl_sched *s;
    tl_tensor *in, *out;
    int r, p;
    int64_t chunk;    /* elements per chunk without counts */
    int64_t first, m; /* this round: first piece of every chunk, pieces */
    /* with counts, by ring rank: where this rank's chunk for it starts in
     * the input, where the chunk from it starts in the output (summed once;
     * NULL: summed when asked) */
    const int64_t *sent_at, *got_at;
} a2a;

/* A place in one way's stream: phase d, message k of the phase (its own
 * pieces are k < m; the phase's last m, k >= (d - 1) m, are kept on
 * arrival), message i of the stream. */
typedef struct a2a_pos {
    int d;
    int64_t k, i;
} a2a_pos;

/* One way: to, from the directions it sends to and receives from, sign +1
 * toward NEXT (destinations r + d), -1 toward PREV; its phases follow one
 * another in one stream, so O[i] = I[i - m] across them too. */
typedef struct a2a_way {
    int to, from, sign;
    int64_t total;         /* messages of its stream this round */
    a2a_pos snd, rcv, pre; /* next to send, to arrive, to load ahead */
    tl_tile held[KB__CCL_WINDOW_MAX], own[RING_LAG_MAX + 1];
    tl_recv_handle pend[RING_LAG_MAX + 1];
} a2a_way;

static void a2a_next(a2a_pos *c, int64_t m)
{
    c->i++;
    if (++c->k == c->d * m) c->d++, c->k = 0;
}

/* Elements of the chunk from ring rank o to ring rank d. */
static int64_t a2a_chunk(const a2a *g, int o, int d)
{
    const kb_ccl_sched *s = g->s;
    o = wrap(o, g->p), d = wrap(d, g->p);
    return s->counts ? s->counts[(int64_t)s->index[o] * g->p + s->index[d]] : g->chunk;
}

/* Where this rank's chunk for ring rank d starts in its input (in 1), or
 * the chunk from ring rank d in its output (in 0): after the chunks for
 * (from) lower buffer indexes. */
static int64_t a2a_at(const a2a *g, int d, int in)
{
    const uint32_t *x = g->s->index;
    d = wrap(d, g->p);
    if (!g->s->counts) return (int64_t)x[d] * g->chunk;
    const int64_t *memo = in ? g->sent_at : g->got_at;
    if (memo) return memo[d];
    int64_t at = 0;
    for (int e = 0; e < g->p; e++)
        if (x[e] < x[d]) at += in ? a2a_chunk(g, g->r, e) : a2a_chunk(g, e, g->r);
    return at;
}

/* Elements of piece j of this round of the chunk o -> d (0: none). */
static int64_t a2a_len(const a2a *g, int o, int d, int64_t j)
{
    int64_t left = a2a_chunk(g, o, d) - (g->first + j) * g->s->piece;
    return left <= 0 ? 0 : left < g->s->piece ? left : g->s->piece;
}

/* Piece j of this round of this rank's chunk for ring rank dst, or TL_NONE. */
static tl_tile a2a_own(a2a *g, int dst, int64_t j)
{
    int64_t len = a2a_len(g, g->r, dst, j);
    if (!len) return TL_NONE;
    return kb__ccl_load(g->k, g->in, a2a_at(g, dst, 1) + (g->first + j) * g->s->piece, len);
}

/* Copies piece j of this round of the chunk a rank keeps (bound for itself). */
static void a2a_keep(a2a *g, int64_t j)
{
    int64_t len = a2a_len(g, g->r, g->r, j), off = (g->first + j) * g->s->piece;
    if (!len) return;
    tl_tile v = kb__ccl_load(g->k, g->in, a2a_at(g, g->r, 1) + off, len);
    kb__ccl_store(g->k, g->out, a2a_at(g, g->r, 0) + off, len, v);
    tl_free(g->k, v);
}

/* Loads the own piece at w's load-ahead place, if it is one, and moves it on. */
static void a2a_ahead(a2a *g, a2a_way *w, int64_t q)
{
    a2a_pos *c = &w->pre;
    if (c->i >= w->total) return;
    if (c->k < g->m) w->own[c->i % q] = a2a_own(g, g->r + w->sign * c->d, c->k);
    a2a_next(c, g->m);
}

/* w's next message: post the receive of I[i], send O[i]. The inbound
 * message at step t of phase d comes from ring rank r - sign (t + 1); the
 * outbound one at step t >= 1 is the one that came in at step t - 1, from
 * r - sign t; each is bound d ranks on from where it started. */
static void a2a_send(a2a *g, a2a_way *w, int64_t q)
{
    tl_ctx *k = g->k;
    a2a_pos c = w->snd;
    int64_t m = g->m, t = c.k / m, j = c.k % m;
    int in_from = g->r - w->sign * (int)(t + 1), out_from = g->r - w->sign * (int)t;
    int64_t len = a2a_len(g, in_from, in_from + w->sign * c.d, j);
    if (len) w->pend[c.i % q] = tl_recv_async(k, w->from, 1, &len, g->s->dtype);
    tl_tile o = t == 0 ? w->own[c.i % q] : w->held[(c.i - m) % m];
    a2a_ahead(g, w, q); /* into the slot just freed */
    if (a2a_len(g, out_from, out_from + w->sign * c.d, j)) {
        tl_send(k, w->to, o);
        tl_free(k, o);
    }
    a2a_next(&w->snd, m);
}

/* w's next inbound message: held to be sent on, or kept. */
static void a2a_arrive(a2a *g, a2a_way *w, int64_t q)
{
    tl_ctx *k = g->k;
    a2a_pos c = w->rcv;
    int64_t m = g->m, t = c.k / m, j = c.k % m;
    int from = g->r - w->sign * (int)(t + 1);
    a2a_next(&w->rcv, m);
    if (!a2a_len(g, from, from + w->sign * c.d, j)) return;
    tl_tile got = tl_wait(k, w->pend[c.i % q]);
    if (t + 1 < c.d) {
        w->held[c.i % m] = got; /* bound past this rank: sent on as O[i + m] */
        return;
    }
    kb__ccl_store(k, g->out, a2a_at(g, from, 0) + (g->first + j) * g->s->piece,
                  a2a_len(g, from, g->r, j), got);
    tl_free(k, got);
}

/* One round (pieces first .. first + m of every chunk): both ways' streams,
 * whose messages go out in turns. */
static void a2a_round(a2a *g)
{
    int64_t m = g->m, lag = lag_of(m, g->s), q = lag + 1, total = 0;
    a2a_way ways[2] = {{.to = TL_DIR_NEXT, .from = TL_DIR_PREV, .sign = 1},
                       {.to = TL_DIR_PREV, .from = TL_DIR_NEXT, .sign = -1}};
    for (int w = 0; w < 2; w++) {
        a2a_way *x = &ways[w];
        int64_t phases = w ? (g->p - 1) / 2 : g->p / 2;
        x->total = m * phases * (phases + 1) / 2;
        x->snd = x->rcv = x->pre = (a2a_pos){1, 0, 0};
        for (int64_t j = 0; j < q; j++)
            a2a_ahead(g, x, q);
        if (x->total > total) total = x->total;
    }
    for (int64_t i = 0; i < total + lag; i++) {
        for (int w = 0; w < 2; w++)
            if (i < ways[w].total) a2a_send(g, &ways[w], q);
        if (i < m) a2a_keep(g, i); /* behind the first sends, not before */
        for (int w = 0; w < 2; w++)
            if (i >= lag && i - lag < ways[w].total) a2a_arrive(g, &ways[w], q);
    }
}

void kb__ccl_ring_all_to_all(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    a2a g = {.k = k, .s = s, .p = (int)s->world, .chunk = s->elems / (int64_t)s->world};
    g.in = tl_arg_tensor(k, 0);
    g.out = tl_arg_tensor(k, 1);
    g.r = tl_rank(k);
    /* every rank runs as many rounds as the longest chunk of the call needs */
    int64_t longest = s->counts ? 0 : g.chunk;
    for (int64_t e = 0; s->counts && e < (int64_t)g.p * g.p; e++)
        if (s->counts[e] > longest) longest = s->counts[e];
    int64_t pieces = tl_cdiv(longest, s->piece);
    int64_t *at = s->counts ? kb__ccl_scratch(k, 2 * (size_t)g.p * sizeof *at) : NULL;
    for (int d = 0; at && d < g.p; d++)
        at[d] = a2a_at(&g, d, 1), at[g.p + d] = a2a_at(&g, d, 0);
    g.sent_at = at, g.got_at = at ? at + g.p : NULL;
    /* two ways at once, unless p is 2: each may keep half the window */
    int64_t window = g.p > 2 && s->window > 1 ? s->window / 2 : s->window;
    for (g.first = 0; g.first < pieces; g.first += g.m) {
        g.m = pieces - g.first < window ? pieces - g.first : window;
        if (g.p > 1)
            a2a_round(&g);
        else /* only the chunk it keeps */
            for (int64_t j = 0; j < g.m; j++)
                a2a_keep(&g, j);
    }
    kb__ccl_scratch_put(k, at);
}
