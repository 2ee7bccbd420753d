/*
 * tl_mem.c — loads and stores: Triton-style (offset tiles, mask, other) and
 * block pointers (boundary check, padding), issued to the PE's DMA unit.
 *
 * The addresses of a Triton-style access depend on data (the offset and
 * mask tiles), so they are computed when the DMA op starts, when those tiles
 * are ready, not at issue. Lanes are turned into contiguous spans (adjacent
 * lanes at adjacent addresses merge; found run by run, one range check per
 * run, the lane-by-lane walk kept for what that does not cover and for
 * naming a lane out of range) and handed to the launch's memory port
 * (kb__tl_mem_port), which moves them and finishes the op. Masked lanes and
 * lanes outside a checked boundary are never touched; a load fills them with
 * `other` or the padding when the op finishes. An unmasked lane outside the
 * reach (from the local shard's start to the tensor's end: tl_tensor in
 * tl_internal.h) or in the padding between two of the tensor's regions
 * finishes the op with a kernel error naming the VA and the range checked;
 * the memory port translates the rest (another region: the MMU decides).
 * A block pointer whose last dimension has unit stride is walked row by row
 * (one span per row, the same spans the lane walk builds).
 * Atomics (tl_atomic_*) build their spans as a load does and go to the
 * port's atomic: the memory applies the read-modify-write of each span at
 * the instant it samples it, lanes at one address in lane order; the op is
 * a fence on the DMA unit (acq_rel), docs/kernels.md "Atomics".
 * Cost: per op at start, a scan of the offsets (and mask) tiles plus
 * O(runs) checks and spans on the Triton-style path (a conversion per lane
 * for offsets narrower than i32 or broadcast, and a staged value per lane
 * for a store that moves bytes); O(rows) plus a memset and, for a store, one
 * conversion per row on the block path; the simulated time is the port's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"

/* Whether the launch's memory port moves bytes (not --no-data): a store's
 * values are staged, a load's tile is written, only then. */
static bool moves_bytes(const kb__tl_op *op)
{
    return ((const kb__tl_mem_port *)op->base.prog->pe->dma_port)->moves_bytes;
}

/* Index in `in` of output lane `lane` under broadcasting (right-aligned). */
static int64_t bidx(const kb__tile_desc *in, const kb__tile_desc *out, int64_t lane)
{
    int64_t idx = 0, stride = 1;
    for (int d = out->ndim - 1, e = in->ndim - 1; d >= 0 && e >= 0; d--, e--) {
        int64_t pos = lane % out->shape[d];
        lane /= out->shape[d];
        if (in->shape[e] != 1) idx += pos * stride;
        stride *= in->shape[e];
    }
    return idx;
}

static int64_t elem_i64(const kb__pe_buf *b, const kb__tile_desc *d, int64_t idx)
{
    int64_t v;
    kb__dtype_load_i64(d->dtype, (const char *)b->data + idx * (int64_t)kb__dtype_size(d->dtype),
                       &v, 1);
    return v;
}

/* A memory op's lane buffer: its active flags (one byte a lane), then a
 * store's or an atomic's staged bytes. Finished ops give theirs back to
 * the program (tl_ctx.lane_free), so a program's thousands of tile loads
 * and stores allocate a few between them instead of one or two each. The
 * list holds at most as many as the program had ops in flight at once. */
typedef struct lane_buf {
    struct lane_buf *next;
    size_t cap; /* bytes after the header (which keeps them 16-byte aligned) */
} lane_buf;

_Static_assert(sizeof(lane_buf) % 16 == 0, "the lanes after the header stay aligned");

/* A buffer of at least `bytes` (contents undefined), or NULL. */
static uint8_t *lanes_get(tl_ctx *k, size_t bytes)
{
    lane_buf *b = k->lane_free;
    if (b) {
        k->lane_free = b->next;
        if (b->cap >= bytes) return (uint8_t *)(b + 1);
        free(b); /* too small for this op: replaced by one that fits */
    }
    b = malloc(sizeof *b + bytes);
    if (!b) return NULL;
    b->cap = bytes;
    return (uint8_t *)(b + 1);
}

static void lanes_put(tl_ctx *k, uint8_t *lanes)
{
    lane_buf *b = (lane_buf *)lanes - 1;
    b->next = k->lane_free;
    k->lane_free = b;
}

void kb__tl_mem_fini(tl_ctx *k)
{
    free(k->elem_buf);
    k->elem_buf = NULL;
    k->elem_cap = 0;
    while (k->lane_free) {
        lane_buf *b = k->lane_free;
        k->lane_free = b->next;
        free(b);
    }
}

static void mem_release(kb__pe_op *base)
{
    kb__tl_op *op = (kb__tl_op *)base;
    if (op->active) lanes_put((tl_ctx *)base->prog, op->active);
    op->spans = NULL;
    op->active = NULL;
    op->staging = NULL;
}

/* Where lane `lane` goes: *active 0 when masked or outside a checked
 * boundary; otherwise *elem is the element offset from the shard base. */
static void lane_target(const kb__tl_op *op, int64_t lane, int *active, int64_t *elem)
{
    const kb__pe_op *b = &op->base;
    if (op->bp.t) {
        int64_t pos[3] = {0, 0, 0}, rest = lane;
        for (int d = op->bp.ndim - 1; d >= 0; d--) {
            pos[d] = rest % op->bp.block[d];
            rest /= op->bp.block[d];
        }
        *active = 1;
        *elem = 0;
        bool wrapped = false; /* an address past int64: outside any shard */
        for (int d = 0; d < op->bp.ndim; d++) {
            int64_t c, step;
            if (__builtin_add_overflow(op->bp.offsets[d], pos[d], &c)) {
                c = INT64_MAX;
                wrapped = true;
            }
            if ((op->check & TL_CHECK(d)) && (c < 0 || c >= op->bp.shape[d])) *active = 0;
            if (__builtin_mul_overflow(c, op->bp.strides[d], &step) ||
                __builtin_add_overflow(*elem, step, elem))
                wrapped = true;
        }
        if (wrapped) *elem = INT64_MAX;
        return;
    }
    const kb__tile_desc *od = &op->out_d;
    *active = 1;
    if (op->mask_in >= 0)
        *active = elem_i64(b->in[op->mask_in], &op->in_d[1], bidx(&op->in_d[1], od, lane)) != 0;
    *elem = elem_i64(b->in[op->off_in], &op->in_d[0], bidx(&op->in_d[0], od, lane));
}

