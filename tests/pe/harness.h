/*
 * tests/pe/harness.h — a simulator with a few PEs, running kernels through
 * the internal launch, for the PE and tl_ tests. Header-only (static
 * functions) so each test executable takes what it uses.
 */
#ifndef KB_TESTS_PE_HARNESS_H
#define KB_TESTS_PE_HARNESS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "pe/pe.h"

#define TM_MAX_PES 8

typedef struct tm_machine {
    kb__sim *sim;
    kb__pe *pe[TM_MAX_PES];
    uint32_t n;
    kb__pe_params p;
} tm_machine;

static inline void tm_params_simple(kb__pe_params *p)
{
    kb__pe_params_default(p);
    p->cpu.dispatch_ns = 0;
    p->cpu.scalar_op_ns = 0;
    p->tcm.latency_ns = 0;
}

static inline void tm_init(tm_machine *m, uint32_t n, const kb__pe_params *p)
{
    kb__err e;
    memset(m, 0, sizeof *m);
    m->p = *p;
    m->n = n;
    m->sim = kb__sim_create(1, &e);
    cr_assert_not_null(m->sim, "%s", e.msg);
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "sip0/cube1/pe%u", i);
        cr_assert_eq(kb__pe_create(m->sim, name, p, &m->pe[i], &e), 0, "%s", e.msg);
    }
}

static inline void tm_fini(tm_machine *m)
{
    kb__sim_destroy(m->sim);
    for (uint32_t i = 0; i < m->n; i++)
        kb__pe_destroy(m->pe[i]);
}

/* A launch description of `fn` over grid (g0, 1, 1) with one i64 argument
 * (usually a pointer to the test's result record). */
static inline kb__tl_launch_desc tm_desc(const char *name, tl_kernel_fn fn, uint32_t g0, void *arg)
{
    kb__tl_launch_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.fn = fn;
    d.grid[0] = g0;
    d.grid[1] = d.grid[2] = 1;
    d.n_args = 1;
    d.args[0].kind = KB__TL_ARG_I64;
    d.args[0].i = (int64_t)(intptr_t)arg;
    return d;
}

/* Runs d on the first n_pes PEs to completion; returns the launch status,
 * with the message in err and the end time in *t_end. */
static inline int tm_run(tm_machine *m, const kb__tl_launch_desc *d, uint32_t n_pes, kb__err *err,
                         kb__time *t_end)
{
    kb__pe_launch *l;
    kb__err_clear(err);
    cr_assert_eq(kb__tl_launch_start(m->sim, m->pe, n_pes, d, &l, err), 0, "%s", err->msg);
    int rc = kb__sim_run(m->sim);
    cr_assert_eq(rc, 0, "sim: %s", kb__sim_error(m->sim)->msg);
    cr_assert(kb__event_is_fired(kb__pe_launch_done(l)));
    rc = kb__pe_launch_status(l, err);
    if (t_end) *t_end = kb__pe_launch_end(l);
    kb__pe_launch_destroy(l);
    return rc;
}

/* A flat device memory for DMA tests before the fabric: host bytes at VA
 * [va, va + bytes). A transfer takes kb__pe_dma_ps(total bytes) on its DMA
 * channel; reads sample memory at the start, writes land at the end; a span
 * outside the window faults. */
typedef struct tm_flat {
    uint64_t va;
    uint64_t bytes;
    uint8_t *mem;
} tm_flat;

typedef struct tm_xfer {
    tm_flat *f;
    kb__pe_op *op;
    bool write;
    const kb__tl_span *spans;
    uint32_t n;
    const uint8_t *src;
} tm_xfer;

static inline void tm_flat_done(kb__sim *sim, void *arg, uint64_t data)
{
    (void)sim;
    (void)data;
    tm_xfer *x = arg;
    if (x->write)
        for (uint32_t i = 0; i < x->n; i++)
            memcpy(x->f->mem + (x->spans[i].va - x->f->va), x->src + x->spans[i].tile_off,
                   x->spans[i].bytes);
    kb__pe_op *op = x->op;
    free(x);
    kb__pe_op_done(op, 0, NULL);
}

