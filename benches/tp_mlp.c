/*
 * tp_mlp.c — bench tp_mlp: Megatron's tensor-parallel MLP (kernbench/tp.h),
 * y = RowParallel(act(ColumnParallel(x))), over `ranks` host ranks (default
 * one per SIP), each on its own block of PEs (kb_tp_placement; by default
 * every PE of its SIP, shared with the ranks bound to it; option pes), times `dp` replicas
 * (data parallelism: ranks x dp host ranks in all, tensor-parallel groups
 * of `ranks` consecutive ones; every replica runs the same x, and their
 * layers' collectives run side by side on their own PEs).
 *
 * Every rank builds the MLP from the same deterministic full host weights
 * (each copies its slice) and gets the full x [tokens, hidden]. A first
 * forward on one token (x's first row) warms up: the first all-reduce over
 * the ranks' PEs installs its queues, and an install is keyed by the
 * algorithm and the PEs, not the size, so the measured forward finds them
 * as after a full-size warm-up (the same simulated times) at a fraction of
 * its host cost; the measured region is the second: the MLP's two layers, with
 * a barrier after each (a barrier costs no simulated time), so the forward
 * splits into consecutive phases that add up to the measured time:
 *   fc1         the column layer: every rank's GEMM with bias and activation
 *   fc2_gemm    the row layer's GEMMs, up to the last rank's arrival in the
 *               all-reduce
 *   all_reduce  the collective itself: the shortest all-reduce call over the
 *               ranks (the last to arrive waits for nobody)
 *   fc2_bias    the bias launches after it (the longest call: all ranks
 *               leave the all-reduce together)
 * Each rank's launches are its own stream on its own PE (docs/runtime.md,
 * "Launch"), so the ranks' GEMMs of one phase run side by side.
 *
 * Checks. "ranks identical": every rank's y equals the one of the first
 * rank of its tensor-parallel group bit for bit (tolerance 0; the value is
 * the number of differing elements). Replicas may differ in the last bits:
 * their all-reduces sum over other PEs, in another order. "y
 * (normalized)": max over replicas and outputs of |y - ref| / S with S = sum_k |h_k
 * W2_kj| + |b2_j|, against a host reference in double from the same inputs
 * rounded to the dtype, with h rounded to the dtype as the device stores
 * it. Tolerance (p + 3) u + (hidden + ffn) 2^-24, u the dtype's unit
 * roundoff (f16 2^-11, bf16 2^-8, f32 2^-24), p the partial products
 * (ranks × PEs per rank): h may differ by one ulp where the f32 and double
 * sums round apart (2u), each PE's partial is rounded to the dtype (u),
 * the all-reduce adds p partials in the dtype (p - 1 roundings), the bias
 * add rounds once more (u); the
 * second term is the worst-case f32 accumulation bound (Higham's gamma_K)
 * of the two GEMMs' sums, counted against the same S.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kernbench/tp.h"

typedef struct tp_cfg {
    int64_t tokens, hidden, ffn, ranks, dp; /* ranks: the tensor-parallel size */
    int64_t pes;                            /* PEs per rank; 0: kb_tp_set_pes_per_rank's default */
    kb_dtype dtype;
    kb_tp_activation act;
    int bias;
} tp_cfg;

typedef struct tp_host {
    float *x, *w1, *b1, *w2, *b2; /* full arrays, rounded to the dtype */
} tp_host;

/* What the ranks share. */
typedef struct tp_run {
    const tp_cfg *c;
    const tp_host *h;
    kb_bench_result *r;
    int pes;             /* PEs per rank, as rank 0 resolved it */
    float *y;            /* [ranks × dp × tokens × hidden]: each host rank's output */
    kb_tp_times *times;  /* [ranks × dp]: the row layer's parts */
    uint64_t fc1_end_ps; /* when every rank's column layer was done */
} tp_run;

