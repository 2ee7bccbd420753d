/*
 * pe_pipe.c — the PE pipeline: per-unit FIFOs of tile operations, buffer
 * readiness, the program's scalar clock and its blocking points.
 *
 * Workload: every tl_ tile operation passes through kb__pe_issue once and
 * finishes through op_finish once; both are O(inputs) plus one pump per unit.
 * Timed units (GEMM, MATH) cost one simulator event per op; the program only
 * switches context when it blocks (see pe.h).
 * Invariants: unit.queued counts issued-unfinished ops of the unit, parked
 * those of them that started without a server (pending receives, which do
 * not count against pe.queue_depth); busy <=
 * servers; an op in a FIFO has not started; prog.inflight is the sum over
 * units of the program's queued ops; a unit's FIFO holds the ops of its
 * programs in issue order, so the ops of an older program come first
 * (pe.cpu.pipeline: the next program starts issuing only after the
 * previous one issued its last op).
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pe/internal.h"
#include "pe/pe.h"

static void wake_program(kb__pe_prog *g)
{
    kb__event *ev = g->wake;
    if (ev) {
        g->wake = NULL;
        kb__event_fire(g->sim, ev, 0);
    }
}

void kb__pe_wake_all(kb__pe *pe)
{
    for (kb__pe_prog *g = pe->progs; g; g = g->pe_next)
        wake_program(g);
}

void kb__pe_prog_issued(kb__pe_prog *g)
{
    kb__event *ev = g->issued;
    if (ev) {
        g->issued = NULL;
        kb__event_fire(g->sim, ev, 0);
    }
}

/* ---- buffers --------------------------------------------------------------- */

_Static_assert(sizeof(kb__pe_buf) <= 64, "a buffer's header is one cache line");

/* A buffer's host memory: its header, rounded to a cache line, then the
 * data (at least one byte). */
#define BUF_HEAD ((sizeof(kb__pe_buf) + 63) / 64 * 64)

static size_t buf_host_bytes(uint64_t bytes)
{
    return BUF_HEAD + (bytes ? bytes : 1);
}

/* Returns b's TCM and keeps its host memory in its class's pool for the
 * next tile of its size, or frees it (a buffer made alone). */
static void buf_reclaim(kb__pe_buf *b)
{
    kb__pe_prog *g = b->prog;
    kb__tcm_free(&g->pe->tcm, b->tcm_off, b->bytes);
    g->pe->reclaims++;
    if (b->cls >= 0)
        kb__pool_put(&g->buf_free[b->cls].pool, b);
    else
        free(b);
}

/* Host memory for a buffer of bytes, recycled or new: the header zeroed,
 * the data left as it is (a zeroed buffer is the constant 0 until read:
 * kb__pe_buf_bytes). From the pool of the class of that size, or of a
 * class that has made no block yet (it takes that size); else malloc'd
 * alone. */
static kb__pe_buf *buf_host(kb__pe_prog *g, uint64_t bytes)
{
    int cls = -1, empty = -1;
    for (int i = 0; i < KB__PE_BUF_CLASSES; i++) {
        if (!g->buf_free[i].pool.held) {
            if (empty < 0) empty = i;
        } else if (g->buf_free[i].bytes == bytes) {
            cls = i;
            break;
        }
    }
    if (cls < 0 && empty >= 0) {
        g->buf_free[empty].bytes = bytes;
        kb__pool_init(&g->buf_free[empty].pool, buf_host_bytes(bytes));
        cls = empty;
    }
    kb__pe_buf *b = cls >= 0 ? kb__pool_get(&g->buf_free[cls].pool) : malloc(buf_host_bytes(bytes));
    if (!b) return NULL;
    memset(b, 0, BUF_HEAD);
    b->cls = (int8_t)cls;
    return b;
}

/* Repeats the first `have` bytes of d through its n, by doubling copies. */
static void repeat_prefix(uint8_t *d, size_t have, size_t n)
{
    while (have < n) {
        size_t c = have < n - have ? have : n - have;
        memcpy(d + have, d, c);
        have += c;
    }
}

