/*
 * copy.c — host <-> device copies, tensor info and the printable summary.
 *
 * Copy in: for each region (distinct block of data), the block is packed
 * from the row-major host array into a staging buffer, converted to the
 * tensor's dtype on the way (round to nearest even), and written to every
 * replica with one memory-write message each. Copy out: each region's first
 * replica is read with one memory-read message and unpacked, converting to
 * the host dtype. A copy of some rows moves only the rows of each region
 * inside them (a shard stores its rows one after another, so they are one
 * contiguous range). A row of a 3-D tensor [B, R, C] is one index of
 * dimension 0: R pieces of the shard's columns, host row i's R pieces at
 * (i·R + r)·C + col0. Host memory: one staging buffer of one shard's bytes.
 */
#include "host/device.h"
#include "runtime/machine.h"
#include "runtime/port.h"
#include "runtime/tensor.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kb__rt_segs(kb_machine *m, size_t n, kb__rt_seg **out, kb__err *err)
{
    kb__rt_scratch *x = kb__rt_scratch_of(m);
    if (n > x->segs_cap) {
        kb__rt_seg *s = realloc(x->segs, n * sizeof *s);
        if (!s) return kb__err_set(err, KB_ENOMEM, "cannot allocate %zu message segments", n);
        x->segs = s;
        x->segs_cap = n;
    }
    *out = x->segs;
    return 0;
}

int kb__rt_stage(kb_machine *m, size_t n, uint8_t **out, kb__err *err)
{
    kb__rt_scratch *x = kb__rt_scratch_of(m);
    if (n > x->stage_cap) {
        uint8_t *b = realloc(x->stage, n);
        if (!b) return kb__err_set(err, KB_ENOMEM, "cannot allocate a %zu-byte staging buffer", n);
        x->stage = b;
        x->stage_cap = n;
    }
    *out = x->stage;
    return 0;
}

void kb__rt_scratch_fini(kb__rt_scratch *s)
{
    free(s->stage);
    free(s->segs);
    memset(s, 0, sizeof *s);
}

static uint64_t elements(const kb__rt_tensor *t)
{
    return (uint64_t)t->plan.rows * (uint64_t)t->plan.mid * (uint64_t)t->plan.cols;
}

static void shape_text(const kb__rt_tensor *t, char *buf, size_t n)
{
    if (t->ndim == 3)
        snprintf(buf, n, "%" PRId64 "×%" PRId64 "×%" PRId64, t->shape[0], t->shape[1], t->shape[2]);
    else if (t->ndim == 2)
        snprintf(buf, n, "%" PRId64 "×%" PRId64, t->shape[0], t->shape[1]);
    else
        snprintf(buf, n, "%" PRId64, t->shape[0]);
}

/* Converts host rows [a, b) of region shard sh (rows counted from row0 in
 * the host array) to or from the staging buffer: in (host -> stage) when
 * `in`, else out. */
static void pack_rows(const kb__rt_tensor *t, const kb__shard *sh, int64_t row0, int64_t a,
                      int64_t b, uint8_t *host, kb_dtype host_dtype, uint8_t *stage, bool in)
{
    const kb__shard_plan *p = &t->plan;
    size_t hs = kb__dtype_size((kb__dtype)host_dtype), ds = kb__dtype_size(t->dtype);
    for (int64_t i = a; i < b; i++)
        for (int64_t r = 0; r < p->mid; r++) {
            uint64_t off =
                ((uint64_t)(i - row0) * (uint64_t)p->mid + (uint64_t)r) * (uint64_t)p->cols +
                (uint64_t)sh->col0;
            uint8_t *st = stage + ((uint64_t)(i - a) * (uint64_t)p->mid + (uint64_t)r) *
                                      (uint64_t)sh->cols * ds;
            if (in)
                kb__dtype_convert(t->dtype, st, (kb__dtype)host_dtype, host + off * hs,
                                  (size_t)sh->cols);
            else
                kb__dtype_convert((kb__dtype)host_dtype, host + off * hs, t->dtype, st,
                                  (size_t)sh->cols);
        }
}

/* Looks the tensor up and checks rows [row0, row0 + nrows) (every row when
 * `all`: *nrows is set) and the host buffer of that many rows; NULL with
 * err set. */