static int parse_enum(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

static int read_cfg(kb_machine *m, kb_bench_opts *o, kb_bench_result *r, tp_cfg *c)
{
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    int rc = kb_bench_opt_i64(o, "tokens", 64, 1, 1 << 16, &c->tokens);
    if (!rc) rc = kb_bench_opt_i64(o, "hidden", 256, 1, 1 << 16, &c->hidden);
    if (!rc) rc = kb_bench_opt_i64(o, "ffn", 1024, 1, 1 << 18, &c->ffn);
    if (!rc) rc = kb_bench_opt_i64(o, "ranks", sips, 1, (int64_t)sips * cubes * pes, &c->ranks);
    if (!rc) rc = kb_bench_opt_i64(o, "dp", 1, 1, (int64_t)sips * cubes * pes, &c->dp);
    if (!rc) rc = kb_bench_opt_bool(o, "bias", 1, &c->bias);
    if (!rc) rc = kb_bench_opt_i64(o, "pes", 0, 0, (int64_t)cubes * pes, &c->pes);
    if (rc) return rc;
    if (c->ranks * c->dp > (int64_t)sips * cubes * pes)
        return kb_bench_bad_option(r,
                                   "tp_mlp: --opt ranks=%lld x --opt dp=%lld host ranks, but the "
                                   "machine has %d PEs (one per host rank)",
                                   (long long)c->ranks, (long long)c->dp, sips * cubes * pes);
    static const char *const dtypes[] = {"f16", "bf16", "f32"}, *const acts[] = {"none", "relu",
                                                                                 "gelu"};
    const char *dt = kb_bench_opt_str(o, "dtype", "f16"), *act = kb_bench_opt_str(o, "act", "gelu");
    int d = parse_enum(dt, dtypes, 3), a = parse_enum(act, acts, 3);
    if (d < 0)
        return kb_bench_bad_option(r, "tp_mlp: --opt dtype=%s: expected f16, bf16 or f32", dt);
    if (a < 0)
        return kb_bench_bad_option(r, "tp_mlp: --opt act=%s: expected none, relu or gelu", act);
    c->dtype = d == 0 ? KB_F16 : d == 1 ? KB_BF16 : KB_F32;
    c->act = (kb_tp_activation)a;
    if (c->ffn % c->ranks)
        return kb_bench_bad_option(r, "tp_mlp: --opt ffn=%lld does not divide by ranks = %lld",
                                   (long long)c->ffn, (long long)c->ranks);
    if (c->pes && (c->pes <= pes ? pes % c->pes : c->pes % pes))
        return kb_bench_bad_option(r,
                                   "tp_mlp: --opt pes=%lld: expected 0 (a SIP's PEs shared by its "
                                   "ranks), a divisor of the %d PEs of a cube or a multiple of it",
                                   (long long)c->pes, pes);
    return 0;
}

/* ---- the ranks -------------------------------------------------------------------- */

static int input(kb_machine *m, const tp_cfg *c, const float *x, int64_t tokens, kb_tensor *out)
{
    kb_policy p;
    int64_t shape[2] = {tokens, c->hidden};
    int rc = kb_tp_placement(m, &p);
    if (!rc) rc = kb_empty(m, "x", 2, shape, c->dtype, &p, out);
    if (!rc) rc = kb_copy_from_host(m, *out, x, (size_t)(tokens * c->hidden) * sizeof *x, KB_F32);
    return rc;
}

/* Every rank is here; rank 0 then runs `mark` (no rank launches before it). */
static int all_here(kb_machine *m, int rank, void (*mark)(kb_bench_result *), kb_bench_result *r)
{
    int rc = kb_barrier(m);
    if (!rc && rank == 0 && mark) mark(r);
    return rc;
}

/* One forward, layer by layer, into *y; with measure, rank 0 marks the
 * measured region and the end of the column layer. */
static int forward(kb_machine *m, int rank, tp_run *u, kb_tp_mlp *mlp, kb_tensor x, int measure,
                   kb_tensor *y)
{
    kb_tensor hid = {0};
    kb_bench_result *r = u->r;
    int rc = all_here(m, rank, measure ? kb_bench_measure_begin : NULL, r);
    if (!rc) rc = all_here(m, rank, NULL, r);
    if (!rc) rc = kb_tp_linear_forward(m, &mlp->fc1, x, &hid);
    if (!rc) rc = all_here(m, rank, NULL, r);
    if (!rc && rank == 0) u->fc1_end_ps = kb_now_ps(m);
    if (!rc) rc = kb_tp_linear_forward(m, &mlp->fc2, hid, y);
    if (!rc) rc = all_here(m, rank, measure ? kb_bench_measure_end : NULL, r);
    if (hid.id) kb_free(m, hid);
    return rc;
}

/* Builds the MLP and runs the forward twice: a warm-up on one token (the
 * first all-reduce over the ranks' PEs installs its queues), then the
 * measured one, whose output is kept. */
static int rank_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    tp_run *u = arg;
    const tp_cfg *c = u->c;
    const tp_host *h = u->h;
    kb_tp_mlp mlp = {0};
    kb_tensor x = {0}, x0 = {0}, y[2] = {{0}, {0}};
    kb_tp_linear_opts o1 = {h->w1, c->bias, c->bias ? h->b1 : NULL, c->act},
                      o2 = {h->w2, c->bias, c->bias ? h->b2 : NULL, 0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel(m, (int)c->ranks);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, (int)c->pes);
    if (!rc && rank == 0) rc = kb_tp_get_pes_per_rank(m, &u->pes);
    if (!rc) rc = kb_tp_mlp_create(m, &mlp, "mlp", c->hidden, c->ffn, c->dtype, &o1, &o2);
    /* the warm-up on one token: it installs the same queues (an install is
       keyed by the algorithm and the PEs, not the size) */
    if (!rc) rc = input(m, c, h->x, 1, &x0);
    if (!rc) rc = forward(m, rank, u, &mlp, x0, 0, &y[0]);
    if (!rc) rc = input(m, c, h->x, c->tokens, &x);
    if (!rc) rc = forward(m, rank, u, &mlp, x, 1, &y[1]);
    size_t n = (size_t)(c->tokens * c->hidden);
    if (!rc && !u->r->no_data)
        rc = kb_copy_to_host(m, y[1], u->y + (size_t)rank * n, n * sizeof *u->y, KB_F32);
    u->times[rank] = mlp.fc2.last;
    kb_tensor t[4] = {x0, x, y[0], y[1]};
    for (int i = 0; i < 4; i++)
        if (t[i].id) kb_free(m, t[i]);
    kb_tp_mlp_free(m, &mlp);
    return rc;
}

