/*
 * board.c — the meeting point of a calibrated ring's ranks (ccl/board.h).
 */
#include "ccl/board.h"

#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "ccl/algorithms/algorithms.h"
#include "kernel/tile.h"

#include "host/device.h"
#include "kernel/tl_internal.h"
#include "runtime/launch.h"
#include "runtime/machine.h"

kb__ccl_board *kb__ccl_boards_make(kb_machine *m, uint32_t n, int warmup, uint32_t want,
                                   kb__ccl_ring_data *data, kb__err *err)
{
    kb__ccl_board *b = calloc(n, sizeof *b);
    if (!b) {
        kb__err_set(err, KB_ENOMEM, "collective: out of host memory");
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        b[i] = (kb__ccl_board){.m = m, .data = data, .warmup = warmup, .want = want};
        kb__event_init(&b[i].posted, "calibrated ring");
    }
    return b;
}

void kb__ccl_boards_free(kb__ccl_board *b, uint32_t n)
{
    for (uint32_t i = 0; b && i < n; i++) {
        kb__event_fini(&b[i].posted);
        free(b[i].at_start);
    }
    free(b);
}

void kb__ccl_board_start(kb__ccl_board *b, tl_ctx *k)
{
    if (b->n_started++) return;
    kb_machine *m = b->m;
    kb__fabric *fab = m->dev->fab;
    uint32_t n = kb__fabric_link_count(fab);
    b->others = kb__rt_launches_running(m) > 1;
    b->next_launch = m->next_launch_id;
    b->at_start = malloc((n ? n : 1) * sizeof *b->at_start);
    if (!b->at_start) kb__pe_raise(&k->prog, KB_ENOMEM, "calibrated ring: out of host memory");
    for (uint32_t i = 0; i < n; i++) {
        const kb__link *l = kb__fabric_link(fab, i);
        b->at_start[i] = (kb__ccl_link_snap){l->bytes, l->packets, l->busy_ps};
    }
}

void kb__ccl_pe_snap_take(const kb__pe *pe, kb__ccl_pe_snap *s)
{
    for (int u = 0; u < KB__PE_UNIT_COUNT; u++) {
        s->busy_ps[u] = pe->unit[u].busy_ps;
        s->ops[u] = pe->unit[u].ops;
        s->work[u] = pe->unit[u].work;
    }
}

/* x · num / den, for num and den below 2^64 (a counter times a step count
 * stays below 2^128). */
static uint64_t scaled(uint64_t x, unsigned __int128 num, unsigned __int128 den)
{
    return (uint64_t)(x * num / den);
}

/* ---- data ------------------------------------------------------------------ */

/* Reads elements [off, off + len) of rank r's buffer t (0 input, 1 output). */
static int rank_read(const kb__ccl_board *b, uint32_t r, int t, int64_t off, int64_t len, void *dst,
                     kb__err *err)
{
    const kb__ccl_ring_data *d = b->data;
    size_t es = kb__dtype_size((kb__dtype)d->s->dtype);
    const tl_tensor *v = &d->views[r * 2 + (uint32_t)t];
    return kb__rt_va_copy(b->m, d->pes[r], v->va + (uint64_t)off * es, dst, (uint64_t)len * es,
                          false, err);
}

/* The reduction's value, in ring.c's order: ring chunk q is data chunk
 * D(q) (q, or for a reduce-scatter into separate outputs the buffer index
 * of rank q - 1), and its value x_q op x_{q+1} ... op x_{q-1} over the
 * ranks' inputs, each op rounded to the dtype as the kernel's tile op
 * rounds it; avg then divides once by p (f32 true division, cast back), as
 * kb__ccl_finish does. */
static int make_reduced(kb__ccl_board *b, int by_index, kb__err *err)
{
    kb__ccl_ring_data *d = b->data;
    const kb_ccl_sched *s = d->s;
    kb__dtype dt = (kb__dtype)s->dtype;
    size_t es = kb__dtype_size(dt);
    int p = (int)s->world;
    int64_t most = s->elems / p + 1;
    uint8_t *x = malloc((size_t)most * es), *f = malloc((size_t)most * 4);
    if (!d->v) d->v = malloc((size_t)s->elems * es);
    int rc = !x || !f || !d->v ? kb__err_set(err, KB_ENOMEM, "collective: out of host memory") : 0;
    kb__tile_op op = s->op == KB_MAX   ? KB__OP_MAXIMUM
                     : s->op == KB_MIN ? KB__OP_MINIMUM
                                       : KB__OP_ADD;
    for (int q = 0; !rc && q < p; q++) {
        int c = by_index ? (int)s->index[(q + p - 1) % p] : q;
        int64_t lo, hi;
        kb__ccl_chunk(s->elems, p, c, &lo, &hi);
        if (hi == lo) continue;
        uint8_t *acc = d->v + (size_t)lo * es;
        kb__tile_desc t = {.dtype = dt, .ndim = 1, .shape = {hi - lo}};
        rc = rank_read(b, (uint32_t)q, 0, lo, hi - lo, acc, err);
        for (int i = 1; !rc && i < p; i++) {
            rc = rank_read(b, (uint32_t)((q + i) % p), 0, lo, hi - lo, x, err);
            if (!rc) rc = kb__tile_binary(op, &t, acc, &t, acc, &t, x, err);
        }
        if (rc || s->op != KB_AVG) continue;
        uint8_t n[8];
        kb__tile_desc sd = {.dtype = dt, .ndim = 0}, qd;
        rc = kb__dtype_from_f64(dt, (double)p, n);
        if (!rc) rc = kb__tile_binary_infer(KB__OP_DIV, &t, &sd, &qd, err);
        if (!rc) rc = kb__tile_binary(KB__OP_DIV, &qd, f, &t, acc, &sd, n, err);
        if (!rc && qd.dtype == dt)
            memcpy(acc, f, (size_t)(hi - lo) * es);
        else if (!rc)
            rc = kb__tile_cast(&t, acc, &qd, f, err);
    }
    free(x);
    free(f);
    return rc;
}