/* Size of the region holding byte pos from t's shard base. */
static uint64_t region_size(const tl_tensor *t, uint64_t pos)
{
    if (!t->region_bytes || !t->region_stride) return t->shard_bytes;
    return t->region_bytes[pos / t->region_stride];
}

/* Whether the bytes [pos, pos + len) from t's shard base, inside the reach,
 * touch the padding between two regions (no element of the tensor). */
static bool in_padding(const tl_tensor *t, uint64_t pos, uint64_t len)
{
    if (pos + len <= t->shard_bytes || !t->region_stride) return false;
    uint64_t size = region_size(t, pos);
    if (t->region_stride <= size) return false;
    return pos % t->region_stride + len > size;
}

/* Finishes op with the kernel error of lane `lane` (element offset elem, at
 * va): outside the reach, or (padding) between two regions. */
static void fail_range(kb__tl_op *op, int64_t lane, int64_t elem, uint64_t va, bool padding)
{
    const tl_tensor *t = op->t;
    char where[192];
    if (padding) {
        uint64_t r0 = t->va + (va - t->va) / t->region_stride * t->region_stride;
        snprintf(where, sizeof where,
                 "is in the padding after the region [0x%llx, 0x%llx), not in the tensor (its "
                 "regions are %llu B long, one every %llu B)",
                 (unsigned long long)r0, (unsigned long long)(r0 + region_size(t, r0 - t->va)),
                 (unsigned long long)region_size(t, r0 - t->va),
                 (unsigned long long)t->region_stride);
    } else {
        snprintf(where, sizeof where,
                 "is outside the reach [0x%llx, 0x%llx) (from the local shard [0x%llx, 0x%llx) "
                 "to the end of the tensor)",
                 (unsigned long long)t->va, (unsigned long long)(t->va + t->bytes),
                 (unsigned long long)t->va, (unsigned long long)(t->va + t->shard_bytes));
    }
    kb__err e;
    kb__err_set(&e, KB_ERANGE, "%s of tensor %s: lane %lld (element offset %lld) at VA 0x%llx %s",
                op->atomic  ? op->base.name
                : op->write ? "store"
                            : "load",
                t->name ? t->name : "?", (long long)lane, (long long)elem, (unsigned long long)va,
                where);
    kb__pe_op_done(&op->base, KB_ERANGE, &e);
}

/* Stages lane `lane` of operand `in` (descriptor vd) in the tensor's dtype
 * (the operand broadcast to the lanes). */
static void stage_operand(kb__tl_op *op, int in, const kb__tile_desc *vd, int64_t lane, void *dst)
{
    const kb__pe_buf *vb = op->base.in[in];
    size_t vs = kb__dtype_size(vd->dtype);
    const char *src = (const char *)vb->data + bidx(vd, &op->out_d, lane) * (int64_t)vs;
    kb__dtype_convert((kb__dtype)op->t->dtype, dst, vd->dtype, src, 1);
}

/* Stages a store's values in the tensor's dtype (value broadcast to lanes). */
static void stage_value(kb__tl_op *op, int64_t lane, void *dst)
{
    stage_operand(op, op->other_in, &op->in_d[2], lane, dst);
}

/* Appends a span, merging it into the previous one when it continues it
 * both in VA and in the tile. */
static void span_add(kb__tl_op *op, uint32_t *ns, uint64_t va, uint64_t off, uint64_t bytes)
{
    kb__tl_span *last = *ns ? &op->spans[*ns - 1] : NULL;
    if (last && last->va + last->bytes == va && last->tile_off + last->bytes == off)
        last->bytes += bytes;
    else
        op->spans[(*ns)++] = (kb__tl_span){va, off, bytes};
}

/* The element offsets of a Triton-style access's lanes, and their active
 * flags (NULL when every lane is active): the values lane_target gives,
 * read in bulk when the offsets (and the mask) have the lanes' own shape,
 * through the broadcast index otherwise. *elems points into the program's
 * scratch or, for i32 offsets of the lanes' shape, at the tile itself
 * (*e32 then, *elems NULL). False when out of host memory. */
static bool lane_elems(kb__tl_op *op, int64_t n, const int32_t **e32, const int64_t **elems,
                       const uint8_t **act)
{
    tl_ctx *k = (tl_ctx *)op->base.prog;
    const kb__tile_desc *od = &op->out_d;
    *e32 = NULL;
    *elems = NULL;
    *act = NULL;
    if (op->mask_in >= 0) {
        kb__tile_desc md = op->in_d[1];
        md.dtype = od->dtype;
        if (!kb__tile_desc_eq(&md, od)) return true; /* a broadcast mask: the lane walk */
        *act = (const uint8_t *)op->base.in[op->mask_in]->data; /* bool: one byte, 0 or 1 */
    }
    kb__tile_desc d = op->in_d[0];
    kb__dtype dt = d.dtype;
    d.dtype = od->dtype;
    const void *src = op->base.in[op->off_in]->data;
    if (kb__tile_desc_eq(&d, od) && dt == KB__I32) {
        *e32 = (const int32_t *)src;
        return true;
    }
    if (k->elem_cap < (size_t)n) {
        free(k->elem_buf);
        k->elem_buf = malloc((size_t)n * sizeof *k->elem_buf);
        k->elem_cap = k->elem_buf ? (size_t)n : 0;
        if (!k->elem_buf) return false;
    }
    if (kb__tile_desc_eq(&d, od))
        kb__dtype_load_i64(dt, src, k->elem_buf, (size_t)n);
    else
        for (int64_t lane = 0; lane < n; lane++)
            k->elem_buf[lane] =
                elem_i64(op->base.in[op->off_in], &op->in_d[0], bidx(&op->in_d[0], od, lane));
    *elems = k->elem_buf;
    return true;
}

/* Whether lane i's element offset is lane i - 1's plus one (e32: i32
 * offsets read in place, else e64). */
static inline bool follows(const int32_t *e32, const int64_t *e64, int64_t i)
{
    return e32 ? (int64_t)e32[i] - e32[i - 1] == 1 : (uint64_t)e64[i] - (uint64_t)e64[i - 1] == 1;
}

typedef uint32_t v4u32 __attribute__((vector_size(16)));
typedef int32_t v4i32 __attribute__((vector_size(16)));