/* ---- host data and reference ---------------------------------------------------- */

static void fill(float *a, size_t n, uint64_t seed, double bound, kb_dtype dt)
{
    kb__bench_fill(a, n, seed, -bound, bound);
    kb__bench_round(a, n, dt);
}

/* The host inputs; with no_data (no bytes move, nothing is checked) zeros,
 * which the copies never read. */
static int host_init(const tp_cfg *c, tp_host *h, int no_data)
{
    size_t nx = (size_t)(c->tokens * c->hidden), nw = (size_t)(c->hidden * c->ffn);
    h->x = calloc(nx, sizeof(float));
    h->w1 = calloc(nw, sizeof(float)), h->w2 = calloc(nw, sizeof(float));
    h->b1 = calloc((size_t)c->ffn, sizeof(float)), h->b2 = calloc((size_t)c->hidden, sizeof(float));
    if (!h->x || !h->w1 || !h->w2 || !h->b1 || !h->b2) return KB_ENOMEM;
    if (no_data) return 0;
    fill(h->x, nx, 61, 1.0, c->dtype);
    fill(h->w1, nw, 62, 1.0 / sqrt((double)c->hidden), c->dtype);
    fill(h->b1, (size_t)c->ffn, 63, 0.1, c->dtype);
    fill(h->w2, nw, 64, 1.0 / sqrt((double)c->ffn), c->dtype);
    fill(h->b2, (size_t)c->hidden, 65, 0.1, c->dtype);
    return 0;
}