static kb__rt_tensor *copy_check(kb_machine *m, kb_tensor h, bool all, int64_t row0, int64_t *nrows,
                                 const void *buf, size_t nbytes, kb_dtype host_dtype, kb__err *err)
{
    kb__rt_tensor *t = kb__rt_tensor_get(m, h.id, err);
    if (!t) return NULL;
    if (!kb__dtype_valid((int)host_dtype)) {
        kb__err_set(err, KB_EINVAL, "tensor '%s': unknown host dtype %d", t->name, (int)host_dtype);
        return NULL;
    }
    const kb__shard_plan *p = &t->plan;
    if (all) *nrows = p->rows;
    if (*nrows < 1) {
        kb__err_set(err, KB_ERANGE, "tensor '%s': a copy of %" PRId64 " rows; expected at least 1",
                    t->name, *nrows);
        return NULL;
    }
    if (row0 < 0 || row0 > p->rows - *nrows) {
        char shp[64];
        shape_text(t, shp, sizeof shp);
        kb__err_set(err, KB_ERANGE,
                    "tensor '%s' (%s): %" PRId64 " row%s from row %" PRId64
                    " are not inside its %" PRId64 " row%s%s",
                    t->name, shp, *nrows, *nrows == 1 ? "" : "s", row0, p->rows,
                    p->rows == 1 ? "" : "s",
                    t->ndim == 1   ? " (a 1-D tensor is one row)"
                    : t->ndim == 3 ? " (a row of a 3-D tensor is one index of dimension 0)"
                                   : "");
        return NULL;
    }
    uint64_t want = (uint64_t)*nrows * (uint64_t)p->mid * (uint64_t)p->cols *
                    kb__dtype_size((kb__dtype)host_dtype);
    if (!buf || nbytes != want) {
        char shp[64], part[64] = "";
        shape_text(t, shp, sizeof shp);
        if (*nrows != p->rows)
            snprintf(part, sizeof part, "rows [%" PRId64 ", %" PRId64 ") of ", row0, row0 + *nrows);
        kb__err_set(err, KB_EINVAL,
                    "tensor '%s': host buffer has %zu bytes%s, expected %" PRIu64 " (%s%s %s)",
                    t->name, buf ? nbytes : 0, buf ? "" : " (NULL)", want, part, shp,
                    kb__dtype_name((kb__dtype)host_dtype));
        return NULL;
    }
    return t;
}

/* The rows of shard sh inside [row0, row0 + nrows): [*a, *b) in global rows;
 * false when none. */
static bool rows_in(const kb__shard *sh, int64_t row0, int64_t nrows, int64_t *a, int64_t *b)
{
    *a = sh->row0 > row0 ? sh->row0 : row0;
    *b = sh->row0 + sh->rows < row0 + nrows ? sh->row0 + sh->rows : row0 + nrows;
    return *a < *b;
}

static int copy_in(kb_machine *m, kb_tensor h, bool all, int64_t row0, int64_t nrows,
                   const void *src, size_t nbytes, kb_dtype src_dtype)
{
    if (!m) return KB_EINVAL;
    kb__err err;
    kb__err_clear(&err);
    kb__rt_tensor *t = copy_check(m, h, all, row0, &nrows, src, nbytes, src_dtype, &err);
    uint8_t *stage = NULL;
    kb__rt_seg *segs = NULL;
    if (!t || kb__rt_stage(m, t->plan.max_bytes, &stage, &err) ||
        kb__rt_segs(m, (size_t)t->plan.copies, &segs, &err))
        return kb__rt_fail(m, &err);
    const kb__shard_plan *p = &t->plan;
    size_t ds = kb__dtype_size(t->dtype);
    for (int r = 0; r < p->n_regions; r++) {
        const kb__shard *sh = &p->shards[kb__shard_find(p, r, 0)];
        int64_t a, b;
        if (!rows_in(sh, row0, nrows, &a, &b)) continue;
        if (!m->dev->no_data) /* no bytes move: the host data is not read */
            pack_rows(t, sh, row0, a, b, (uint8_t *)(uintptr_t)src, src_dtype, stage, true);
        uint64_t row_bytes = (uint64_t)p->mid * (uint64_t)sh->cols * ds;
        uint64_t skip = (uint64_t)(a - sh->row0) * row_bytes, len = (uint64_t)(b - a) * row_bytes;
        for (int k = 0; k < p->copies; k++)
            segs[k] = (kb__rt_seg){t->pa[kb__shard_find(p, r, k)] + skip, len, stage};
        if (kb__rt_port_write(m, segs, (uint32_t)p->copies, NULL, 0, &err))
            return kb__rt_fail(m, &err);
    }
    return 0;
}

