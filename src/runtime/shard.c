/*
 * runtime/shard.c — shard placement from a {sip, cube, pe} policy.
 *
 * Each split level multiplies the number of blocks along its dimension; each
 * replicate level multiplies the number of copies. A PE's indices at the
 * three levels are read as mixed-radix digits: the row_wise digits give its
 * block row, the column_wise digits its block column, the replicate digits
 * its replica number. A split that does not divide its part evenly gives
 * balanced blocks that differ by one row or column (the first ones larger).
 * Validation runs first and fully, so a plan is either complete or not made
 * at all.
 */
#include "runtime/shard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LV_SIP, LV_CUBE, LV_PE, N_LEVELS };

static const char *const level_owner[N_LEVELS] = {"SIPs", "cubes", "PEs"};
static const char *const level_count[N_LEVELS] = {"num_sips", "num_cubes", "num_pes"};
static const char *const level_parent[N_LEVELS] = {"the tensor", "each SIP's part",
                                                   "each cube's part"};

const char *kb__split_name(kb_split s)
{
    switch (s) {
    case KB_REPLICATE:
        return "replicate";
    case KB_ROW_WISE:
        return "row_wise";
    case KB_COLUMN_WISE:
        return "column_wise";
    }
    return "?";
}

/* "[128, 256]" or "[64]". */
static void fmt_shape(const int64_t *shape, int ndim, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static int check_shape(const kb__shard_req *r, const char *name, kb__err *err)
{
    char shp[160];
    int nd = r->ndim > 4 ? 4 : r->ndim;
    if (r->ndim < 1 || !r->shape)
        return kb__err_set(err, KB_EINVAL, "tensor %s: a tensor needs at least 1 dimension, got %d",
                           name, r->ndim);
    fmt_shape(r->shape, nd, shp, sizeof shp);
    if (r->ndim > 3)
        return kb__err_set(err, KB_EUNSUPPORTED,
                           "tensor %s: %d-D tensors are not supported (shape %s%s; tensors have "
                           "1 to 3 dimensions)",
                           name, r->ndim, shp, r->ndim > 4 ? "..." : "");
    for (int d = 0; d < r->ndim; d++)
        if (r->shape[d] <= 0)
            return kb__err_set(err, KB_EINVAL,
                               "tensor %s: dimension %d of shape %s is %" PRId64
                               "; every dimension must be positive",
                               name, d, shp, r->shape[d]);
    if (r->elem_size == 0)
        return kb__err_set(err, KB_EINVAL, "tensor %s: element size must be at least 1 byte", name);
    return 0;
}

/* Fills plan->mode, count and sip_base from the policy and geometry. */
static int resolve_levels(kb__shard_plan *p, const kb__shard_req *r, const char *name, kb__err *err)
{
    const kb__shard_geom *g = &r->geom;
    const int avail[N_LEVELS] = {g->sips, g->cubes_per_sip, g->pes_per_cube};
    const char *const avail_what[N_LEVELS] = {"SIPs of the machine", "cubes per SIP",
                                              "PEs per cube"};
    const int asked[N_LEVELS] = {r->policy.num_sips, r->policy.num_cubes, r->policy.num_pes};
    const int first[N_LEVELS] = {0, r->policy.first_cube, r->policy.first_pe};
    static const char *const first_name[N_LEVELS] = {"", "first_cube", "first_pe"};
    const kb_split mode[N_LEVELS] = {r->policy.sip, r->policy.cube, r->policy.pe};
    if (g->sips < 1 || g->cubes_per_sip < 1 || g->pes_per_cube < 1)
        return kb__err_set(err, KB_EINVAL,
                           "tensor %s: machine geometry %d SIPs x %d cubes x %d PEs is empty", name,
                           g->sips, g->cubes_per_sip, g->pes_per_cube);
    if (r->device_sip < -1 || r->device_sip >= g->sips)
        return kb__err_set(err, KB_EINVAL,
                           "tensor %s: current device sip %d is not a SIP of this machine "
                           "(0..%d, or -1 for none)",
                           name, r->device_sip, g->sips - 1);
    for (int l = 0; l < N_LEVELS; l++) {
        if ((unsigned)mode[l] > KB_COLUMN_WISE)
            return kb__err_set(err, KB_EINVAL,
                               "tensor %s: policy for %s is %d, not replicate, row_wise or "
                               "column_wise",
                               name, level_owner[l], (int)mode[l]);
        if (asked[l] < 0 || asked[l] > avail[l])
            return kb__err_set(err, KB_EINVAL, "tensor %s: %s = %d is outside 0..%d (the %d %s)",
                               name, level_count[l], asked[l], avail[l], avail[l], avail_what[l]);
        if (first[l] < 0 || first[l] >= avail[l])
            return kb__err_set(err, KB_EINVAL, "tensor %s: %s = %d is outside 0..%d (the %d %s)",
                               name, first_name[l], first[l], avail[l] - 1, avail[l],
                               avail_what[l]);
        if (first[l] + asked[l] > avail[l])
            return kb__err_set(err, KB_EINVAL,
                               "tensor %s: %s = %d from %s = %d runs past the %d %s (units "
                               "%d..%d)",
                               name, level_count[l], asked[l], first_name[l], first[l], avail[l],
                               avail_what[l], first[l], first[l] + asked[l] - 1);
        p->mode[l] = mode[l];
        p->count[l] = asked[l] ? asked[l] : avail[l] - first[l];
        p->base[l] = first[l];
    }
    if (r->device_sip >= 0 && mode[LV_SIP] == KB_REPLICATE && asked[LV_SIP] == 0) {
        p->count[LV_SIP] = 1;
        p->base[LV_SIP] = r->device_sip;
    }
    return 0;
}

/* Checks every split leaves each owner at least one row or column (the
 * smallest part at each level: parts split unevenly differ by one); sets the
 * block grid in the plan. */
static int check_splits(kb__shard_plan *p, const kb__shard_req *r, const char *name, kb__err *err)
{
    char shp[160];
    fmt_shape(r->shape, r->ndim, shp, sizeof shp);
    int64_t least[2] = {p->rows, p->cols};
    p->row_blocks = p->col_blocks = p->copies = 1;
    for (int l = 0; l < N_LEVELS; l++) {
        int n = p->count[l];
        if (p->mode[l] == KB_REPLICATE) {
            p->copies *= n;
            continue;
        }
        int d = p->mode[l] == KB_ROW_WISE ? 0 : 1;
        if (r->ndim == 1 && d == 0 && n > 1)
            return kb__err_set(err, KB_EINVAL,
                               "tensor %s: shape %s cannot be split row_wise over %d %s (a 1-D "
                               "tensor is one row [1, %" PRId64 "]; split it column_wise)",
                               name, shp, n, level_owner[l], p->cols);
        if (least[d] < n) {
            int gd = r->ndim == 1 ? 0 : d ? r->ndim - 1 : 0; /* as the user numbers it */
            if (l == 0 || least[d] == (d ? p->cols : p->rows))
                return kb__err_set(err, KB_EINVAL,
                                   "tensor %s: shape %s cannot be split %s over %d %s (dimension "
                                   "%d = %" PRId64 " is smaller than %d: some would hold nothing)",
                                   name, shp, kb__split_name(p->mode[l]), n, level_owner[l], gd,
                                   least[d], n);
            return kb__err_set(err, KB_EINVAL,
                               "tensor %s: shape %s cannot be split %s over %d %s (%s has "
                               "dimension %d = %" PRId64 " at the least, which is smaller than "
                               "%d: some would hold nothing)",
                               name, shp, kb__split_name(p->mode[l]), n, level_owner[l],
                               level_parent[l], gd, least[d], n);
        }
        least[d] /= n;
        if (d == 0)
            p->row_blocks *= n;
        else
            p->col_blocks *= n;
    }
    return 0;
}

/* Block b of n balanced blocks of [*start, *start + *len): the first len % n
 * blocks hold one more than the others (1823 rows over 256: 31 blocks of 8,
 * then 225 of 7). */
static void split_block(int64_t *start, int64_t *len, int n, int b)
{
    int64_t q = *len / n, rem = *len % n;
    *start += b * q + (b < rem ? b : rem);
    *len = q + (b < rem);
}

/* Block row, block column and replica of the PE with level indices idx. */
static void digits(const kb__shard_plan *p, const int idx[N_LEVELS], int *rb, int *cb, int *rep)
{
    *rb = *cb = *rep = 0;
    for (int l = 0; l < N_LEVELS; l++) {
        int *acc = p->mode[l] == KB_ROW_WISE ? rb : p->mode[l] == KB_COLUMN_WISE ? cb : rep;
        *acc = *acc * p->count[l] + idx[l];
    }
}

/* Fills the shards; each level splits its parent's block. Returns 0, or
 * KB_EINVAL when a shard's byte size overflows. */
static int fill_shards(kb__shard_plan *p, const char *name, kb__err *err)
{
    int k = 0;
    int idx[N_LEVELS];
    for (idx[0] = 0; idx[0] < p->count[0]; idx[0]++)
        for (idx[1] = 0; idx[1] < p->count[1]; idx[1]++)
            for (idx[2] = 0; idx[2] < p->count[2]; idx[2]++) {
                int rb, cb, rep;
                digits(p, idx, &rb, &cb, &rep);
                kb__shard *s = &p->shards[k++];
                s->sip = p->base[0] + idx[0];
                s->cube = p->base[1] + idx[1];
                s->pe = p->base[2] + idx[2];
                s->row0 = s->col0 = 0;
                s->rows = p->rows;
                s->cols = p->cols;
                for (int l = 0; l < N_LEVELS; l++) {
                    if (p->mode[l] == KB_ROW_WISE)
                        split_block(&s->row0, &s->rows, p->count[l], idx[l]);
                    if (p->mode[l] == KB_COLUMN_WISE)
                        split_block(&s->col0, &s->cols, p->count[l], idx[l]);
                }
                uint64_t elems;
                if (__builtin_mul_overflow((uint64_t)s->rows, (uint64_t)s->cols, &elems) ||
                    __builtin_mul_overflow(elems, (uint64_t)p->mid, &elems) ||
                    __builtin_mul_overflow(elems, (uint64_t)p->elem_size, &s->bytes))
                    return kb__err_set(err, KB_EINVAL,
                                       "tensor %s: a shard of %" PRId64 " x %" PRId64 " x %" PRId64
                                       " elements of %zu bytes overflows 64 bits",
                                       name, s->rows, p->mid, s->cols, p->elem_size);
                if (s->bytes > p->max_bytes) p->max_bytes = s->bytes;
                s->region = rb * p->col_blocks + cb;
                s->replica = rep;
            }
    p->even = true;
    for (int i = 1; i < p->n_shards; i++)
        if (p->shards[i].bytes != p->shards[0].bytes) p->even = false;
    return 0;
}

int kb__shard_plan_make(kb__shard_plan *plan, const kb__shard_req *req, kb__err *err)
{
    memset(plan, 0, sizeof *plan);
    const char *name = req->name ? req->name : "(unnamed)";
    kb__shard_plan p = {0};
    int rc = check_shape(req, name, err);
    if (rc == 0) rc = resolve_levels(&p, req, name, err);
    if (rc) return rc;
    p.ndim = req->ndim;
    p.rows = req->ndim >= 2 ? req->shape[0] : 1;
    p.cols = req->shape[req->ndim - 1];
    p.mid = req->ndim == 3 ? req->shape[1] : 1;
    p.elem_size = req->elem_size;
    rc = check_splits(&p, req, name, err);
    if (rc) return rc;
    p.n_regions = p.row_blocks * p.col_blocks;
    p.n_shards = p.count[0] * p.count[1] * p.count[2];
    p.shards = calloc((size_t)p.n_shards, sizeof *p.shards);
    if (!p.shards)
        return kb__err_set(err, KB_ENOMEM, "tensor %s: out of host memory for %d shards", name,
                           p.n_shards);
    rc = fill_shards(&p, name, err);
    if (rc) {
        free(p.shards);
        return rc;
    }
    *plan = p;
    return 0;
}

void kb__shard_plan_fini(kb__shard_plan *plan)
{
    free(plan->shards);
    memset(plan, 0, sizeof *plan);
}

int kb__shard_locate(const kb__shard_plan *plan, int64_t i, int64_t j, int *region, int64_t *li,
                     int64_t *lj, kb__err *err)
{
    if (i < 0 || i >= plan->rows || j < 0 || j >= plan->cols)
        return kb__err_set(err, KB_ERANGE,
                           "element (%" PRId64 ", %" PRId64 ") is outside the %" PRId64
                           " x %" PRId64 " tensor",
                           i, j, plan->rows, plan->cols);
    for (int k = 0; k < plan->n_shards; k++) { /* blocks may differ in size: search */
        const kb__shard *s = &plan->shards[k];
        if (s->replica || i < s->row0 || i >= s->row0 + s->rows || j < s->col0 ||
            j >= s->col0 + s->cols)
            continue;
        *region = s->region;
        *li = i - s->row0;
        *lj = j - s->col0;
        return 0;
    }
    return kb__err_set(err, KB_ERANGE, "element (%" PRId64 ", %" PRId64 ") is in no shard", i, j);
}

int kb__shard_find(const kb__shard_plan *plan, int region, int replica)
{
    for (int k = 0; k < plan->n_shards; k++)
        if (plan->shards[k].region == region && plan->shards[k].replica == replica) return k;
    return -1;
}