/* Writes a constant buffer's value into every element of its bytes. */
static void buf_write_const(kb__pe_buf *b)
{
    uint8_t *d = b->data;
    size_t n = (size_t)b->bytes, s = b->csize;
    bool same = true;
    for (size_t i = 1; i < s; i++)
        same = same && b->cval[i] == b->cval[0];
    if (same) {
        memset(d, b->cval[0], n);
    } else { /* one element, then doubling copies */
        size_t have = s < n ? s : n;
        memcpy(d, b->cval, have);
        repeat_prefix(d, have, n);
    }
}

/* Leaves b plain: neither constant, periodic nor an outer sum (whatever
 * `data` holds is then its value). */
static void buf_plain(kb__pe_buf *b)
{
    b->csize = 0;
    b->cwritten = false;
    b->period = 0;
    b->pwritten = false;
    b->osum_rows = b->osum_cols = 0;
}

/* Writes an outer-sum buffer's sums over its a and b (copied first: the
 * sums overwrite them) and leaves it plain. */
static void buf_write_osum(kb__pe_buf *b)
{
    uint32_t n = b->osum_rows, d = b->osum_cols, ab[KB__PE_BUF_OSUM_MAX];
    uint32_t *o = b->data;
    memcpy(ab, o, (size_t)(n + d) * sizeof *ab);
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t c = 0; c < d; c++)
            o[(size_t)r * d + c] = ab[r] + ab[n + c];
    b->osum_rows = b->osum_cols = 0;
}

void kb__pe_buf_outer_sum(kb__pe_buf *b, uint32_t rows, uint32_t cols)
{
    assert(rows >= 1 && cols >= 1 && rows + cols <= KB__PE_BUF_OSUM_MAX &&
           b->bytes == (uint64_t)rows * cols * 4);
    buf_plain(b);
    b->osum_rows = (uint16_t)rows;
    b->osum_cols = (uint16_t)cols;
}

void *kb__pe_buf_bytes(kb__pe_buf *b)
{
    kb__pe_buf_read(b);
    buf_plain(b);
    return b->data;
}

const void *kb__pe_buf_read(kb__pe_buf *b)
{
    if (b->osum_rows) buf_write_osum(b);
    if (b->period && !b->pwritten) {
        repeat_prefix(b->data, b->period, (size_t)b->bytes);
        b->pwritten = true;
    }
    if (b->csize && !b->cwritten) {
        buf_write_const(b);
        b->cwritten = true;
    }
    return b->data;
}

void kb__pe_buf_periodic(kb__pe_buf *b, size_t period)
{
    assert(period >= 1 && period < b->bytes && b->bytes % period == 0 && period <= UINT32_MAX);
    buf_plain(b);
    b->period = (uint32_t)period;
}

bool kb__pe_buf_mark_uniform(kb__pe_buf *b, size_t size)
{
    assert(size >= 1 && size <= KB__PE_BUF_CONST_MAX && b->bytes % size == 0);
    const uint8_t *d = b->data;
    size_t n = (size_t)b->bytes;
    if (n > size && memcmp(d, d + size, n - size)) return false;
    buf_plain(b);
    memcpy(b->cval, d, size);
    b->csize = (uint8_t)size;
    b->cwritten = true;
    return true;
}

void kb__pe_buf_const(kb__pe_buf *b, const void *elem, size_t size)
{
    assert(size >= 1 && size <= KB__PE_BUF_CONST_MAX && b->bytes % size == 0);
    buf_plain(b);
    memcpy(b->cval, elem, size);
    b->csize = (uint8_t)size;
}

bool kb__pe_buf_const_elem(const kb__pe_buf *b, size_t size, void *elem)
{
    if (!b->csize || size > KB__PE_BUF_CONST_MAX || size % b->csize) return false;
    for (size_t i = 0; i < size; i++)
        ((uint8_t *)elem)[i] = b->cval[i % b->csize];
    return true;
}

