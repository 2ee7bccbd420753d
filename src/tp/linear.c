/*
 * linear.c — ColumnParallelLinear, RowParallelLinear and the two-layer MLP
 * (Megatron's names), one rank's part each.
 *
 * A layer spreads its weight slice (and bias) over the rank's PEs
 * (kb_tp_placement; by default every PE of its SIP, shared with the ranks
 * bound to the same SIP): a column layer's weight by columns, a row
 * layer's by rows, so one launch runs a program on each PE and a row
 * layer's PEs each hold a partial product of the whole output, which the
 * all-reduce sums over every PE of every rank. Construction is collective: the
 * ranks check, through the handshake of state.c, that they build the same
 * layer, so a rank that passed other sizes fails at once instead of
 * deadlocking in the row layer's all-reduce later. Forward:
 *
 *   column  y_local = act(x @ W[:, slice] + b[slice])      one GEMM launch
 *   row     y = all_reduce_sum(x_slice @ W[slice, :]) + b  GEMM, all-reduce,
 *                                                          bias launch
 *
 * Host weights are f32 row-major [in, out]; a column slice is gathered
 * into a host buffer before the copy, a row slice is copied in place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp/internal.h"

/* What a layer's ranks must agree on (handshake claims). */
enum {
    C_KIND,
    C_IN,
    C_OUT,
    C_DTYPE,
    C_BIAS,
    C_ACT,
    C_PES, /* up to here every rank must pass the same */
    C_SIP,
    C_CUBE,
    C_NCUBES,
    C_PE,
    C_NPES,
    C_COUNT
};

static const char *kind_name(kb_tp_kind kind)
{
    return kind == KB_TP_ROW ? "row parallel" : "column parallel";
}

static const char *act_name(int64_t act)
{
    return act == KB_TP_ACT_RELU ? "relu" : act == KB_TP_ACT_GELU ? "gelu" : "none";
}

static const char *ctor_name(kb_tp_kind kind)
{
    return kind == KB_TP_ROW ? "kb_tp_row_parallel_linear" : "kb_tp_column_parallel_linear";
}

/* ---- construction -------------------------------------------------------------- */

typedef struct build {
    kb_tp_linear *l;
    const kb_tp_linear_opts *o;
    char who[96]; /* "kb_tp_row_parallel_linear 'fc2'" */
} build;

/* The arguments one rank can check alone. */
static int check_args(const build *b, kb__err *e)
{
    const kb_tp_linear *l = b->l;
    const kb_tp_linear_opts *o = b->o;
    int64_t split = l->kind == KB_TP_ROW ? l->in_features : l->out_features;
    if (l->in_features < 1 || l->out_features < 1)
        return kb__err_set(e, KB_EINVAL, "%s: in_features %lld and out_features %lld must be >= 1",
                           b->who, (long long)l->in_features, (long long)l->out_features);
    if (split % l->tp_size)
        return kb__err_set(
            e, KB_EINVAL, "%s: %s %lld does not divide by the tensor-parallel size %d", b->who,
            l->kind == KB_TP_ROW ? "in_features" : "out_features", (long long)split, l->tp_size);
    if (l->dtype != KB_F16 && l->dtype != KB_BF16 && l->dtype != KB_F32)
        return kb__err_set(e, KB_EINVAL, "%s: dtype %s: expected f16, bf16 or f32", b->who,
                           kb_dtype_name(l->dtype));
    if ((unsigned)o->act > KB_TP_ACT_GELU)
        return kb__err_set(e, KB_EINVAL, "%s: activation %d: expected none, relu or gelu", b->who,
                           (int)o->act);
    if (l->kind == KB_TP_ROW && o->act != KB_TP_ACT_NONE)
        return kb__err_set(e, KB_EINVAL,
                           "%s: activation %s: a row parallel layer has none (it would apply "
                           "before the all-reduce); put it on the column layer",
                           b->who, act_name(o->act));
    if (!o->bias && o->bias_values)
        return kb__err_set(e, KB_EINVAL, "%s: bias_values given but bias is 0", b->who);
    int64_t local = split / l->tp_size;
    if (local % l->pes)
        return kb__err_set(e, KB_EINVAL,
                           "%s: %s %lld / tensor-parallel size %d = %lld %s per rank do not split "
                           "over the rank's %d PEs (kb_tp_set_pes_per_rank sets another count)",
                           b->who, l->kind == KB_TP_ROW ? "in_features" : "out_features",
                           (long long)split, l->tp_size, (long long)local,
                           l->kind == KB_TP_ROW ? "rows of the weight" : "columns", l->pes);
    return 0;
}