static void host_free(tp_host *h)
{
    free(h->x), free(h->w1), free(h->b1), free(h->w2), free(h->b2);
}

static double act_ref(double v, kb_tp_activation act)
{
    if (act == KB_TP_ACT_RELU) return v > 0 ? v : 0;
    if (act == KB_TP_ACT_GELU)
        return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    return v;
}

/* One row of a [K] @ w [K, N] + b into out[N] (double), and into mag[N]
 * the sum of the terms' magnitudes (NULL: not wanted). */
static void ref_row(const float *a, const float *w, const float *b, int64_t K, int64_t N,
                    double *out, double *mag)
{
    for (int64_t j = 0; j < N; j++) {
        out[j] = b ? b[j] : 0;
        if (mag) mag[j] = b ? fabs(b[j]) : 0;
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) {
            double p = (double)a[k] * w[k * N + j];
            out[j] += p;
            if (mag) mag[j] += fabs(p);
        }
}

/* max over outputs of |y - ref| / S (see the header); NaN for a NaN. */
static double normalized_err(const tp_cfg *c, const tp_host *h, const float *y)
{
    double *acc = malloc((size_t)(c->ffn + 2 * c->hidden) * sizeof *acc);
    float *hrow = malloc((size_t)c->ffn * sizeof *hrow);
    if (!acc || !hrow) {
        free(acc), free(hrow);
        return NAN;
    }
    double e = 0, *ref = acc + c->ffn, *mag = ref + c->hidden;
    for (int64_t t = 0; t < c->tokens; t++) {
        ref_row(h->x + t * c->hidden, h->w1, c->bias ? h->b1 : NULL, c->hidden, c->ffn, acc, NULL);
        for (int64_t k = 0; k < c->ffn; k++)
            hrow[k] = (float)act_ref(acc[k], c->act);
        kb__bench_round(hrow, (size_t)c->ffn, c->dtype);
        ref_row(hrow, h->w2, c->bias ? h->b2 : NULL, c->ffn, c->hidden, ref, mag);
        for (int64_t j = 0; j < c->hidden; j++) {
            double d = fabs(y[t * c->hidden + j] - ref[j]) / (mag[j] > 0 ? mag[j] : 1);
            if (isnan(d)) e = NAN;
            if (!isnan(e) && d > e) e = d;
        }
    }
    free(acc), free(hrow);
    return e;
}

static void check(kb_bench_result *r, const tp_cfg *c, const tp_host *h, const tp_run *u)
{
    size_t n = (size_t)(c->tokens * c->hidden);
    double differ = 0, e = 0;
    for (int64_t k = 0; k < c->ranks * c->dp; k++) {
        const float *first = u->y + (size_t)(k / c->ranks * c->ranks) * n; /* its group's rank 0 */
        for (size_t i = 0; i < n; i++)
            differ += memcmp(&u->y[(size_t)k * n + i], &first[i], sizeof *first) != 0;
        if (k % c->ranks) continue; /* the group's other ranks hold the same bytes */
        double ek = normalized_err(c, h, u->y + (size_t)k * n);
        e = isnan(ek) || isnan(e) ? NAN : fmax(e, ek);
    }
    kb_bench_check(r, "ranks identical", differ, 0);
    double ur = c->dtype == KB_F16    ? ldexp(1, -11)
                : c->dtype == KB_BF16 ? ldexp(1, -8)
                                      : ldexp(1, -24);
    double p = (double)(c->ranks * u->pes);
    double tol = (p + 3) * ur + (double)(c->hidden + c->ffn) * ldexp(1, -24);
    kb_bench_check(r, "y (normalized)", e, tol);
}