static void buf_unuse(kb__pe_buf *b)
{
    assert(b->uses > 0);
    if (--b->uses == 0 && b->handles == 0) {
        b->prog->pending_free -= b->bytes;
        buf_reclaim(b);
    }
}

void kb__pe_buf_hold(kb__pe_buf *b)
{
    b->handles++;
}

void kb__pe_buf_drop(kb__pe_buf *b)
{
    assert(b->handles > 0);
    if (--b->handles > 0) return;
    if (b->uses == 0) {
        buf_reclaim(b);
        return;
    }
    b->prog->pending_free += b->bytes;
}

/* ---- units ------------------------------------------------------------------ */

static void op_recycle(kb__pe_prog *g, kb__pe_op *op)
{
    kb__pool_put(&g->ops, op);
}

/* Bookkeeping common to a finished op and a dropped one. */
static void op_retire(kb__pe_op *op)
{
    kb__pe_prog *g = op->prog;
    kb__pe_unit *u = &g->pe->unit[op->unit];
    u->queued--;
    if (op->parked) u->parked--;
    g->inflight--;
    if (op->out) op->out->ready = true;
    for (uint32_t i = 0; i < op->n_in; i++)
        buf_unuse(op->in[i]);
    if (op->out) buf_unuse(op->out);
    if (op->release) op->release(op);
    op_recycle(g, op);
    kb__pe_wake_all(g->pe);
}

static bool inputs_ready(const kb__pe_op *op)
{
    for (uint32_t i = 0; i < op->n_in; i++)
        if (!op->in[i]->ready) return false;
    return true;
}

static void unit_pump(kb__pe *pe, kb__pe_unit_id id);

static void unit_wake_cb(kb__sim *sim, void *arg, uint64_t data)
{
    (void)sim;
    kb__pe *pe = arg;
    pe->unit[data].wake_posted = false;
    unit_pump(pe, (kb__pe_unit_id)data);
}

static void timed_done_cb(kb__sim *sim, void *arg, uint64_t data)
{
    (void)sim;
    (void)data;
    kb__pe_op_done(arg, 0, NULL);
}

/* Takes op (after prev, NULL at the head) out of u's FIFO. */
static void unit_unlink(kb__pe_unit *u, kb__pe_op *prev, kb__pe_op *op)
{
    if (prev)
        prev->next = op->next;
    else
        u->head = op->next;
    if (u->tail == op) u->tail = prev;
    if (op->no_server) u->fifo_no_server--;
}

/* Whether op, with a server free for it, can start now: its inputs ready.
 * A fence waiting for the unit to drain, or an op the scalar side has not
 * issued yet, stops the whole pass (*stop): every later op of the FIFO was
 * issued after it. */
static bool op_can_start(kb__pe *pe, kb__pe_unit_id id, const kb__pe_op *op, kb__time now,
                         bool *stop)
{
    kb__pe_unit *u = &pe->unit[id];
    if (op->fence && u->busy > 0) {
        *stop = true;
        return false;
    }
    if (op->issue_at > now) {
        if (!u->wake_posted) {
            u->wake_posted = true;
            kb__sim_post_at(pe->sim, op->issue_at, unit_wake_cb, pe, id);
        }
        *stop = true;
        return false;
    }
    return inputs_ready(op);
}

static void op_begin(kb__pe *pe, kb__pe_unit *u, kb__pe_op *op, kb__time now)
{
    if (!op->no_server) u->busy++;
    if (op->fence) u->fenced = true;
    op->t_start = now;
    if (op->no_server) { /* leaves the issue queue: room for the next op */
        op->parked = true;
        u->parked++;
        wake_program(op->prog);
    }
    if (op->start)
        op->start(op);
    else
        kb__sim_post(pe->sim, op->service, timed_done_cb, op, 0);
}

/* Starts the FIFO ops that can start now, in order. A program's op that
 * cannot start holds that program's later ops on the unit; without
 * pe.cpu.pipeline the FIFO holds one program, so it holds every later op
 * (in-order units). With it, ops of younger programs behind it may start
 * (each program in its own order, the oldest program first). */