static void describe_claim(const int64_t *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s, in %lld, out %lld, %s, %s, act %s, %lld PEs per rank",
             kind_name((kb_tp_kind)c[C_KIND]), (long long)c[C_IN], (long long)c[C_OUT],
             kb_dtype_name((kb_dtype)c[C_DTYPE]), c[C_BIAS] ? "bias" : "no bias",
             act_name(c[C_ACT]), (long long)c[C_PES]);
}

/* Whether the PE blocks of claims a and c (from C_SIP) share a PE. */
static int overlap(const int64_t *a, const int64_t *c)
{
    const int64_t *p = a + C_SIP, *q = c + C_SIP; /* sip, cube, ncubes, pe, npes */
    return p[0] == q[0] && p[1] < q[1] + q[2] && q[1] < p[1] + p[2] && p[3] < q[3] + q[4] &&
           q[3] < p[3] + p[4];
}

/* Every rank builds the same layer; a row layer's ranks (tp > 1) sit on
 * disjoint PEs, since its all-reduce takes one buffer per PE (O(size^2)
 * pairs at worst). */
static int same_layer(const int64_t *all, int base, int world, void *ctx, kb__err *e)
{
    const build *b = ctx;
    for (int r = 1; r < world; r++) {
        const int64_t *c = all + (size_t)r * KB__TP_CLAIM_MAX;
        if (!memcmp(c, all, C_SIP * sizeof *c)) continue;
        char d0[160], dr[160];
        describe_claim(all, d0, sizeof d0);
        describe_claim(c, dr, sizeof dr);
        return kb__err_set(e, KB_EINVAL,
                           "%s: the ranks build different layers (every rank must pass the same "
                           "arguments): rank %d: %s; rank %d: %s",
                           b->who, base, d0, base + r, dr);
    }
    if (b->l->kind != KB_TP_ROW || b->l->tp_size == 1) return 0;
    for (int r = 1; r < world; r++)
        for (int q = 0; q < r; q++) {
            const int64_t *a = all + (size_t)q * KB__TP_CLAIM_MAX,
                          *c = all + (size_t)r * KB__TP_CLAIM_MAX;
            if (!overlap(a, c)) continue;
            return kb__err_set(e, KB_EINVAL,
                               "%s: ranks %d and %d both compute on sip%lld/cube%lld/pe%lld; a "
                               "rank's tensors live on its own PEs (kb_tp_placement) and the "
                               "all-reduce takes one buffer per PE, so the ranks need disjoint "
                               "PEs (kb_set_device moved one onto the other's)",
                               b->who, base + q, base + r, (long long)c[C_SIP],
                               (long long)(a[C_CUBE] > c[C_CUBE] ? a[C_CUBE] : c[C_CUBE]),
                               (long long)(a[C_PE] > c[C_PE] ? a[C_PE] : c[C_PE]));
        }
    return 0;
}

/* rows × cols of host (f32, row-major, leading dimension ld; NULL: zeros)
 * into a new tensor on the rank's PE; failures as "WHO: MESSAGE" in e. */
static int upload(kb_machine *m, const build *b, const char *part, int ndim, int64_t rows,
                  int64_t cols, const float *host, int64_t ld, kb_split split, kb_tensor *out,
                  kb__err *e)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%s", b->l->name, part);
    kb_policy p = b->l->placement;
    p.cube = p.pe = split;
    int64_t shape[2] = {ndim == 1 ? cols : rows, cols};
    kb_dtype dt = b->l->dtype;
    int rc = host ? kb_empty(m, name, ndim, shape, dt, &p, out)
                  : kb_zeros(m, name, ndim, shape, dt, &p, out);
    size_t n = (size_t)rows * (size_t)cols;
    float *buf = NULL;
    if (!rc && host && ld != cols) { /* a column slice: gather its rows */
        if (!(buf = malloc(n * sizeof *buf)))
            return kb__err_set(e, KB_ENOMEM, "%s: %s: out of host memory for the slice", b->who,
                               part);
        for (int64_t r = 0; r < rows; r++)
            memcpy(buf + r * cols, host + r * ld, (size_t)cols * sizeof *buf);
    }
    if (!rc && host) rc = kb_copy_from_host(m, *out, buf ? buf : host, n * sizeof *host, KB_F32);
    free(buf);
    return rc ? kb__err_set(e, rc, "%s: %s: %s", b->who, part, kb_last_error(m)) : 0;
}