int kb_copy_from_host(kb_machine *m, kb_tensor t, const void *src, size_t nbytes,
                      kb_dtype src_dtype)
{
    return copy_in(m, t, true, 0, 0, src, nbytes, src_dtype);
}

int kb_copy_rows_from_host(kb_machine *m, kb_tensor t, int64_t row0, int64_t nrows, const void *src,
                           size_t nbytes, kb_dtype src_dtype)
{
    return copy_in(m, t, false, row0, nrows, src, nbytes, src_dtype);
}

static int copy_out(kb_machine *m, kb_tensor h, bool all, int64_t row0, int64_t nrows, void *dst,
                    size_t nbytes, kb_dtype dst_dtype)
{
    if (!m) return KB_EINVAL;
    kb__err err;
    kb__err_clear(&err);
    kb__rt_tensor *t = copy_check(m, h, all, row0, &nrows, dst, nbytes, dst_dtype, &err);
    uint8_t *stage = NULL;
    if (!t || kb__rt_stage(m, t->plan.max_bytes, &stage, &err)) return kb__rt_fail(m, &err);
    const kb__shard_plan *p = &t->plan;
    size_t ds = kb__dtype_size(t->dtype);
    for (int r = 0; r < p->n_regions; r++) {
        int idx = kb__shard_find(p, r, 0);
        const kb__shard *sh = &p->shards[idx];
        int64_t a, b;
        if (!rows_in(sh, row0, nrows, &a, &b)) continue;
        uint64_t row_bytes = (uint64_t)p->mid * (uint64_t)sh->cols * ds;
        uint64_t skip = (uint64_t)(a - sh->row0) * row_bytes, len = (uint64_t)(b - a) * row_bytes;
        kb__rt_seg seg = {t->pa[idx] + skip, len, stage};
        if (m->dev->no_data) memset(stage, 0, len); /* no bytes move: the host reads zeros */
        int rc = kb__rt_port_read(m, &seg, 1, &err);
        if (rc) return kb__rt_fail(m, &err);
        pack_rows(t, sh, row0, a, b, dst, dst_dtype, stage, false);
    }
    return 0;
}

int kb_copy_to_host(kb_machine *m, kb_tensor t, void *dst, size_t nbytes, kb_dtype dst_dtype)
{
    return copy_out(m, t, true, 0, 0, dst, nbytes, dst_dtype);
}

int kb_copy_rows_to_host(kb_machine *m, kb_tensor t, int64_t row0, int64_t nrows, void *dst,
                         size_t nbytes, kb_dtype dst_dtype)
{
    return copy_out(m, t, false, row0, nrows, dst, nbytes, dst_dtype);
}

/* Records "<fn>: out is NULL" on m for an info call without an output. */
static int out_null(kb_machine *m, const char *fn)
{
    kb__err err;
    kb__err_set(&err, KB_EINVAL, "%s: out is NULL", fn);
    return kb__rt_fail(m, &err);
}

int kb_tensor_get_info(kb_machine *m, kb_tensor h, kb_tensor_info *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!m) return KB_EINVAL;
    if (!out) return out_null(m, "kb_tensor_get_info");
    kb__err err;
    kb__rt_tensor *t = kb__rt_tensor_get(m, h.id, &err);
    if (!t) return kb__rt_fail(m, &err);
    snprintf(out->name, sizeof out->name, "%s", t->name);
    out->ndim = t->ndim;
    for (int d = 0; d < 3; d++)
        out->shape[d] = t->shape[d];
    out->dtype = (kb_dtype)t->dtype;
    out->policy = t->policy;
    out->sip_scope = t->sip_scope;
    out->nbytes = elements(t) * kb__dtype_size(t->dtype);
    out->va = t->va;
    out->va_bytes = t->va_bytes;
    out->n_shards = t->plan.n_shards;
    return 0;
}

static void shard_info(const kb__rt_tensor *t, int i, kb_shard_info *o)
{
    const kb__shard *s = &t->plan.shards[i];
    *o = (kb_shard_info){s->sip,
                         s->cube,
                         s->pe,
                         s->replica,
                         {s->row0, s->col0, 0},
                         {s->rows, s->cols, 0},
                         s->bytes,
                         t->pa[i],
                         kb__rt_region_va(t, s->region)};
    if (t->ndim == 1) { /* shard.h keeps a 1-D tensor as one row */
        o->offset[0] = s->col0;
        o->offset[1] = 0;
        o->shape[0] = s->cols;
        o->shape[1] = 0;
    }
    if (t->ndim == 3) { /* [rows, mid, cols]: dimension 1 is whole */
        o->offset[1] = 0;
        o->offset[2] = s->col0;
        o->shape[1] = t->plan.mid;
        o->shape[2] = s->cols;
    }
}

