/*
 * board.c — the meeting point of calibrated ring streams (ccl/board.h).
 */
#include "ccl/board.h"

#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "ccl/algorithms/algorithms.h"
#include "host/device.h"
#include "kernel/tile.h"
#include "kernel/tl_internal.h"
#include "runtime/launch.h"
#include "runtime/machine.h"

kb__ccl_phase *kb__ccl_phases_make(kb_machine *m, uint32_t n_phases, const uint32_t *rings,
                                   int warmup, uint32_t want, const kb_ccl_sched *s,
                                   const tl_tensor *views, const uint32_t *pes, kb__err *err)
{
    kb__ccl_phase *ph = calloc(n_phases, sizeof *ph);
    int ok = ph != NULL;
    for (uint32_t i = 0; ok && i < n_phases; i++) {
        ph[i] = (kb__ccl_phase){.m = m, .warmup = warmup, .want = want, .n_rings = rings[i]};
        kb__event_init(&ph[i].posted, "calibrated ring");
        ok = (ph[i].rings = calloc(rings[i], sizeof *ph[i].rings)) != NULL;
        for (uint32_t r = 0; ok && r < rings[i]; r++)
            ph[i].rings[r] = (kb__ccl_board){.ph = &ph[i], .s = s, .views = views, .pes = pes};
    }
    if (ok) return ph;
    kb__ccl_phases_free(ph, n_phases);
    kb__err_set(err, KB_ENOMEM, "collective: out of host memory");
    return NULL;
}

void kb__ccl_phases_free(kb__ccl_phase *ph, uint32_t n_phases)
{
    for (uint32_t i = 0; ph && i < n_phases; i++) {
        kb__event_fini(&ph[i].posted);
        free(ph[i].at_start);
        free(ph[i].mem_at_start);
        for (uint32_t r = 0; ph[i].rings && r < ph[i].n_rings; r++) {
            free(ph[i].rings[r].members);
            free(ph[i].rings[r].v);
        }
        free(ph[i].rings);
    }
    free(ph);
}