/* The rank's weight slice and bias over its PEs: a column layer's weight
 * and bias split by columns, a row layer's weight by rows and its bias
 * replicated. */
static int place(kb_machine *m, const build *b, kb__err *e)
{
    kb_tp_linear *l = b->l;
    const float *w = b->o->weight, *bias = b->o->bias_values;
    int64_t row0 = l->kind == KB_TP_ROW ? l->tp_rank * l->in_local : 0;
    int64_t col0 = l->kind == KB_TP_ROW ? 0 : l->tp_rank * l->out_local;
    int rc = upload(m, b, "weight", 2, l->in_local, l->out_local,
                    w ? w + row0 * l->out_features + col0 : NULL, l->out_features,
                    l->kind == KB_TP_ROW ? KB_ROW_WISE : KB_COLUMN_WISE, &l->weight, e);
    if (rc || !b->o->bias) return rc;
    int64_t nb = l->kind == KB_TP_ROW ? l->out_features : l->out_local;
    return upload(m, b, "bias", 1, 1, nb, bias ? bias + col0 : NULL, nb,
                  l->kind == KB_TP_ROW ? KB_REPLICATE : KB_COLUMN_WISE, &l->bias, e);
}

static int create(kb_machine *m, kb_tp_linear *l, kb_tp_kind kind, const char *name,
                  int64_t in_features, int64_t out_features, kb_dtype dtype,
                  const kb_tp_linear_opts *opts)
{
    if (l) memset(l, 0, sizeof *l);
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    static const kb_tp_linear_opts none = {0};
    build b = {l, opts ? opts : &none, ""};
    if (!name) name = kind == KB_TP_ROW ? "row_parallel" : "column_parallel";
    snprintf(b.who, sizeof b.who, "%s '%.48s'", ctor_name(kind), name);
    if (!l) {
        kb__err_set(&e, KB_EINVAL, "%s: the layer pointer is NULL", b.who);
        return kb__tp_fail(m, &e);
    }
    *l = (kb_tp_linear){.kind = kind,
                        .in_features = in_features,
                        .out_features = out_features,
                        .dtype = dtype,
                        .act = b.o->act};
    snprintf(l->name, sizeof l->name, "%s", name);
    kb__tp_where_t w;
    if (kb__tp_state(m, b.who, &l->tp_size, &l->tp_rank, &e) || kb__tp_where(m, b.who, &w, &e)) {
        memset(l, 0, sizeof *l);
        return kb__tp_fail(m, &e);
    }
    l->pes = w.pes;
    l->sip = w.sip;
    l->placement = kb__tp_policy(&w, KB_REPLICATE);
    if (check_args(&b, &e)) {
        memset(l, 0, sizeof *l);
        return kb__tp_fail(m, &e);
    }
    l->in_local = kind == KB_TP_ROW ? in_features / l->tp_size : in_features;
    l->out_local = kind == KB_TP_ROW ? out_features : out_features / l->tp_size;
    int64_t claim[C_COUNT] = {kind,           in_features, out_features, dtype,
                              b.o->bias != 0, b.o->act,    w.pes,        w.sip,
                              w.first_cube,   w.num_cubes, w.first_pe,   w.num_pes};
    int rc = kb__tp_agree(m, ctor_name(kind), claim, C_COUNT, same_layer, &b, &e);
    if (rc) {
        memset(l, 0, sizeof *l);
        return kb__tp_fail(m, &e);
    }
    if ((rc = place(m, &b, &e))) {
        kb_tp_linear_free(m, l);
        return kb__tp_fail(m, &e);
    }
    return 0;
}

int kb_tp_column_parallel_linear(kb_machine *m, kb_tp_linear *l, const char *name,
                                 int64_t in_features, int64_t out_features, kb_dtype dtype,
                                 const kb_tp_linear_opts *opts)
{
    return create(m, l, KB_TP_COLUMN, name, in_features, out_features, dtype, opts);
}

int kb_tp_row_parallel_linear(kb_machine *m, kb_tp_linear *l, const char *name, int64_t in_features,
                              int64_t out_features, kb_dtype dtype, const kb_tp_linear_opts *opts)
{
    return create(m, l, KB_TP_ROW, name, in_features, out_features, dtype, opts);
}