/* The lane after the first of lanes l + 1 .. that does not follow (as
 * follows(e, NULL, i) decides) in whole groups of four: the lane walk
 * below goes on from there one by one. Lane i follows when e[i] is
 * e[i - 1] + 1 without wrapping: the u32 difference is 1 and e[i] is the
 * greater as i32. */
static inline int64_t run_end32(const int32_t *e, int64_t l, int64_t n)
{
    int64_t end = l + 1;
    for (; end + 4 <= n; end += 4) {
        v4i32 cur, prev;
        memcpy(&cur, e + end, sizeof cur);
        memcpy(&prev, e + end - 1, sizeof prev);
        v4i32 ok = ((v4u32)cur - (v4u32)prev == 1) & (cur > prev);
        uint64_t w[2];
        memcpy(w, &ok, sizeof w);
        if (~(w[0] & w[1])) break;
    }
    return end;
}

/* What every run of one access shares (run_add). */
typedef struct run_ctx {
    kb__tl_op *op;
    const uint8_t *act; /* the lane flags to set; NULL without a mask */
    uint64_t es, lim;   /* element size; elements in the reach */
    bool stage;         /* the run's values are staged (a store that moves bytes) */
    uint32_t *ns;       /* spans so far */
} run_ctx;

static run_ctx run_ctx_of(kb__tl_op *op, const uint8_t *act, uint64_t es, uint32_t *ns)
{
    return (run_ctx){op, act, es, op->t->bytes / es, op->write && moves_bytes(op), ns};
}

/* Takes the run of lanes [l, l + len) at elements e0 .. e0 + len - 1 for
 * run_spans and osum_spans: its checks, lane flags, count, staged bytes
 * and span. 0, or 1 when the lane walk must decide. */
static int run_add(const run_ctx *x, int64_t l, int64_t e0, uint64_t len)
{
    kb__tl_op *op = x->op;
    const tl_tensor *t = op->t;
    uint64_t es = x->es, lim = x->lim, pos = (uint64_t)e0 * es, bytes = len * es;
    if (e0 < 0 || (uint64_t)e0 > lim || lim - (uint64_t)e0 < len) return 1;
    /* one region (a run across regions: the lane walk, which checks each
       element against its own region's size), then its padding */
    if (pos + bytes > t->shard_bytes && t->region_stride &&
        (pos / t->region_stride != (pos + bytes - 1) / t->region_stride ||
         in_padding(t, pos, bytes)))
        return 1;
    if (x->act) memset(op->active + l, 1, (size_t)len);
    op->n_active += (int64_t)len;
    if (x->stage)
        for (int64_t i = l; i < l + (int64_t)len; i++)
            stage_value(op, i, (char *)op->staging + (uint64_t)i * es);
    span_add(op, x->ns, t->va + pos, (uint64_t)l * es, bytes);
    return 0;
}

/* Pieces of consecutive values an outer sum's column part splits into
 * that osum_spans takes (a rotated head: two). */
#define OSUM_PIECES 8

/* run_spans for i32 offsets of the lanes' shape [R, C] kept as an outer
 * sum (kb__pe_buf_outer_sum) of a row part a[R] and a column part b[C].
 * The column part splits into pieces of consecutive values (b[c] = b[c -
 * 1] + 1 inside one); when no row's sums wrap inside a piece, row r's
 * lanes of a piece from column c0 hold the elements a[r] + b[c0] onwards,
 * each following the one before, and the first lane of a piece follows
 * the lane before it exactly when its element is that lane's plus one. So
 * the runs of active lanes (the mask's flags, of the lanes' shape) are
 * found piece by piece, and then the checks, spans, lane flags, counts and
 * staged bytes are run_spans' over the written sums. Returns 0, 1 (the
 * lane walk must decide), or 2, with nothing done, when it does not apply
 * (then run_spans writes the sums out and walks them). */
static int osum_spans(kb__tl_op *op, int64_t n, uint64_t es, uint32_t *ns)
{
    const kb__pe_buf *ob = op->base.in[op->off_in];
    const kb__tile_desc *od = &op->out_d;
    kb__tile_desc d = op->in_d[0];
    d.dtype = od->dtype;
    int64_t R = ob->osum_rows, C = ob->osum_cols;
    if (op->in_d[0].dtype != KB__I32 || !kb__tile_desc_eq(&d, od) || R * C != n) return 2;
    const uint8_t *act = NULL;
    if (op->mask_in >= 0) {
        kb__tile_desc md = op->in_d[1];
        md.dtype = od->dtype;
        if (!kb__tile_desc_eq(&md, od)) return 2;              /* a broadcast mask: the lane walk */
        act = (const uint8_t *)op->base.in[op->mask_in]->data; /* bool: one byte, 0 or 1 */
    }
    const int32_t *a = ob->data, *b = a + R;
    int64_t p0[OSUM_PIECES + 1]; /* piece k: columns p0[k] .. p0[k + 1] */
    int np = 0;
    p0[0] = 0;
    for (int64_t c = 1; c <= C; c++) {
        if (c < C && (int64_t)b[c] - b[c - 1] == 1) continue;
        if (np == OSUM_PIECES) return 2;
        p0[++np] = c;
    }
    for (int64_t r = 0; r < R; r++) /* no sums wrap inside a piece */
        for (int k = 0; k < np; k++)
            if ((int64_t)(int32_t)((uint32_t)a[r] + (uint32_t)b[p0[k]]) + (p0[k + 1] - p0[k] - 1) >
                INT32_MAX)
                return 2;
    if (act) memset(op->active, 0, (size_t)n);
    run_ctx x = run_ctx_of(op, act, es, ns);
    int64_t l = 0, e0 = 0, len = 0; /* the run being built: lanes [l, l + len) */
    for (int64_t r = 0; r < R; r++) {
        for (int k = 0; k < np; k++) {
            int64_t lane0 = r * C + p0[k], end = r * C + p0[k + 1];
            int64_t v0 = (int32_t)((uint32_t)a[r] + (uint32_t)b[p0[k]]);
            for (int64_t i = lane0; i < end;) {
                if (act && !act[i]) {
                    i++;
                    continue;
                }
                int64_t j = i + 1;
                if (act)
                    while (j < end && act[j])
                        j++;
                else
                    j = end;
                int64_t v = v0 + (i - lane0);
                if (len && i == l + len && v == e0 + len) {
                    len += j - i;
                } else {
                    if (len && run_add(&x, l, e0, (uint64_t)len)) return 1;
                    l = i, e0 = v, len = j - i;
                }
                i = j;
            }
        }
    }
    return len ? run_add(&x, l, e0, (uint64_t)len) : 0;
}