void kb__ccl_board_start(kb__ccl_board *b, tl_ctx *k)
{
    kb__ccl_phase *ph = b->ph;
    if (ph->n_started++) return;
    kb_machine *m = ph->m;
    kb__fabric *fab = m->dev->fab;
    uint32_t n = kb__fabric_link_count(fab);
    ph->others = kb__rt_launches_running(m) > 1;
    ph->next_launch = m->next_launch_id;
    const kb__device *d = m->dev;
    ph->at_start = malloc((n ? n : 1) * sizeof *ph->at_start);
    ph->mem_at_start = malloc((d->n_mems ? d->n_mems : 1) * sizeof *ph->mem_at_start);
    if (!ph->at_start || !ph->mem_at_start)
        kb__pe_raise(&k->prog, KB_ENOMEM, "calibrated ring: out of host memory");
    for (uint32_t i = 0; i < n; i++) {
        const kb__link *l = kb__fabric_link(fab, i);
        ph->at_start[i] = (kb__ccl_link_snap){l->bytes, l->packets, l->busy_ps};
    }
    for (uint32_t i = 0; i < d->n_mems; i++) {
        const kb__memctl *mc = &d->mems[i];
        ph->mem_at_start[i] = (kb__ccl_mem_snap){mc->bytes_read, mc->bytes_written, mc->packets,
                                                 mc->busy_ps, mc->wait_ps};
    }
    memcpy(ph->msgs_at_start, m->stats.messages, sizeof ph->msgs_at_start);
    memcpy(ph->bytes_at_start, m->stats.bytes, sizeof ph->bytes_at_start);
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

/* ---- a ring's value ------------------------------------------------------------ */

/* Reads elements [off, off + len) of program prog's buffer t (0 input, 1
 * output). */
static int prog_read(const kb__ccl_board *b, uint32_t prog, int t, int64_t off, int64_t len,
                     void *dst, kb__err *err)
{
    size_t es = kb__dtype_size((kb__dtype)b->s->dtype);
    const tl_tensor *v = &b->views[prog * 2 + (uint32_t)t];
    return kb__rt_va_copy(b->ph->m, b->pes[prog], v->va + (uint64_t)off * es, dst,
                          (uint64_t)len * es, false, err);
}

/* acc := acc / p, as kb__ccl_finish computes it (a true division in f32 by
 * the scalar p of the dtype, cast back); f is scratch for len f32. */
static int finish(const kb_ccl_sched *s, uint8_t *acc, int64_t len, uint8_t *f, kb__err *err)
{
    kb__dtype dt = (kb__dtype)s->dtype;
    uint8_t n[8];
    kb__tile_desc t = {.dtype = dt, .ndim = 1, .shape = {len}}, sd = {.dtype = dt, .ndim = 0}, qd;
    int rc = kb__dtype_from_f64(dt, (double)s->world, n);
    if (!rc) rc = kb__tile_binary_infer(KB__OP_DIV, &t, &sd, &qd, err);
    if (!rc) rc = kb__tile_binary(KB__OP_DIV, &qd, f, &t, acc, &sd, n, err);
    if (rc) return rc;
    if (qd.dtype == dt) {
        memcpy(acc, f, (size_t)len * kb__dtype_size(dt));
        return 0;
    }
    return kb__tile_cast(&t, acc, &qd, f, err);
}

/* A reduce-scatter's value: ring chunk q over the members q, q + 1, ...,
 * q - 1, each op rounded by the tile arithmetic, then finished. */
static int make_reduced(kb__ccl_board *b, kb__err *err)
{
    const kb_ccl_sched *s = b->s;
    kb__dtype dt = (kb__dtype)s->dtype;
    size_t es = kb__dtype_size(dt);
    uint32_t p = b->p;
    int64_t most = b->n / p + 1;
    uint8_t *x = malloc((size_t)most * es), *f = malloc((size_t)most * 4);
    b->v = malloc((size_t)(b->n ? b->n : 1) * es);
    int rc = !x || !f || !b->v ? kb__err_set(err, KB_ENOMEM, "collective: out of host memory") : 0;
    kb__tile_op op = s->op == KB_MAX   ? KB__OP_MAXIMUM
                     : s->op == KB_MIN ? KB__OP_MINIMUM
                                       : KB__OP_ADD;
    for (uint32_t q = 0; !rc && q < p; q++) {
        int c =
            b->kind == KB__CCL_VALUE_INDEXED ? (int)s->index[b->members[(q + p - 1) % p]] : (int)q;
        int64_t lo, hi;
        kb__ccl_chunk(b->n, (int)p, c, &lo, &hi);
        if (hi == lo) continue;
        uint8_t *acc = b->v + (size_t)lo * es;
        kb__tile_desc t = {.dtype = dt, .ndim = 1, .shape = {hi - lo}};
        rc = prog_read(b, b->members[q], 0, b->base + lo, hi - lo, acc, err);
        for (uint32_t i = 1; !rc && i < p; i++) {
            rc = prog_read(b, b->members[(q + i) % p], 0, b->base + lo, hi - lo, x, err);
            if (!rc) rc = kb__tile_binary(op, &t, acc, &t, acc, &t, x, err);
        }
        if (!rc && b->finish && s->op == KB_AVG) rc = finish(s, acc, hi - lo, f, err);
    }
    free(x);
    free(f);
    return rc;
}

/* An all-gather's value: in place, chunk c from member c - 1 (which
 * finished it); into outputs, block index[q] from member q's input. */
static int make_gathered(kb__ccl_board *b, kb__err *err)
{
    size_t es = kb__dtype_size((kb__dtype)b->s->dtype);
    uint32_t p = b->p;
    int blocks = b->kind == KB__CCL_VALUE_BLOCKS;
    size_t elems = blocks ? (size_t)p * (size_t)b->n : (size_t)b->n;
    b->v = malloc((elems ? elems : 1) * es);
    if (!b->v) return kb__err_set(err, KB_ENOMEM, "collective: out of host memory");
    int rc = 0;
    for (uint32_t q = 0; !rc && q < p; q++) {
        if (blocks) {
            size_t at = (size_t)b->s->index[b->members[q]] * (size_t)b->n;
            rc = prog_read(b, b->members[q], 0, 0, b->n, b->v + at * es, err);
            continue;
        }
        int64_t lo, hi;
        kb__ccl_chunk(b->n, (int)p, (int)q, &lo, &hi);
        rc = prog_read(b, b->members[(q + p - 1) % p], 0, b->base + lo, hi - lo,
                       b->v + (size_t)lo * es, err);
    }
    return rc;
}

void kb__ccl_board_write(kb__ccl_board *b, tl_ctx *k, const tl_tensor *t, int64_t dst_off,
                         int64_t v_off, int64_t len)
{
    size_t es = kb__dtype_size((kb__dtype)b->s->dtype);
    kb__err e;
    int rc = kb__rt_va_copy(b->ph->m, k->prog.pe->index, t->va + (uint64_t)dst_off * es,
                            b->v + (size_t)v_off * es, (uint64_t)len * es, true, &e);
    if (rc) kb__pe_raise(&k->prog, rc, "calibrated ring: %s", e.msg);
}

void kb__ccl_board_read(const kb__ccl_board *b, void *dst, int64_t v_off, int64_t len)
{
    size_t es = kb__dtype_size((kb__dtype)b->s->dtype);
    memcpy(dst, b->v + (size_t)v_off * es, (size_t)len * es);
}

/* ---- the decision ------------------------------------------------------------ */

kb__time kb__ccl_board_end(const kb__ccl_board *b)
{
    return b->end_max + (kb__time)(b->steps - b->ph->warmup) * b->pace;
}

/* The last rank of the phase decides: calibrated unless another launch ran
 * meanwhile; then the rings' values are made (data mode) and the links
 * count the steps not run. */
static int decide(kb__ccl_phase *ph, int steps, kb__err *err)
{
    kb_machine *m = ph->m;
    kb__fabric *fab = m->dev->fab;
    ph->calibrated =
        !ph->others && kb__rt_launches_running(m) == 1 && m->next_launch_id == ph->next_launch;
    if (!ph->calibrated) return 0;
    for (uint32_t r = 0; r < ph->n_rings; r++) {
        kb__ccl_board *b = &ph->rings[r];
        if (!b->views || !b->members) continue;
        int rc = b->kind == KB__CCL_VALUE_REDUCED || b->kind == KB__CCL_VALUE_INDEXED
                     ? make_reduced(b, err)
                     : make_gathered(b, err);
        if (rc) return rc;
    }
    /* the warm-ups' traffic per step of the second halves, over all of it */
    unsigned __int128 num = (unsigned __int128)ph->dma_half * (uint64_t)(steps - ph->warmup);
    unsigned __int128 den =
        (unsigned __int128)ph->dma_all * (uint64_t)(ph->warmup - ph->warmup / 2);
    if (!den) return 0;
    /* the steps not run take from now to the phase's last arrival */
    kb__time now = kb__sim_now(m->dev->sim), end = now;
    for (uint32_t r = 0; r < ph->n_rings; r++)
        if (kb__ccl_board_end(&ph->rings[r]) > end) end = kb__ccl_board_end(&ph->rings[r]);
    for (uint32_t i = 0; i < kb__fabric_link_count(fab); i++) {
        const kb__link *l = kb__fabric_link(fab, i);
        const kb__ccl_link_snap *s = &ph->at_start[i];
        if (l->bytes == s->bytes && l->packets == s->packets && l->busy_ps == s->busy_ps) continue;
        kb__fabric_link_count_more(fab, i, scaled(l->bytes - s->bytes, num, den),
                                   scaled(l->packets - s->packets, num, den),
                                   scaled(l->busy_ps - s->busy_ps, num, den), now, end);
    }
    for (uint32_t i = 0; i < m->dev->n_mems; i++) {
        kb__memctl *mc = &m->dev->mems[i];
        const kb__ccl_mem_snap *s = &ph->mem_at_start[i];
        mc->bytes_read += scaled(mc->bytes_read - s->bytes_read, num, den);
        mc->bytes_written += scaled(mc->bytes_written - s->bytes_written, num, den);
        mc->packets += scaled(mc->packets - s->packets, num, den);
        kb__time busy = scaled(mc->busy_ps - s->busy_ps, num, den);
        mc->busy_ps += busy;
        if (mc->util && busy) kb__memctl_util_spread(mc, now, now, end, busy);
        mc->wait_ps += scaled(mc->wait_ps - s->wait_ps, num, den);
    }
    for (int k = 0; k < KB_MSG_KIND_COUNT; k++) {
        m->stats.messages[k] += scaled(m->stats.messages[k] - ph->msgs_at_start[k], num, den);
        m->stats.bytes[k] += scaled(m->stats.bytes[k] - ph->bytes_at_start[k], num, den);
    }
    return 0;
}

int kb__ccl_board_post(kb__ccl_board *b, tl_ctx *k, const kb__ccl_post *x)
{
    kb__pe_prog *g = &k->prog;
    kb__ccl_phase *ph = b->ph;
    if (b->views && !b->members && !(b->members = calloc(x->p, sizeof *b->members)))
        kb__pe_raise(g, KB_ENOMEM, "calibrated ring: out of host memory");
    if (b->members) b->members[x->r] = x->program;
    if (x->end > b->end_max || (x->end == b->end_max && x->pace > b->pace)) {
        b->end_max = x->end;
        b->pace = x->pace;
    }
    b->p = x->p, b->steps = x->steps, b->kind = x->kind;
    b->base = x->base, b->n = x->n, b->finish = x->finish;
    ph->dma_all += x->pe->end.ops[KB__PE_DMA] - x->pe->start.ops[KB__PE_DMA];
    ph->dma_half += x->pe->end.ops[KB__PE_DMA] - x->pe->mid.ops[KB__PE_DMA];
    if (++ph->n_posted == ph->want) {
        kb__err e;
        int rc = decide(ph, x->steps, &e);
        kb__event_fire(g->sim, &ph->posted, rc);
        if (rc) kb__pe_raise(g, rc, "calibrated ring: %s", e.msg);
    } else {
        int rc = kb__event_wait(g->sim, &ph->posted);
        if (rc) kb__pe_raise(g, rc, "calibrated ring: stopped while waiting for its other ranks");
    }
    if (!ph->calibrated) return 0;
    /* this rank's units: its warm-up's second half, scaled to the steps left */
    int w = ph->warmup;
    uint64_t num = (uint64_t)(x->steps - w), den = (uint64_t)(w - w / 2);
    for (int u = 0; u < KB__PE_UNIT_COUNT; u++) {
        kb__pe_unit *y = &g->pe->unit[u];
        y->busy_ps += scaled(x->pe->end.busy_ps[u] - x->pe->mid.busy_ps[u], num, den);
        y->ops += scaled(x->pe->end.ops[u] - x->pe->mid.ops[u], num, den);
        y->work += scaled(x->pe->end.work[u] - x->pe->mid.work[u], num, den);
    }
    return 1;
}