/* The all-gather's value: block c of the output is the input of the rank
 * whose buffer index is c. */
static int make_gathered(kb__ccl_board *b, kb__err *err)
{
    kb__ccl_ring_data *d = b->data;
    const kb_ccl_sched *s = d->s;
    size_t es = kb__dtype_size((kb__dtype)s->dtype);
    d->v = malloc((size_t)s->world * (size_t)s->elems * es);
    if (!d->v) return kb__err_set(err, KB_ENOMEM, "collective: out of host memory");
    int rc = 0;
    for (uint32_t r = 0; !rc && r < s->world; r++)
        rc = rank_read(b, r, 0, 0, s->elems, d->v + (size_t)s->index[r] * (size_t)s->elems * es,
                       err);
    return rc;
}

void kb__ccl_board_write(kb__ccl_board *b, tl_ctx *k, const tl_tensor *t, int64_t dst_off,
                         int64_t v_off, int64_t len)
{
    size_t es = kb__dtype_size((kb__dtype)b->data->s->dtype);
    kb__err e;
    int rc = kb__rt_va_copy(b->m, k->prog.pe->index, t->va + (uint64_t)dst_off * es,
                            b->data->v + (size_t)v_off * es, (uint64_t)len * es, true, &e);
    if (rc) kb__pe_raise(&k->prog, rc, "calibrated ring: %s", e.msg);
}

void kb__ccl_board_read(const kb__ccl_board *b, void *dst, int64_t v_off, int64_t len)
{
    size_t es = kb__dtype_size((kb__dtype)b->data->s->dtype);
    memcpy(dst, b->data->v + (size_t)v_off * es, (size_t)len * es);
}

/* ---- the decision ------------------------------------------------------------ */

/* The last rank decides: calibrated unless another launch ran meanwhile;
 * then the links count the steps not run, and in data mode the value is
 * made (once per call). */
static int decide(kb__ccl_board *b, int steps, int by_index, kb__err *err)
{
    kb_machine *m = b->m;
    kb__fabric *fab = m->dev->fab;
    b->calibrated =
        !b->others && kb__rt_launches_running(m) == 1 && m->next_launch_id == b->next_launch;
    if (!b->calibrated) return 0;
    if (b->data && !b->data->v) {
        int rc = b->gathers ? make_gathered(b, err) : make_reduced(b, by_index, err);
        if (rc) return rc;
    }
    /* the warm-ups' traffic per step of the second halves, over all of it */
    unsigned __int128 num = (unsigned __int128)b->dma_half * (uint64_t)(steps - b->warmup);
    unsigned __int128 den = (unsigned __int128)b->dma_all * (uint64_t)(b->warmup - b->warmup / 2);
    if (!den) return 0;
    for (uint32_t i = 0; i < kb__fabric_link_count(fab); i++) {
        const kb__link *l = kb__fabric_link(fab, i);
        const kb__ccl_link_snap *s = &b->at_start[i];
        if (l->bytes == s->bytes && l->packets == s->packets && l->busy_ps == s->busy_ps) continue;
        kb__fabric_link_count_more(fab, i, scaled(l->bytes - s->bytes, num, den),
                                   scaled(l->packets - s->packets, num, den),
                                   scaled(l->busy_ps - s->busy_ps, num, den));
    }
    return 0;
}

int kb__ccl_board_post(kb__ccl_board *b, tl_ctx *k, int steps, int by_index, kb__time end,
                       kb__time pace, const kb__ccl_pe_snaps *pe)
{
    kb__pe_prog *g = &k->prog;
    b->dma_all += pe->end.busy_ps[KB__PE_DMA] - pe->start.busy_ps[KB__PE_DMA];
    b->dma_half += pe->end.busy_ps[KB__PE_DMA] - pe->mid.busy_ps[KB__PE_DMA];
    if (end > b->end_max) b->end_max = end;
    if (pace > b->pace_max) b->pace_max = pace;
    if (++b->n_posted == b->want) {
        kb__err e;
        int rc = decide(b, steps, by_index, &e);
        kb__event_fire(g->sim, &b->posted, rc);
        if (rc) kb__pe_raise(g, rc, "calibrated ring: %s", e.msg);
    } else {
        int rc = kb__event_wait(g->sim, &b->posted);
        if (rc) kb__pe_raise(g, rc, "calibrated ring: stopped while waiting for its other ranks");
    }
    if (!b->calibrated) return 0;
    /* this rank's units: its warm-up's second half, scaled to the steps left */
    uint64_t num = (uint64_t)(steps - b->warmup), den = (uint64_t)(b->warmup - b->warmup / 2);
    for (int u = 0; u < KB__PE_UNIT_COUNT; u++) {
        kb__pe_unit *x = &g->pe->unit[u];
        x->busy_ps += scaled(pe->end.busy_ps[u] - pe->mid.busy_ps[u], num, den);
        x->ops += scaled(pe->end.ops[u] - pe->mid.ops[u], num, den);
        x->work += scaled(pe->end.work[u] - pe->mid.work[u], num, den);
    }
    return 1;
}