/* Run by run: a Triton-style access (offsets and mask tiles), one check
 * and one span per run of active lanes at consecutive elements, not per
 * lane. The spans, lane flags, n_active and staged bytes are exactly the
 * lane walk's: the walk merges a lane into the span before it exactly
 * when the lane before is active and at the element before (the tile
 * offset continues only for the next lane; the VA only for the next
 * element, no run wrapping since every run is checked inside the
 * tensor); a run inside one region is inside the reach and off the
 * padding exactly when each of its elements is (its last element is the
 * furthest into the region), and a run across regions goes to the walk.
 * Writes the lane flags when a mask is given (every lane is active
 * otherwise: load_fill then reads none). Expects ns and n_active 0.
 * Returns 0 when done, 1
 * when the lane walk must decide (a block pointer, a broadcast mask, a
 * lane out of range: the walk reports it; the state is then undefined and
 * must be reset), or the status of the op it failed (out of host memory). */
static int run_spans(kb__tl_op *op, int64_t n, uint64_t es, uint32_t *ns)
{
    if (op->bp.t || op->off_in < 0 || n < 0) return 1;
    kb__pe_buf *ob = op->base.in[op->off_in];
    if (ob->osum_rows) {
        int r = osum_spans(op, n, es, ns);
        if (r == 0) return 0;
        kb__pe_buf_read(ob); /* the sums, for the walks below */
        if (r == 1) return 1;
    }
    const int32_t *e32;
    const int64_t *e64;
    const uint8_t *act;
    if (!lane_elems(op, n, &e32, &e64, &act)) {
        kb__err e;
        kb__pe_op_done(&op->base, kb__err_set(&e, KB_ENOMEM, "out of host memory for a DMA"), &e);
        return KB_ENOMEM;
    }
    if (!e32 && !e64) return 1;
    if (act) memset(op->active, 0, (size_t)n);
    run_ctx x = run_ctx_of(op, act, es, ns);
    for (int64_t lane = 0; lane < n;) {
        if (act && !act[lane]) {
            lane++;
            continue;
        }
        int64_t l = lane, end = e32 && !act ? run_end32(e32, lane, n) : lane + 1;
        while (end < n && (!act || act[end]) && follows(e32, e64, end))
            end++;
        if (run_add(&x, l, e32 ? e32[l] : e64[l], (uint64_t)(end - l))) return 1;
        lane = end;
    }
    return 0;
}

/* Lane by lane: any access (run_spans covers the Triton-style ones that
 * pass; this walk also names the first lane out of range). Returns 0, or
 * the status of the op it failed. */
static int lane_spans(kb__tl_op *op, int64_t n, uint64_t es, uint32_t *ns)
{
    const tl_tensor *t = op->t;
    for (int64_t lane = 0; lane < n; lane++) {
        int active = 1;
        int64_t elem;
        lane_target(op, lane, &active, &elem);
        if (!active) continue;
        uint64_t va = t->va + (uint64_t)elem * es; /* wraps for messages only */
        bool outside = elem < 0 || (uint64_t)elem >= t->bytes / es;
        if (outside || in_padding(t, (uint64_t)elem * es, es)) {
            fail_range(op, lane, elem, va, !outside);
            return KB_ERANGE;
        }
        op->active[lane] = 1;
        op->n_active++;
        uint64_t off = (uint64_t)lane * es;
        if (op->write && moves_bytes(op)) stage_value(op, lane, (char *)op->staging + off);
        span_add(op, ns, va, off, es);
    }
    return 0;
}

/* Element offset of the first element of row (outer coordinates r[0..cd))
 * of block pointer bp, plus c; false when a coordinate is outside a checked
 * boundary (*skip set) or a sum or product passes int64 (the lane walk then
 * decides). */
static bool row_start(const kb__tl_op *op, const int64_t *r, int64_t c, int64_t *e0, bool *skip)
{
    const tl_block_ptr *bp = &op->bp;
    int cd = bp->ndim - 1;
    int64_t e = c;
    *skip = false;
    for (int d = 0; d < cd; d++) {
        int64_t coord, step;
        if (__builtin_add_overflow(bp->offsets[d], r[d], &coord)) return false;
        if ((op->check & TL_CHECK(d)) && (coord < 0 || coord >= bp->shape[d])) {
            *skip = true;
            return true;
        }
        if (__builtin_mul_overflow(coord, bp->strides[d], &step) ||
            __builtin_add_overflow(e, step, &e))
            return false;
    }
    *e0 = e;
    return true;
}

/* Row by row: a block pointer whose last dimension has unit stride, one
 * span per row (a row: the block's last dimension at fixed outer
 * coordinates, row-major over the outer ones). The spans, lanes and staged
 * bytes are exactly the lane-by-lane ones. When a lane is left out (a
 * checked boundary, lanes past the block), writes every one of the n lane
 * flags of op->active (0 for such a lane), so they need no clearing
 * before; when every lane is active, none (load_fill reads the flags only
 * when n_active < n). Returns false (nothing decided, the flags
 * undefined) when that does not apply or a lane is out of range, so
 * lane_spans reports it. */