int kb_tp_linear_free(kb_machine *m, kb_tp_linear *l)
{
    if (!m || !l) return KB_EINVAL;
    int rc = 0, rc2 = 0;
    if (l->weight.id) rc = kb_free(m, l->weight);
    if (l->bias.id) rc2 = kb_free(m, l->bias);
    memset(l, 0, sizeof *l);
    return rc ? rc : rc2;
}

/* ---- forward ----------------------------------------------------------------------- */

/* The PEs the layer was built on. */
static kb__tp_where_t where_of(const kb_tp_linear *l)
{
    const kb_policy *p = &l->placement;
    return (kb__tp_where_t){l->sip,      l->pes,     p->first_cube,   p->num_cubes,
                            p->first_pe, p->num_pes, p->num_sips == 0};
}

/* x is [tokens, in] of the layer's dtype placed where the layer computes
 * (a column layer's input replicated over its PEs, a row layer's split by
 * columns), and the caller is still bound to that SIP. */
static int check_input(kb_machine *m, const kb_tp_linear *l, kb_tensor x, const char *who,
                       kb__err *e)
{
    kb_tensor_info xi;
    int64_t in = l->kind == KB_TP_ROW ? l->in_local : l->in_features;
    int rc = kb_tensor_get_info(m, x, &xi);
    if (rc) return kb__err_set(e, rc, "%s: x: %s", who, kb_last_error(m));
    if (xi.ndim != 2 || xi.shape[1] != in || xi.dtype != l->dtype) {
        char got[64];
        if (xi.ndim == 2)
            snprintf(got, sizeof got, "%s [%lld, %lld]", kb_dtype_name(xi.dtype),
                     (long long)xi.shape[0], (long long)xi.shape[1]);
        else
            snprintf(got, sizeof got, "%s [%lld] (1-D)", kb_dtype_name(xi.dtype),
                     (long long)xi.shape[0]);
        char want[96];
        if (l->kind == KB_TP_ROW)
            snprintf(want, sizeof want,
                     "in_features %lld / tensor-parallel size %d: the rank's "
                     "slice",
                     (long long)l->in_features, l->tp_size);
        else
            snprintf(want, sizeof want, "in_features: the full input");
        return kb__err_set(e, KB_EINVAL, "%s: x '%s' is %s, expected %s [tokens, %lld] (%s)", who,
                           xi.name, got, kb_dtype_name(l->dtype), (long long)in, want);
    }
    kb__tp_where_t w = where_of(l);
    rc = kb__tp_check_layout(m, x, &w, l->kind == KB_TP_ROW ? KB_COLUMN_WISE : KB_REPLICATE, who,
                             "x", e);
    if (rc) return rc;
    if (kb__tp_sip(m) != l->sip)
        return kb__err_set(e, KB_ESTATE,
                           "%s: the rank is bound to SIP %d but the layer's weight is on SIP %d "
                           "(kb_set_device changed after the layer was built)",
                           who, kb__tp_sip(m), l->sip);
    return 0;
}

/* The launches and the collective of one forward into y; times in l->last.
 * The partial products of a row layer are reduced over every PE of every
 * rank of the group (tensor-parallel size × PEs per rank buffers). */
static int run(kb_machine *m, kb_tp_linear *l, kb_tensor x, kb_tensor y)
{
    char kname[64];
    int reduce = l->kind == KB_TP_ROW && l->tp_size * l->pes > 1;
    kb_tensor fused_bias = reduce ? (kb_tensor){0} : l->bias;
    snprintf(kname, sizeof kname, "%s.gemm", l->name);
    uint64_t t = kb_now_ps(m);
    int rc = kb__tp_gemm(m, kname, l->sip, x, l->weight, y, fused_bias, l->act);
    l->last.gemm_ps = kb_now_ps(m) - t;
    if (rc || !reduce) return rc;
    t = kb_now_ps(m);
    rc = kb_all_reduce_group(m, kb__tp_group(m), y, KB_SUM);
    l->last.all_reduce_ps = kb_now_ps(m) - t;
    if (rc || !l->bias.id) return rc;
    snprintf(kname, sizeof kname, "%s.bias", l->name);
    t = kb_now_ps(m);
    rc = kb__tp_bias_add(m, kname, l->sip, y, l->bias);
    l->last.bias_ps = kb_now_ps(m) - t;
    return rc;
}