static void unit_pump(kb__pe *pe, kb__pe_unit_id id)
{
    kb__pe_unit *u = &pe->unit[id];
    kb__time now = kb__sim_now(pe->sim);
    uint64_t epoch = ++pe->pump_epoch;
    /* Every server busy: only a no_server op could start (the walk would
     * only mark programs held) */
    if (u->busy >= u->servers && !u->fifo_no_server) return;
    kb__pe_op *prev = NULL, *op = u->head;
    bool held = false; /* this pass held a program (only then is a held_epoch this epoch) */
    while (op && !u->fenced) {
        kb__pe_prog *g = op->prog;
        if (held && g->held_epoch == epoch) {
            prev = op;
            op = op->next;
            continue;
        }
        bool stop = false;
        bool go = (u->busy < u->servers || op->no_server) &&
                  (g->failed || op_can_start(pe, id, op, now, &stop));
        if (!go) {
            if (stop || !pe->p.cpu.pipeline) return;
            g->held_epoch = epoch;
            held = true;
            prev = op;
            op = op->next;
            continue;
        }
        unit_unlink(u, prev, op);
        if (g->failed)
            op_retire(op);
        else
            op_begin(pe, u, op, now);
        /* starting or dropping may have run callbacks that changed the FIFO */
        prev = NULL;
        op = u->head;
    }
}

static void pump_all(kb__pe *pe)
{
    for (int i = 0; i < KB__PE_UNIT_COUNT; i++)
        unit_pump(pe, (kb__pe_unit_id)i);
}

static void record_error(kb__pe_prog *g, int code, const char *msg)
{
    if (g->failed) return;
    g->failed = true;
    g->pe->failed = true;
    kb__err_set(&g->err, code, "kernel %s, program %u on %s: %s", g->kernel, g->index, g->pe->name,
                msg);
}

/* The trace record of a finished op: pid the PE, tid its unit. */
static void trace_op(const kb__pe_op *op)
{
    static const char *const units[KB__PE_UNIT_COUNT] = {"DMA", "GEMM", "MATH"};
    kb__pe *pe = op->prog->pe;
    kb__trace_span(pe->sim, op->t_start, pe->index, units[op->unit], op->name, op->unit,
                   op->prog->index, op->work);
}

void kb__pe_op_done(kb__pe_op *op, int status, const kb__err *err)
{
    kb__pe_prog *g = op->prog;
    kb__pe *pe = g->pe;
    kb__pe_unit *u = &pe->unit[op->unit];
    if (status < 0) {
        record_error(g, status, err ? err->msg : kb_strerror(status));
    } else if (!g->failed && op->compute) {
        kb__err e;
        kb__err_clear(&e);
        int rc = op->compute(op, &e);
        if (rc < 0) record_error(g, rc, e.msg);
    }
    if (!op->no_server) {
        u->busy--;
        u->busy_ps += kb__sim_now(pe->sim) - op->t_start;
    }
    if (op->fence) u->fenced = false;
    if (kb__trace_on(pe->sim)) trace_op(op);
    u->ops++;
    u->work += op->work;
    /* The units where an op may start now: op's own (a server, a fence
     * freed) and those whose FIFO may hold a reader of op's result (now
     * ready). A unit's pass depends on nothing else that changed here, so
     * skipping the others skips passes that start nothing, with one
     * exception kept: a unit awaiting its wake-up (an op issued for a
     * later time of the scalar clock, maybe now) is pumped as before. After
     * a program failed, every unit is (its ops are dropped). */
    unsigned pump = 1u << op->unit;
    if (op->out) pump |= op->out->reader_units;
    op_retire(op);
    if (pe->failed) pump = ~0u;
    for (int i = 0; i < KB__PE_UNIT_COUNT; i++)
        if (pump & (1u << i) || pe->unit[i].wake_posted) unit_pump(pe, (kb__pe_unit_id)i);
}

/* ---- program side -------------------------------------------------------------- */