static bool block_spans(kb__tl_op *op, int64_t n, uint64_t es, uint32_t *ns)
{
    const tl_block_ptr *bp = &op->bp;
    int cd = bp->ndim - 1;
    if (!bp->t || bp->ndim < 1 || bp->ndim > 3 || bp->strides[cd] != 1) return false;
    int64_t rows = 1, cols = bp->block[cd], c0 = bp->offsets[cd];
    for (int d = 0; d < cd; d++)
        rows *= bp->block[d];
    int64_t j0 = 0, j1 = cols, room;
    /* Any sum or product past int64 below: the lane walk decides (and
     * reports the lane out of range). */
    if (c0 > INT64_MAX - cols) return false;
    if (op->check & TL_CHECK(cd)) {
        if (__builtin_sub_overflow(bp->shape[cd], c0, &room)) return false;
        j0 = c0 < 0 ? (c0 > -cols ? -c0 : cols) : 0;
        j1 = room < cols ? room : cols;
        if (j1 < j0) j1 = j0;
    }
    if (rows > n / (cols ? cols : 1)) return false; /* more lanes than the tile: the walk decides */
    uint64_t covered = (uint64_t)(rows * cols);
    if (j0 >= j1) {
        memset(op->active, 0, (size_t)n);
        return true;
    }
    /* every lane active so far: the flags of rows before r are unwritten */
    bool all = j0 == 0 && j1 == cols && (uint64_t)n == covered;
    if ((uint64_t)n > covered) memset(op->active + covered, 0, (size_t)((uint64_t)n - covered));
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *flags = op->active + r * cols;
        int64_t rc[2] = {0, 0}, e0, e1; /* the row's outer coordinates in the block */
        if (cd == 2) {
            rc[0] = r / bp->block[1];
            rc[1] = r % bp->block[1];
        } else if (cd == 1) {
            rc[0] = r;
        }
        bool skip;
        if (!row_start(op, rc, c0 + j0, &e0, &skip)) return false;
        if (skip) {
            if (all) memset(op->active, 1, (size_t)(r * cols)); /* the rows before */
            all = false;
            memset(flags, 0, (size_t)cols);
            continue;
        }
        if (__builtin_add_overflow(e0, j1 - j0, &e1)) return false;
        if (e0 < 0 || (uint64_t)e1 > op->t->bytes / es ||
            in_padding(op->t, (uint64_t)e0 * es, (uint64_t)(e1 - e0) * es))
            return false;
        int64_t lane = r * cols + j0;
        uint64_t off = (uint64_t)lane * es;
        if (!all) {
            if (j0) memset(flags, 0, (size_t)j0);
            memset(flags + j0, 1, (size_t)(j1 - j0));
            if (j1 < cols) memset(flags + j1, 0, (size_t)(cols - j1));
        }
        op->n_active += j1 - j0;
        if (op->write && moves_bytes(op))
            kb__dtype_convert((kb__dtype)op->t->dtype, (char *)op->staging + off, op->in_d[2].dtype,
                              (const char *)op->base.in[op->other_in]->data +
                                  lane * (int64_t)kb__dtype_size(op->in_d[2].dtype),
                              (size_t)(j1 - j0));
        span_add(op, ns, op->t->va + (uint64_t)e0 * es, off, (uint64_t)(j1 - j0) * es);
    }
    return true;
}

/* ---- atomics ------------------------------------------------------------------ */

/* One element's new value: old (at o), the lane's value v and comparand c,
 * all in the tensor's dtype t; the result goes to out. */
static void atomic_one(kb__tl_atomic_kind kind, kb__dtype t, const void *o, const void *v,
                       const void *c, void *out)
{
    size_t es = kb__dtype_size(t);
    if (kind == KB__TL_ATOMIC_XCHG || kind == KB__TL_ATOMIC_CAS) { /* bitwise, as hardware */
        memcpy(out, kind == KB__TL_ATOMIC_XCHG || !memcmp(o, c, es) ? v : o, es);
        return;
    }
    if (kb__dtype_is_float(t)) {
        float a, b, r;
        kb__dtype_load_f32(t, o, &a, 1);
        kb__dtype_load_f32(t, v, &b, 1);
        if (kind == KB__TL_ATOMIC_ADD)
            r = a + b;
        else if (isnan(a) || isnan(b)) /* NaN-ignoring, as tl_maximum */
            r = isnan(a) ? b : a;
        else
            r = (kind == KB__TL_ATOMIC_MAX) == (b > a) ? b : a;
        kb__dtype_store_f32(t, out, &r, 1);
        return;
    }
    int64_t a, b, r;
    kb__dtype_load_i64(t, o, &a, 1);
    kb__dtype_load_i64(t, v, &b, 1);
    if (kind == KB__TL_ATOMIC_ADD)
        r = (int64_t)((uint64_t)a + (uint64_t)b);
    else
        r = (kind == KB__TL_ATOMIC_MAX) == (b > a) ? b : a;
    kb__dtype_store_i64(t, out, &r, 1);
}

/* kb__tl_mem_port.atomic's read-modify-write: host points at the elements
 * just sampled into the result tile, which give their lanes. */
static void atomic_rmw(void *ctx, const uint8_t *host, uint8_t *out, uint64_t bytes)
{
    kb__tl_op *op = ctx;
    kb__dtype t = (kb__dtype)op->t->dtype;
    size_t es = kb__dtype_size(t);
    int64_t n = kb__tile_numel(&op->out_d);
    const uint8_t *tile = op->base.out->data, *vals = op->staging;
    for (uint64_t i = 0; i < bytes; i += es) {
        int64_t lane = (int64_t)((size_t)(host + i - tile) / es);
        atomic_one((kb__tl_atomic_kind)op->atomic, t, host + i, vals + (size_t)lane * es,
                   vals + (size_t)(n + lane) * es, out + i);
    }
}

/* Stages the values (and cas's comparands after them) and hands the spans
 * to the port's atomic. */
static void atomic_start(kb__tl_op *op, const kb__tl_mem_port *port, int64_t n, uint64_t es,
                         uint32_t ns)
{
    kb__pe_op *base = &op->base;
    for (int64_t lane = 0; lane < n; lane++) {
        stage_operand(op, op->val_in, &op->in_d[2], lane, (char *)op->staging + lane * es);
        if (op->cmp_in >= 0)
            stage_operand(op, op->cmp_in, &op->in_d[1], lane,
                          (char *)op->staging + (n + lane) * es);
    }
    if (!port->atomic) {
        kb__err e;
        kb__err_set(&e, KB_EUNSUPPORTED, "%s of tensor %s: this memory port has no atomics",
                    base->name, op->t->name ? op->t->name : "?");
        kb__pe_op_done(base, KB_EUNSUPPORTED, &e);
        return;
    }
    kb__tl_span *spans = op->spans;
    op->spans = NULL; /* the port may finish op (and free it) before it returns */
    port->atomic(port->self, base->prog->pe, base, spans, ns, kb__pe_buf_bytes(base->out),
                 atomic_rmw, op);
}