int kb_tensor_get_shard(kb_machine *m, kb_tensor h, int i, kb_shard_info *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!m) return KB_EINVAL;
    if (!out) return out_null(m, "kb_tensor_get_shard");
    kb__err err;
    kb__rt_tensor *t = kb__rt_tensor_get(m, h.id, &err);
    if (!t) return kb__rt_fail(m, &err);
    if (i < 0 || i >= t->plan.n_shards) {
        kb__err_set(&err, KB_ERANGE, "tensor '%s': shard %d does not exist (it has %d)", t->name, i,
                    t->plan.n_shards);
        return kb__rt_fail(m, &err);
    }
    shard_info(t, i, out);
    return 0;
}

typedef struct text {
    char *buf;
    size_t size, len;
} text;

static void __attribute__((format(printf, 2, 3))) put(text *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = x->len < x->size ? x->size - x->len : 0;
    int n = vsnprintf(room ? x->buf + x->len : NULL, room, fmt, ap);
    va_end(ap);
    x->len += n > 0 ? (size_t)n : 0;
}

int kb_tensor_describe(kb_machine *m, kb_tensor h, char *buf, size_t size, size_t *needed)
{
    if (needed) *needed = 0;
    if (buf && size) buf[0] = '\0';
    if (!m) return KB_EINVAL;
    kb__err err;
    kb__rt_tensor *t = kb__rt_tensor_get(m, h.id, &err);
    if (!t) return kb__rt_fail(m, &err);
    text x = {buf, buf ? size : 0, 0};
    char shp[64], a[32], b[32];
    shape_text(t, shp, sizeof shp);
    const kb_policy *p = &t->policy;
    put(&x, "tensor '%s' (id %" PRIu64 "): %s %s, policy sip=%s×%d cube=%s×%d pe=%s×%d", t->name,
        t->serial, shp, kb__dtype_name(t->dtype), kb__split_name(p->sip), p->num_sips,
        kb__split_name(p->cube), p->num_cubes, kb__split_name(p->pe), p->num_pes);
    if (p->first_cube || p->first_pe) put(&x, " from cube %d, pe %d", p->first_cube, p->first_pe);
    if (t->sip_scope >= 0) put(&x, " (scoped to sip%d)", t->sip_scope);
    put(&x, "\n  VA [%s, %s), %d shards, %d regions × %d copies\n",
        kb__mmu_format_va(t->va, a, sizeof a), kb__mmu_format_va(t->va + t->va_bytes, b, sizeof b),
        t->plan.n_shards, t->plan.n_regions, t->plan.copies);
    for (int i = 0; i < t->plan.n_shards; i++) {
        kb_shard_info s;
        char pa[64];
        shard_info(t, i, &s);
        kb__addr_format(&m->ageom, s.pa, pa, sizeof pa);
        if (t->ndim == 3)
            put(&x,
                "  [%d] sip%d/cube%d/pe%d replica %d: offset (%" PRId64 ", %" PRId64 ", %" PRId64
                ") shape %" PRId64 "×%" PRId64 "×%" PRId64,
                i, s.sip, s.cube, s.pe, s.replica, s.offset[0], s.offset[1], s.offset[2],
                s.shape[0], s.shape[1], s.shape[2]);
        else if (t->ndim == 2)
            put(&x,
                "  [%d] sip%d/cube%d/pe%d replica %d: offset (%" PRId64 ", %" PRId64
                ") shape %" PRId64 "×%" PRId64,
                i, s.sip, s.cube, s.pe, s.replica, s.offset[0], s.offset[1], s.shape[0],
                s.shape[1]);
        else
            put(&x, "  [%d] sip%d/cube%d/pe%d replica %d: offset %" PRId64 " shape %" PRId64, i,
                s.sip, s.cube, s.pe, s.replica, s.offset[0], s.shape[0]);
        put(&x, " PA %s VA %s\n", pa, kb__mmu_format_va(s.va, a, sizeof a));
    }
    if (needed) *needed = x.len + 1;
    return 0;
}
