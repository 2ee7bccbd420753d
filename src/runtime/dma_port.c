/*
 * dma_port.c — the memory system a PE's DMA unit reaches during a launch
 * (kb__tl_mem_port.transfer): tl_load / tl_store spans are translated
 * through the PE's MMU and moved by the device as one PeXfer
 * (host/device.h) between the PE's TCM and the memory they map to.
 *
 * Translation: each span is walked segment by segment (kb__mmu_translate);
 * its cost, kb__mmu_translate_cost (pages touched × pe.mmu.translate_ns),
 * is added to the DMA set-up. A miss finishes the op with a kernel error
 * naming the access, the tensor, the VA and what the VA belongs to.
 * Coalescing: pieces contiguous both in PA and in the tile merge into one
 * run; the device then groups runs per memory, one gather/scatter message
 * per memory (host/pe_xfer.c), so a strided tile costs one message per
 * memory it touches, not one per row.
 * Atomics (tl_atomic_*) are reads whose memory side writes the
 * read-modify-write result back at the instant it samples the bytes
 * (kb__device_pe_atomic): a load's time, the update indivisible.
 * --no-data: the same runs and events, no bytes (a loaded tile reads 0).
 * Cost: O(spans × log(mappings)) host work per op.
 */
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "host/device.h"
#include "runtime/launch.h"
#include "runtime/machine.h"

/* Runs of one transfer: in place up to RUN_INLINE (nearly every tile), on
 * the heap beyond. */
#define RUN_INLINE 16
typedef struct run_buf {
    kb__seg *v;
    uint32_t n, cap;
    kb__seg inl[RUN_INLINE];
} run_buf;

static void run_init(run_buf *r)
{
    r->v = r->inl;
    r->n = 0;
    r->cap = RUN_INLINE;
}

static void run_fini(run_buf *r)
{
    if (r->v != r->inl) free(r->v);
}