static inline void tm_flat_transfer(void *self, kb__pe *pe, kb__pe_op *op, bool write,
                                    const kb__tl_span *spans, uint32_t n, void *bytes)
{
    tm_flat *f = self;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (spans[i].va < f->va || spans[i].va + spans[i].bytes > f->va + f->bytes) {
            kb__err e;
            kb__err_set(&e, KB_EFAULT, "VA 0x%llx is not mapped", (unsigned long long)spans[i].va);
            kb__pe_op_done(op, KB_EFAULT, &e);
            return;
        }
        total += spans[i].bytes;
        if (!write)
            memcpy((uint8_t *)bytes + spans[i].tile_off, f->mem + (spans[i].va - f->va),
                   spans[i].bytes);
    }
    tm_xfer *x = malloc(sizeof *x);
    cr_assert_not_null(x);
    *x = (tm_xfer){f, op, write, spans, n, bytes};
    kb__sim_post(pe->sim, kb__pe_dma_ps(&pe->p, total), tm_flat_done, x, 0);
}

/* Atomics on the flat memory: each span's read-modify-write happens at
 * the start (when reads sample), in span order; then a load's time. */
static inline void
tm_flat_atomic(void *self, kb__pe *pe, kb__pe_op *op, const kb__tl_span *spans, uint32_t n,
               void *bytes, void (*rmw)(void *ctx, const uint8_t *host, uint8_t *out, uint64_t n),
               void *ctx)
{
    tm_flat *f = self;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (spans[i].va < f->va || spans[i].va + spans[i].bytes > f->va + f->bytes) {
            kb__err e;
            kb__err_set(&e, KB_EFAULT, "VA 0x%llx is not mapped", (unsigned long long)spans[i].va);
            kb__pe_op_done(op, KB_EFAULT, &e);
            return;
        }
        uint8_t *mem = f->mem + (spans[i].va - f->va), *host = (uint8_t *)bytes + spans[i].tile_off;
        memcpy(host, mem, spans[i].bytes);
        rmw(ctx, host, mem, spans[i].bytes);
        total += spans[i].bytes;
    }
    tm_xfer *x = malloc(sizeof *x);
    cr_assert_not_null(x);
    *x = (tm_xfer){f, op, false, spans, 0, bytes};
    kb__sim_post(pe->sim, kb__pe_dma_ps(&pe->p, total), tm_flat_done, x, 0);
}

/* Adds a tensor argument over f: dims/strides in elements. */
static inline void tm_add_tensor(kb__tl_launch_desc *d, tm_flat *f, const char *name, tl_dtype dt,
                                 int ndim, const int64_t *shape, const int64_t *strides,
                                 uint64_t va, uint64_t bytes)
{
    kb__tl_arg *a = &d->args[d->n_args++];
    a->kind = KB__TL_ARG_TENSOR;
    a->t.name = name;
    a->t.dtype = dt;
    a->t.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        a->t.shape[i] = shape[i];
        a->t.strides[i] = strides[i];
    }
    a->t.va = va;
    a->t.shard_bytes = bytes;
    a->t.bytes = bytes;
    d->mem.transfer = tm_flat_transfer;
    d->mem.atomic = tm_flat_atomic;
    d->mem.moves_bytes = true;
    d->mem.self = f;
}

/* Runs kernel `name` (fn) as one program on one PE of tm_params_simple
 * with one argument, tensor x: 100 f32 at va over a flat memory of 256
 * f32, and checks it fails with KB_ERANGE naming lane `lane` (at element
 * offset 100, the first one past the tensor) as outside x's reach. */
static inline void tm_assert_load_outside_x(const char *name, tl_kernel_fn fn, int lane,
                                            uint64_t va)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    float mem[256] = {0};
    tm_flat f = {va, sizeof mem, (uint8_t *)mem};
    kb__tl_launch_desc d = tm_desc(name, fn, 1, NULL);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){100}, (int64_t[]){1}, va, 400);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_ERANGE);
    char want[320];
    snprintf(want, sizeof want,
             "kernel %s, program 0 on sip0/cube1/pe0: load of tensor x: lane %d (element "
             "offset 100) at VA 0x%llx is outside the reach [0x%llx, 0x%llx) (from the local "
             "shard [0x%llx, 0x%llx) to the end of the tensor)",
             name, lane, (unsigned long long)(va + 400), (unsigned long long)va,
             (unsigned long long)(va + 400), (unsigned long long)va,
             (unsigned long long)(va + 400));
    cr_assert_str_eq(e.msg, want);
    tm_fini(&m);
}

/* The result record of a test kernel (arg 0). */
#define TM_ARG(k, type) ((type *)(intptr_t)tl_arg_i64((k), 0))

#endif