/* The phases of the header comment, in microseconds. */
static void figures(kb_bench_result *r, const tp_cfg *c, const tp_run *u)
{
    uint64_t reduce = UINT64_MAX, bias = 0;
    for (int64_t k = 0; k < c->ranks * c->dp; k++) {
        reduce = u->times[k].all_reduce_ps < reduce ? u->times[k].all_reduce_ps : reduce;
        bias = u->times[k].bias_ps > bias ? u->times[k].bias_ps : bias;
    }
    uint64_t fc1 = u->fc1_end_ps - r->begin_ps, fc2 = r->end_ps - u->fc1_end_ps;
    kb_bench_figure(r, "fc1", (double)fc1 / 1e6, "us");
    kb_bench_figure(r, "fc2_gemm", (double)(fc2 - reduce - bias) / 1e6, "us");
    kb_bench_figure(r, "all_reduce", (double)reduce / 1e6, "us");
    kb_bench_figure(r, "fc2_bias", (double)bias / 1e6, "us");
    kb_bench_figure(r, "ranks", (double)c->ranks, "");
    kb_bench_figure(r, "dp", (double)c->dp, "");
    kb_bench_figure(r, "PEs per rank", (double)u->pes, "");
    kb_bench_figure(r, "PEs", (double)(c->ranks * c->dp * u->pes), "");
    kb_bench_figure(r, "useful FLOP", 4.0 * (double)c->tokens * (double)c->hidden * (double)c->ffn,
                    "");
    kb_bench_note(r, "placement",
                  "rank r on sip r mod SIPs, its (r / SIPs)-th block of PEs; each rank's "
                  "launches are its own stream, one program per PE");
}

static int tp_mlp(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    tp_cfg c;
    int rc = read_cfg(m, o, r, &c);
    if (rc) return rc;
    tp_host h = {0};
    tp_run u = {&c, &h, r, 0, NULL, NULL, 0};
    u.y = malloc((size_t)(c.ranks * c.dp * c.tokens * c.hidden) * sizeof *u.y);
    u.times = calloc((size_t)(c.ranks * c.dp), sizeof *u.times);
    if (!u.y || !u.times || host_init(&c, &h, r->no_data)) {
        rc = kb_bench_fail(r, KB_ENOMEM, "tp_mlp: cannot allocate host buffers");
    } else if ((rc = kb_spawn(m, rank_fn, (int)(c.ranks * c.dp), &u))) {
        kb_bench_fail(r, rc, "tp_mlp: %s", kb_last_error(m));
    } else {
        figures(r, &c, &u);
        if (!r->no_data) check(r, &c, &h, &u);
    }
    host_free(&h);
    free(u.y);
    free(u.times);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"tokens", "64", "rows of x (batch x sequence)"},
    {"hidden", "256", "hidden size: x [tokens, hidden], y the same"},
    {"ffn", "1024", "the MLP's inner size (must divide by ranks)"},
    {"dtype", "f16", "f16, bf16 or f32 for x, W and y (f32 accumulation)"},
    {"act", "gelu", "activation after the column layer: none, relu or gelu"},
    {"bias", "true", "both layers add a bias"},
    {"ranks", "SIPs", "tensor-parallel size: host ranks of one replica"},
    {"dp", "1", "data-parallel replicas (ranks x dp host ranks, at most one per PE)"},
    {"pes", "0",
     "PEs per rank (kb_tp_set_pes_per_rank): 0 = a SIP's PEs shared by its ranks, "
     "else a divisor or multiple of a cube's PEs; ffn / ranks must divide by it"},
};

const kb_bench kb__bench_tp_mlp = {
    "tp_mlp", "Megatron tensor-parallel MLP: column GEMM, row GEMM, all-reduce over host ranks",
    opts, (int)(sizeof opts / sizeof opts[0]), tp_mlp};