static int run_add(run_buf *r, uint64_t pa, uint64_t bytes, uint8_t *host)
{
    if (r->n) {
        kb__seg *l = &r->v[r->n - 1];
        if (l->pa + l->bytes == pa && (uint8_t *)l->host + l->bytes == host) {
            l->bytes += bytes;
            return 0;
        }
    }
    if (r->n == r->cap) {
        uint32_t cap = r->cap * 2;
        kb__seg *v = r->v == r->inl ? malloc(cap * sizeof *v) : realloc(r->v, cap * sizeof *v);
        if (!v) return KB_ENOMEM;
        if (r->v == r->inl) memcpy(v, r->inl, sizeof r->inl);
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (kb__seg){pa, bytes, host};
    return 0;
}

/* Message of a translation miss without the PE prefix the kernel error
 * already carries. */
static void fault(kb__pe *pe, kb__pe_op *op, bool write, const kb__err *me)
{
    const kb__tl_op *t = (const kb__tl_op *)op;
    const char *msg = me->msg;
    size_t n = strlen(pe->name);
    if (!strncmp(msg, pe->name, n) && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
    kb__err e;
    kb__err_set(&e, me->code ? me->code : KB_EFAULT, "%s of tensor %s: %s",
                write ? "store" : "load", t->t && t->t->name ? t->t->name : "?", msg);
    kb__pe_op_done(op, e.code, &e);
}

static void xfer_finished(kb__sim *sim, kb__xfer *x)
{
    (void)sim;
    kb__pe_op *op = kb__xfer_user(x);
    kb__err e;
    kb__err_clear(&e);
    int rc = kb__xfer_status(x, &e);
    kb__xfer_free(x);
    kb__pe_op_done(op, rc, rc ? &e : NULL);
}

/* Translates every span into runs; returns 0 or the failing status (fault
 * already reported). */
static int translate(kb_machine *m, kb__pe *pe, kb__pe_op *op, bool write, const kb__tl_span *spans,
                     uint32_t n, uint8_t *bytes, run_buf *r, kb__time *cost)
{
    /* The mapping segment the last translation landed in, from seg_va on:
     * [seg_va, seg_va + seg_len) maps linearly to seg_pa. A tile's next row
     * is usually further inside it, and kb__mmu_translate would find the
     * same segment: the same PA and contiguity, without the two searches. */
    uint64_t seg_va = 0, seg_pa = 0, seg_len = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t va = spans[i].va, left = spans[i].bytes;
        uint8_t *host = bytes + spans[i].tile_off;
        *cost += kb__mmu_translate_cost(&m->mmu, va, left);
        while (left) {
            uint64_t pa, contig;
            if (va >= seg_va && va - seg_va < seg_len) {
                pa = seg_pa + (va - seg_va);
                contig = seg_len - (va - seg_va);
            } else {
                kb__err me;
                int rc = kb__mmu_translate(&m->mmu, pe->index, va, &pa, &contig, &me);
                if (rc) {
                    fault(pe, op, write, &me);
                    return rc;
                }
                seg_va = va, seg_pa = pa, seg_len = contig;
            }
            uint64_t take = contig < left ? contig : left;
            if (run_add(r, pa, take, host)) {
                kb__err e;
                kb__pe_op_done(op, kb__err_set(&e, KB_ENOMEM, "out of host memory for a DMA"), &e);
                return KB_ENOMEM;
            }
            va += take;
            host += take;
            left -= take;
        }
    }
    return 0;
}

/* Starts the transfer of spans (an atomic when rmw is not NULL). */
static void dma_start(kb_machine *m, kb__pe *pe, kb__pe_op *op, bool write,
                      const kb__tl_span *spans, uint32_t n, void *bytes, kb__mem_rmw_fn rmw,
                      void *ctx)
{
    if (n == 0) { /* every lane masked: nothing moves, the op ends now */
        kb__pe_op_done(op, 0, NULL);
        return;
    }
    run_buf r;
    run_init(&r);
    kb__time cost = 0;
    if (translate(m, pe, op, write, spans, n, bytes, &r, &cost)) {
        run_fini(&r);
        return;
    }
    uint32_t gi = pe->index, sip = gi / (m->cubes * m->pes), cube = gi / m->pes % m->cubes,
             unit = gi % m->pes;
    uint64_t total = 0;
    for (uint32_t i = 0; i < r.n; i++)
        total += r.v[i].bytes;
    kb__xfer *x;
    kb__err e;
    kb__err_clear(&e);
    int rc = rmw ? kb__device_pe_atomic(m->dev, sip, cube, unit, r.v, r.n, cost, xfer_finished, op,
                                        rmw, ctx, &x, &e)
                 : kb__device_pe_xfer(m->dev, sip, cube, unit, write, r.v, r.n, cost, xfer_finished,
                                      op, &x, &e);
    run_fini(&r);
    if (rc) {
        kb__pe_op_done(op, rc, &e);
        return;
    }
    m->stats.messages[KB_MSG_DMA]++;
    m->stats.bytes[KB_MSG_DMA] += total;
}

void kb__rt_dma_transfer(void *self, kb__pe *pe, kb__pe_op *op, bool write,
                         const kb__tl_span *spans, uint32_t n, void *bytes)
{
    dma_start(self, pe, op, write, spans, n, bytes, NULL, NULL);
}

void kb__rt_dma_atomic(void *self, kb__pe *pe, kb__pe_op *op, const kb__tl_span *spans, uint32_t n,
                       void *bytes, kb__mem_rmw_fn rmw, void *ctx)
{
    dma_start(self, pe, op, false, spans, n, bytes, rmw, ctx);
}

int kb__rt_dma_resolve(void *self, kb__pe *pe, uint64_t va, uint64_t bytes, uint64_t *pa,
                       kb__err *err)
{
    kb_machine *m = self;
    uint64_t contig = 0;
    int rc = kb__mmu_translate(&m->mmu, pe->index, va, pa, &contig, err);
    if (rc) return rc;
    if (contig < bytes)
        return kb__err_set(err, KB_EFAULT,
                           "VA 0x%llx + %llu B is not one physical run (the mapping at VA 0x%llx "
                           "is contiguous for %llu B)",
                           (unsigned long long)va, (unsigned long long)bytes,
                           (unsigned long long)va, (unsigned long long)contig);
    return 0;
}

int kb__rt_va_copy(kb_machine *m, uint32_t pe, uint64_t va, void *host, uint64_t n, bool write,
                   kb__err *err)
{
    uint8_t *h = host;
    while (n) {
        uint64_t pa, contig;
        int rc = kb__mmu_translate(&m->mmu, pe, va, &pa, &contig, err);
        if (rc) return rc;
        uint64_t take = contig < n ? contig : n;
        rc = write ? kb__store_write(&m->dev->store, pa, h, take, err)
                   : kb__store_read(&m->dev->store, pa, h, take, err);
        if (rc) return rc;
        va += take, h += take, n -= take;
    }
    return 0;
}