_Noreturn void kb__pe_raise(kb__pe_prog *g, int code, const char *fmt, ...)
{
    char msg[KB__ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kb__proc_raise(g->sim, code, "kernel %s, program %u on %s: %s", g->kernel, g->index,
                   g->pe->name, msg);
}

void kb__pe_check(kb__pe_prog *g)
{
    if (g->failed) kb__proc_raise(g->sim, g->err.code, "%s", g->err.msg);
}

static void sync_scalar(kb__pe_prog *g)
{
    kb__time now = kb__sim_now(g->sim);
    if (g->t_scalar > now) kb__sleep(g->sim, g->t_scalar - now);
}

typedef bool (*cond_fn)(const kb__pe_prog *g, const void *arg);

/* Blocks the program until cond holds or the program failed. */
static void block_until(kb__pe_prog *g, cond_fn cond, const void *arg)
{
    sync_scalar(g);
    while (!g->failed && !cond(g, arg)) {
        kb__event ev;
        kb__event_init(&ev, "pe pipeline");
        g->wake = &ev;
        kb__event_wait(g->sim, &ev);
        g->wake = NULL;
    }
    kb__time now = kb__sim_now(g->sim);
    if (g->t_scalar < now) g->t_scalar = now;
}

static bool cond_room(const kb__pe_prog *g, const void *arg)
{
    const kb__pe_unit *u = arg;
    return u->queued - u->parked < g->pe->p.queue_depth;
}

static bool cond_ready(const kb__pe_prog *g, const void *arg)
{
    (void)g;
    return ((const kb__pe_buf *)arg)->ready;
}

static bool cond_idle(const kb__pe_prog *g, const void *arg)
{
    (void)arg;
    return g->inflight == 0;
}

static bool cond_reclaimed(const kb__pe_prog *g, const void *arg)
{
    return g->pe->reclaims != *(const uint64_t *)arg;
}

kb__pe_buf *kb__pe_buf_new(kb__pe_prog *g, uint64_t bytes, bool zero)
{
    kb__tcm *t = &g->pe->tcm;
    uint64_t off;
    for (;;) {
        kb__pe_check(g);
        int rc = kb__tcm_alloc(t, bytes, &off);
        if (rc == 0) break;
        if (rc == KB_ENOMEM) kb__pe_raise(g, KB_ENOMEM, "out of host memory for the TCM allocator");
        /* What can still come back: this program's released tiles once their
         * readers finish, and (pe.cpu.pipeline) older programs' tiles when
         * they end; they never wait for this one. */
        if (g->pending_free == 0 && g->pe->progs == g)
            kb__pe_raise(g, KB_ENOSPC,
                         "TCM exhausted: asked %llu B, %llu B free (largest block %llu B)",
                         (unsigned long long)bytes, (unsigned long long)t->free_bytes,
                         (unsigned long long)kb__tcm_largest(t));
        uint64_t before = g->pe->reclaims;
        block_until(g, cond_reclaimed, &before);
    }
    kb__pe_buf *b = buf_host(g, bytes);
    if (!b) {
        kb__tcm_free(t, off, bytes);
        kb__pe_raise(g, KB_ENOMEM, "out of host memory for a %llu B tile",
                     (unsigned long long)bytes);
    }
    b->prog = g;
    b->tcm_off = off;
    b->bytes = bytes;
    b->data = (char *)b + BUF_HEAD;
    b->handles = 1;
    b->ready = true;
    if (zero) b->csize = 1; /* the constant 0: cval is zeroed with the header */
    return b;
}

kb__pe_op *kb__pe_op_new(kb__pe_prog *g, kb__pe_unit_id unit, const char *name)
{
    kb__pe_op *op = kb__pool_get(&g->ops);
    if (!op) kb__pe_raise(g, KB_ENOMEM, "out of host memory for an operation");
    memset(op, 0, g->op_size);
    op->prog = g;
    op->unit = unit;
    op->name = name;
    g->op_new = op;
    return op;
}

void kb__pe_issue(kb__pe_prog *g, kb__pe_op *op)
{
    kb__pe *pe = g->pe;
    kb__pe_unit *u = &pe->unit[op->unit];
    g->op_new = NULL;
    if (!g->failed && !cond_room(g, u)) block_until(g, cond_room, u);
    if (g->failed) { /* never issued: what the op owns goes now */
        if (op->release) op->release(op);
        op_recycle(g, op);
        kb__pe_check(g);
    }
    kb__time now = kb__sim_now(g->sim);
    if (g->t_scalar < now) g->t_scalar = now;
    g->t_scalar = kb__time_add(g->t_scalar, kb__ps_from_ns(pe->p.cpu.scalar_op_ns));
    op->issue_at = g->t_scalar;
    for (uint32_t i = 0; i < op->n_in; i++) {
        op->in[i]->uses++;
        op->in[i]->reader_units |= (uint8_t)(1u << op->unit);
    }
    if (op->out) {
        op->out->uses++;
        op->out->ready = false;
    }
    op->next = NULL;
    if (u->tail)
        u->tail->next = op;
    else
        u->head = op;
    u->tail = op;
    if (op->no_server) u->fifo_no_server++;
    u->queued++;
    g->inflight++;
    unit_pump(pe, op->unit);
}

void kb__pe_wait_buf(kb__pe_prog *g, kb__pe_buf *b)
{
    kb__pe_check(g);
    if (!b->ready) block_until(g, cond_ready, b);
    kb__pe_check(g);
}

void kb__pe_wait_all(kb__pe_prog *g)
{
    block_until(g, cond_idle, NULL);
    kb__pe_check(g);
}

void kb__pe_scalar_time(kb__pe_prog *g, kb__time ps)
{
    kb__time now = kb__sim_now(g->sim);
    if (g->t_scalar < now) g->t_scalar = now;
    g->t_scalar = kb__time_add(g->t_scalar, ps);
}

void kb__pe_sync(kb__pe_prog *g)
{
    sync_scalar(g);
}

void kb__pe_prog_fail(kb__pe_prog *g, const kb__err *err)
{
    if (g->failed) return;
    g->failed = true;
    g->pe->failed = true;
    kb__err_copy(&g->err, err);
}

void kb__pe_prog_drain(kb__pe_prog *g)
{
    if (g->failed) pump_all(g->pe);
    while (g->inflight) {
        kb__event ev;
        kb__event_init(&ev, "pe drain");
        g->wake = &ev;
        kb__event_wait(g->sim, &ev);
        g->wake = NULL;
    }
}

void kb__pe_prog_release(kb__pe_prog *g)
{
    g->op_new = NULL; /* built, never issued: it owns nothing yet; freed with the pool */
    kb__pool_fini(&g->ops);
    for (int i = 0; i < KB__PE_BUF_CLASSES; i++)
        kb__pool_fini(&g->buf_free[i].pool);
}

/* kb__pe_prog_abandon: op, issued and not retired, is dropped where it is
 * (its unit's FIFO or in service), without the events it waits for. */
static void op_abandon(void *block, void *arg)
{
    kb__pe_op *op = block;
    if (op == arg) return; /* g->op_new: never issued, it holds no buffer */
    for (uint32_t i = 0; i < op->n_in; i++)
        buf_unuse(op->in[i]);
    if (op->out) buf_unuse(op->out);
    if (op->release) op->release(op);
    op->release = NULL;
}

void kb__pe_prog_abandon(kb__pe_prog *g)
{
    kb__pe *pe = g->pe;
    for (int i = 0; i < KB__PE_UNIT_COUNT; i++) { /* its ops leave the units' FIFOs */
        kb__pe_unit *u = &pe->unit[i];
        kb__pe_op *prev = NULL, *op = u->head;
        while (op) {
            kb__pe_op *next = op->next;
            if (op->prog == g)
                unit_unlink(u, prev, op);
            else
                prev = op;
            op = next;
        }
    }
    kb__pool_each_out(&g->ops, op_abandon, g->op_new);
    g->inflight = 0;
    if (g->held) kb__pe_buf_drop(g->held);
    g->held = NULL;
}