static void mem_start(kb__pe_op *base)
{
    kb__tl_op *op = (kb__tl_op *)base;
    const tl_tensor *t = op->t;
    int64_t n = kb__tile_numel(&op->out_d);
    uint64_t es = kb__dtype_size((kb__dtype)t->dtype);
    tl_ctx *k = (tl_ctx *)base->prog;
    if (k->span_cap < (size_t)n) {
        free(k->span_buf);
        k->span_buf = malloc((size_t)n * sizeof *k->span_buf);
        k->span_cap = k->span_buf ? (size_t)n : 0;
    }
    op->spans = k->span_buf; /* used up before this returns */
    bool staged = op->write || op->atomic;
    size_t flags = ((size_t)n + 15) & ~(size_t)15; /* the staged bytes stay 16-byte aligned */
    op->active = lanes_get(k, flags + (staged ? (size_t)n * es * 2 : 0));
    if (!op->spans || !op->active) {
        kb__err e;
        kb__pe_op_done(base, kb__err_set(&e, KB_ENOMEM, "out of host memory for a DMA"), &e);
        return;
    }
    op->staging = staged ? op->active + flags : NULL;
    /* The tiles whose values the walk reads: offsets and mask (addresses,
     * lanes), a store's values when they move, an atomic's operands. */
    for (uint32_t i = 0; i < base->n_in; i++)
        if (((int)i != op->other_in || op->atomic || moves_bytes(op)) &&
            ((int)i != op->off_in || !base->in[i]->osum_rows)) /* run_spans reads those */
            kb__pe_buf_read(base->in[i]);
    uint32_t ns = 0;
    /* the first way that applies: rows, runs, lanes (each from cleared state) */
    for (int way = 0; way < 3; way++) {
        if (way == 2) memset(op->active, 0, (size_t)n); /* the walk sets the active lanes' */
        int r = way == 0   ? !block_spans(op, n, es, &ns)
                : way == 1 ? run_spans(op, n, es, &ns)
                           : lane_spans(op, n, es, &ns);
        if (r < 0 || (r && way == 2)) return; /* the op failed */
        if (!r) break;
        ns = 0;
        op->n_active = 0;
    }
    const kb__tl_mem_port *port = base->prog->pe->dma_port;
    if (op->atomic) {
        atomic_start(op, port, n, es, ns);
        return;
    }
    /* --no-data: the port writes nothing, so a load's tile stays as made */
    kb__tl_span *spans = op->spans;
    op->spans = NULL; /* the port may finish op (and free it) before it returns */
    port->transfer(port->self, base->prog->pe, base, op->write, spans, ns,
                   op->write           ? op->staging
                   : port->moves_bytes ? kb__pe_buf_bytes(base->out)
                                       : base->out->data);
}

/* Load finished: fill the lanes that were not read. */
static int load_fill(kb__pe_op *base, kb__err *err)
{
    (void)err;
    kb__tl_op *op = (kb__tl_op *)base;
    kb__dtype dt = (kb__dtype)op->t->dtype;
    size_t es = kb__dtype_size(dt);
    int64_t n = kb__tile_numel(&op->out_d);
    if (op->n_active == n) return 0;
    /* The value every left-out lane takes when it is one value (padding,
     * or a constant other): fill[0 .. es) */
    uint8_t fill[KB__PE_BUF_CONST_MAX], cur[KB__PE_BUF_CONST_MAX];
    bool one_fill = es <= KB__PE_BUF_CONST_MAX;
    if (one_fill && op->other_in >= 0) {
        const kb__tile_desc *od = &op->in_d[2];
        size_t os = kb__dtype_size(od->dtype);
        uint8_t o[KB__PE_BUF_CONST_MAX];
        one_fill =
            os <= KB__PE_BUF_CONST_MAX && kb__pe_buf_const_elem(base->in[op->other_in], os, o);
        if (one_fill) kb__dtype_convert(dt, fill, od->dtype, o, 1);
    } else if (one_fill) {
        double pad = op->pad == TL_PAD_NAN && kb__dtype_is_float(dt) ? NAN : 0.0;
        kb__tile_desc one = kb__tile_scalar(dt);
        kb__tile_full(&one, fill, pad, NULL);
    }
    /* A constant tile (a load under --no-data reads as zeros) whose value
     * is the fill stays that constant: nothing to write. */
    if (one_fill && kb__pe_buf_const_elem(base->out, es, cur) && !memcmp(cur, fill, es)) return 0;
    kb__pe_buf_bytes(base->out);
    if (one_fill) {
        for (int64_t lane = 0; lane < n; lane++)
            if (!op->active[lane]) memcpy((char *)base->out->data + lane * (int64_t)es, fill, es);
        return 0;
    }
    kb__pe_buf_read(base->in[op->other_in]);
    const kb__tile_desc *od = &op->in_d[2];
    for (int64_t lane = 0; lane < n; lane++) {
        if (op->active[lane]) continue;
        char *dst = (char *)base->out->data + lane * (int64_t)es;
        const char *src = (const char *)base->in[op->other_in]->data +
                          bidx(od, &op->out_d, lane) * (int64_t)kb__dtype_size(od->dtype);
        kb__dtype_convert(dt, dst, od->dtype, src, 1);
    }
    return 0;
}

static kb__tl_op *mem_op(tl_ctx *k, const char *name, const tl_tensor *t, bool write)
{
    kb__tl_op *op = (kb__tl_op *)kb__pe_op_new(&k->prog, KB__PE_DMA, name);
    op->t = t;
    op->write = write;
    op->off_in = op->mask_in = op->other_in = -1;
    op->base.start = mem_start;
    op->base.release = mem_release;
    if (!write) op->base.compute = load_fill;
    return op;
}

/* Whether a load's tile must start zeroed: with --no-data the transfer
 * writes none of it (docs/kernels.md: it reads as zeros); otherwise the
 * transfer writes the lanes it reads and load_fill the others. */
static bool load_zeroes(tl_ctx *k)
{
    return !((const kb__tl_mem_port *)k->prog.pe->dma_port)->moves_bytes;
}

static bool present(tl_tile t)
{
    return t.slot != 0 || t.gen != 0;
}

/* Shape of a Triton-style access: offsets broadcast with mask (and the
 * value/other). Fills descs[0..2] = offsets, mask, value/other. */