int kb_tp_linear_forward(kb_machine *m, kb_tp_linear *l, kb_tensor x, kb_tensor *y)
{
    if (y) *y = (kb_tensor){0};
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    char who[96];
    snprintf(who, sizeof who, "kb_tp_linear_forward '%.48s' (%s)", l ? l->name : "",
             l ? kind_name(l->kind) : "");
    if (!l || !y || !l->weight.id)
        kb__err_set(&e, KB_EINVAL, "%s: %s", who,
                    !l || !y ? "the layer or y is NULL" : "the layer was not built (or was freed)");
    if (e.code || check_input(m, l, x, who, &e)) return kb__tp_fail(m, &e);
    memset(&l->last, 0, sizeof l->last);
    char yname[64];
    snprintf(yname, sizeof yname, "%s.y", l->name);
    kb_tensor_info xi;
    kb_tensor_get_info(m, x, &xi);
    kb_policy p = l->placement; /* a column layer's y split by columns, a row layer's replicated */
    p.cube = p.pe = l->kind == KB_TP_ROW ? KB_REPLICATE : KB_COLUMN_WISE;
    int64_t shape[2] = {xi.shape[0], l->out_local};
    int rc = kb_empty(m, yname, 2, shape, l->dtype, &p, y);
    if (!rc) rc = run(m, l, x, *y);
    if (!rc) return 0;
    kb__err_set(&e, rc, "%s: %s", who, kb_last_error(m));
    if (y->id) kb_free(m, *y);
    *y = (kb_tensor){0};
    return kb__tp_fail(m, &e);
}

/* ---- the MLP ---------------------------------------------------------------------------- */

int kb_tp_mlp_create(kb_machine *m, kb_tp_mlp *mlp, const char *name, int64_t hidden,
                     int64_t ffn_hidden, kb_dtype dtype, const kb_tp_linear_opts *fc1_opts,
                     const kb_tp_linear_opts *fc2_opts)
{
    if (mlp) memset(mlp, 0, sizeof *mlp);
    if (!m) return KB_EINVAL;
    if (!mlp) {
        kb__err e;
        kb__err_set(&e, KB_EINVAL, "kb_tp_mlp_create: the MLP pointer is NULL");
        return kb__tp_fail(m, &e);
    }
    char n1[64], n2[64];
    snprintf(n1, sizeof n1, "%.40s.fc1", name ? name : "mlp");
    snprintf(n2, sizeof n2, "%.40s.fc2", name ? name : "mlp");
    int rc = kb_tp_column_parallel_linear(m, &mlp->fc1, n1, hidden, ffn_hidden, dtype, fc1_opts);
    if (!rc) rc = kb_tp_row_parallel_linear(m, &mlp->fc2, n2, ffn_hidden, hidden, dtype, fc2_opts);
    if (!rc) return 0;
    kb__err e;
    kb__err_set(&e, rc, "kb_tp_mlp_create: %s", kb_last_error(m));
    kb_tp_mlp_free(m, mlp);
    return kb__tp_fail(m, &e);
}

int kb_tp_mlp_forward(kb_machine *m, kb_tp_mlp *mlp, kb_tensor x, kb_tensor *y)
{
    if (y) *y = (kb_tensor){0};
    if (!m) return KB_EINVAL;
    if (!mlp || !y) {
        kb__err e;
        kb__err_set(&e, KB_EINVAL, "kb_tp_mlp_forward: the MLP or y is NULL");
        return kb__tp_fail(m, &e);
    }
    kb_tensor h;
    int rc = kb_tp_linear_forward(m, &mlp->fc1, x, &h);
    if (rc) return rc;
    rc = kb_tp_linear_forward(m, &mlp->fc2, h, y);
    if (rc) {
        kb__err e;
        kb__err_set(&e, rc, "%s", kb_last_error(m));
        kb_free(m, h);
        return kb__tp_fail(m, &e);
    }
    return kb_free(m, h);
}

int kb_tp_mlp_free(kb_machine *m, kb_tp_mlp *mlp)
{
    if (!m || !mlp) return KB_EINVAL;
    int rc = kb_tp_linear_free(m, &mlp->fc1), rc2 = kb_tp_linear_free(m, &mlp->fc2);
    return rc ? rc : rc2;
}