static kb__tile_desc access_shape(tl_ctx *k, const char *name, tl_tile offsets, tl_tile mask,
                                  tl_tile val, kb__tile_desc descs[3])
{
    kb__err e;
    descs[0] = kb__tl_slot_of(k, offsets, name)->d;
    if (!kb__dtype_is_int(descs[0].dtype) || descs[0].dtype == KB__BOOL)
        kb__pe_raise(&k->prog, KB_EINVAL, "%s: offsets must be an integer tile, not %s", name,
                     kb__dtype_name(descs[0].dtype));
    kb__tile_desc shape = descs[0];
    if (present(mask)) {
        descs[1] = kb__tl_slot_of(k, mask, name)->d;
        if (descs[1].dtype != KB__BOOL)
            kb__pe_raise(&k->prog, KB_EINVAL,
                         "%s: mask must be a bool tile (a comparison's result), not %s", name,
                         kb__dtype_name(descs[1].dtype));
        if (kb__tile_broadcast_shape(&shape, &descs[1], &shape, &e) < 0) kb__tl_raise_err(k, &e);
    }
    if (present(val)) {
        descs[2] = kb__tl_slot_of(k, val, name)->d;
        kb__tile_desc tmp;
        if (kb__tile_broadcast_shape(&shape, &descs[2], &tmp, &e) < 0) kb__tl_raise_err(k, &e);
        tmp.dtype = shape.dtype;
        if (!kb__tile_desc_eq(&tmp, &shape))
            kb__pe_raise(&k->prog, KB_EINVAL, "%s: the value does not broadcast to the offsets",
                         name);
    }
    return shape;
}

static void add_in(kb__tl_op *op, int8_t *slot, kb__pe_buf *b)
{
    *slot = (int8_t)op->base.n_in;
    op->base.in[op->base.n_in++] = b;
}

tl_tile tl_load(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile mask, tl_tile other)
{
    kb__tile_desc descs[3];
    kb__tl_need_tensor(k, t, "load");
    kb__tile_desc shape = access_shape(k, "load", offsets, mask, other, descs);
    shape.dtype = (kb__dtype)t->dtype;
    kb__pe_buf *out;
    tl_tile res = kb__tl_new(k, &shape, &out, load_zeroes(k));
    kb__tl_op *op = mem_op(k, "load", t, false);
    op->out_d = shape;
    memcpy(op->in_d, descs, sizeof descs);
    add_in(op, &op->off_in, kb__tl_slot_of(k, offsets, "load")->buf);
    if (present(mask)) add_in(op, &op->mask_in, kb__tl_slot_of(k, mask, "load")->buf);
    if (present(other)) add_in(op, &op->other_in, kb__tl_slot_of(k, other, "load")->buf);
    op->base.out = out;
    kb__pe_issue(&k->prog, &op->base);
    return res;
}

void tl_store(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask)
{
    kb__tile_desc descs[3];
    kb__tl_need_tensor(k, t, "store");
    kb__tile_desc shape = access_shape(k, "store", offsets, mask, value, descs);
    kb__tl_op *op = mem_op(k, "store", t, true);
    op->out_d = shape;
    memcpy(op->in_d, descs, sizeof descs);
    add_in(op, &op->off_in, kb__tl_slot_of(k, offsets, "store")->buf);
    if (present(mask)) add_in(op, &op->mask_in, kb__tl_slot_of(k, mask, "store")->buf);
    add_in(op, &op->other_in, kb__tl_slot_of(k, value, "store")->buf);
    kb__pe_issue(&k->prog, &op->base);
}

static tl_tile atomic(tl_ctx *k, kb__tl_atomic_kind kind, const char *name, tl_tensor *t,
                      tl_tile offsets, tl_tile cmp, tl_tile value, tl_tile mask)
{
    kb__tile_desc descs[3];
    kb__tl_need_tensor(k, t, name);
    if (t->dtype == TL_BOOL)
        kb__pe_raise(&k->prog, KB_EINVAL, "%s: tensor %s is bool; atomics need a numeric tensor",
                     name, t->name ? t->name : "?");
    kb__tile_desc shape = access_shape(k, name, offsets, mask, value, descs);
    if (present(cmp)) {
        kb__tile_desc cd = kb__tl_slot_of(k, cmp, name)->d, tmp;
        kb__err e;
        if (kb__tile_broadcast_shape(&shape, &cd, &tmp, &e) < 0) kb__tl_raise_err(k, &e);
        tmp.dtype = shape.dtype;
        if (!kb__tile_desc_eq(&tmp, &shape))
            kb__pe_raise(&k->prog, KB_EINVAL, "%s: cmp does not broadcast to the offsets", name);
        descs[1] = cd;
    }
    shape.dtype = (kb__dtype)t->dtype;
    kb__pe_buf *out;
    tl_tile res = kb__tl_new(k, &shape, &out, true); /* masked lanes read 0 */
    kb__tl_op *op = mem_op(k, name, t, false);
    op->atomic = (uint8_t)kind;
    op->base.fence = true; /* acq_rel: after every earlier DMA op, before every later one */
    op->val_in = op->cmp_in = -1;
    op->out_d = shape;
    memcpy(op->in_d, descs, sizeof descs);
    add_in(op, &op->off_in, kb__tl_slot_of(k, offsets, name)->buf);
    if (present(mask)) add_in(op, &op->mask_in, kb__tl_slot_of(k, mask, name)->buf);
    if (present(cmp)) add_in(op, &op->cmp_in, kb__tl_slot_of(k, cmp, name)->buf);
    add_in(op, &op->val_in, kb__tl_slot_of(k, value, name)->buf);
    op->base.out = out;
    kb__pe_issue(&k->prog, &op->base);
    return res;
}

tl_tile tl_atomic_add(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask)
{
    return atomic(k, KB__TL_ATOMIC_ADD, "atomic_add", t, offsets, TL_NONE, value, mask);
}

tl_tile tl_atomic_max(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask)
{
    return atomic(k, KB__TL_ATOMIC_MAX, "atomic_max", t, offsets, TL_NONE, value, mask);
}

tl_tile tl_atomic_min(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask)
{
    return atomic(k, KB__TL_ATOMIC_MIN, "atomic_min", t, offsets, TL_NONE, value, mask);
}

tl_tile tl_atomic_xchg(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask)
{
    return atomic(k, KB__TL_ATOMIC_XCHG, "atomic_xchg", t, offsets, TL_NONE, value, mask);
}

tl_tile tl_atomic_cas(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile cmp, tl_tile value)
{
    if (!present(cmp)) kb__pe_raise(&k->prog, KB_EINVAL, "atomic_cas: cmp is TL_NONE");
    return atomic(k, KB__TL_ATOMIC_CAS, "atomic_cas", t, offsets, cmp, value, TL_NONE);
}

/* ---- block pointers ------------------------------------------------------------ */

/* "(a, b, c)" of n values into buf. */
static const char *tuple_str(const int64_t *v, int n, char *buf, size_t size)
{
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < n && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)v[d]);
    if (k < size) snprintf(buf + k, size - k, ")");
    return buf;
}

/* order must list each of the ndim dimensions once (Triton's order). */
static void check_order(tl_ctx *k, const tl_tensor *t, int ndim, const int *order)
{
    bool seen[3] = {false, false, false};
    for (int d = 0; d < ndim; d++) {
        if (order[d] < 0 || order[d] >= ndim || seen[order[d]]) {
            int64_t v[3] = {0, 0, 0};
            char buf[64];
            for (int e = 0; e < ndim; e++)
                v[e] = order[e];
            kb__pe_raise(&k->prog, KB_EINVAL,
                         "make_block_ptr of tensor %s: order %s is not a permutation of the %d "
                         "dimensions (expected each of 0..%d once)",
                         t->name ? t->name : "?", tuple_str(v, ndim, buf, sizeof buf), ndim,
                         ndim - 1);
        }
        seen[order[d]] = true;
    }
}

tl_block_ptr tl_make_block_ptr(tl_ctx *k, tl_tensor *t, int ndim, const int64_t *shape,
                               const int64_t *strides, const int64_t *offsets,
                               const int64_t *block_shape, const int *order)
{
    kb__tl_need_tensor(k, t, "make_block_ptr");
    if (ndim < 1 || ndim > 3)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "make_block_ptr of tensor %s: ndim %d (block pointers have 1 to 3 "
                     "dimensions)",
                     t->name ? t->name : "?", ndim);
    if (!shape || !strides || !offsets || !block_shape)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "make_block_ptr: shape, strides, offsets and block_shape must each have %d "
                     "element(s), got a NULL array",
                     ndim);
    if (order) check_order(k, t, ndim, order);
    tl_block_ptr p = {.t = t, .ndim = ndim};
    for (int d = 0; d < ndim; d++) {
        p.shape[d] = shape[d];
        p.strides[d] = strides[d];
        p.offsets[d] = offsets[d];
        p.block[d] = block_shape[d];
        p.order[d] = order ? order[d] : ndim - 1 - d;
        if (block_shape[d] < 1) {
            char buf[96];
            kb__pe_raise(&k->prog, KB_EINVAL,
                         "make_block_ptr of tensor %s: block_shape %s has dimension %d = %lld "
                         "(each must be at least 1)",
                         t->name ? t->name : "?", tuple_str(block_shape, ndim, buf, sizeof buf), d,
                         (long long)block_shape[d]);
        }
    }
    return p;
}

/* A block pointer as the block ops need it: made by tl_make_block_ptr or
 * filled by hand, it must name a tensor and have 1 to 3 dimensions. */
static void check_block_ptr(tl_ctx *k, const tl_block_ptr *p, const char *name)
{
    if (p->ndim < 1 || p->ndim > 3)
        kb__pe_raise(&k->prog, KB_EINVAL, "%s: block pointer has ndim %d (1 to 3 supported)", name,
                     p->ndim);
    kb__tl_need_tensor(k, p->t, name);
}

tl_block_ptr tl_advance(tl_ctx *k, tl_block_ptr p, const int64_t *offsets)
{
    check_block_ptr(k, &p, "advance");
    if (!offsets) kb__pe_raise(&k->prog, KB_EINVAL, "advance: offsets is NULL");
    for (int d = 0; d < p.ndim; d++) {
        int64_t was = p.offsets[d];
        if (__builtin_add_overflow(was, offsets[d], &p.offsets[d]))
            kb__pe_raise(&k->prog, KB_ERANGE,
                         "advance: offset %lld + %lld of dimension %d overflows int64",
                         (long long)was, (long long)offsets[d], d);
    }
    return p;
}

static kb__tile_desc block_desc(tl_ctx *k, const tl_block_ptr *p, unsigned check, const char *name)
{
    check_block_ptr(k, p, name);
    if (check & ~((1u << p->ndim) - 1))
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "%s of tensor %s: boundary_check 0x%x names a dimension the %d-D block "
                     "pointer does not have (TL_CHECK(0) .. TL_CHECK(%d))",
                     name, p->t->name ? p->t->name : "?", check, p->ndim, p->ndim - 1);
    kb__tile_desc d = {.dtype = (kb__dtype)p->t->dtype, .ndim = p->ndim};
    for (int i = 0; i < p->ndim; i++)
        d.shape[i] = p->block[i];
    kb__err e;
    if (kb__tile_desc_check(&d, &e) < 0)
        kb__pe_raise(&k->prog, e.code, "%s of tensor %s: block: %s", name,
                     p->t->name ? p->t->name : "?", e.msg);
    return d;
}

tl_tile tl_load_block(tl_ctx *k, tl_block_ptr p, unsigned boundary_check, tl_padding padding)
{
    kb__tile_desc d = block_desc(k, &p, boundary_check, "load");
    if (padding != TL_PAD_ZERO && padding != TL_PAD_NAN)
        kb__pe_raise(&k->prog, KB_EINVAL, "load: padding %d is not TL_PAD_ZERO or TL_PAD_NAN",
                     (int)padding);
    kb__pe_buf *out;
    tl_tile res = kb__tl_new(k, &d, &out, load_zeroes(k));
    kb__tl_op *op = mem_op(k, "load", p.t, false);
    op->bp = p;
    op->check = boundary_check;
    op->pad = padding;
    op->out_d = d;
    op->base.out = out;
    kb__pe_issue(&k->prog, &op->base);
    return res;
}

void tl_store_block(tl_ctx *k, tl_block_ptr p, tl_tile value, unsigned boundary_check)
{
    kb__tile_desc d = block_desc(k, &p, boundary_check, "store");
    kb__tl_slot *v = kb__tl_slot_of(k, value, "store");
    kb__tile_desc vd = v->d;
    vd.dtype = d.dtype;
    if (!kb__tile_desc_eq(&vd, &d)) {
        char a[48], b[48];
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "store of tensor %s: value of shape %s into a block of shape %s (the value "
                     "must have the block's shape)",
                     p.t->name ? p.t->name : "?", kb__tile_shape_str(&v->d, a, sizeof a),
                     kb__tile_shape_str(&d, b, sizeof b));
    }
    kb__tl_op *op = mem_op(k, "store", p.t, true);
    op->bp = p;
    op->check = boundary_check;
    op->out_d = d;
    op->in_d[2] = v->d;
    add_in(op, &op->other_in, v->buf);
    kb__pe_issue(&k->prog, &op->base);
}
