/*
 * ccl.c — the collective benches, one per collective as nccl-tests has
 * them: ccl_allreduce (an all-reduce with the algorithm's bandwidth
 * against the α-β model), ccl_reduce_scatter, ccl_all_gather,
 * ccl_broadcast, ccl_reduce and ccl_all_to_all; and hello_send, the
 * queues' point-to-point test (send_recv: every rank sends its buffer to
 * NEXT), which the collective runner runs directly (no public call does).
 *
 * The input is an f32 tensor [world, n] split by rows, one row (`bytes`
 * bytes) per PE: world <= PEs per cube takes the first PEs of cube 0; up
 * to a SIP, whole cubes from cube 0 on, of SIP 0 or of the SIP --device
 * binds (kb_set_device); beyond, whole SIPs. The output, for the
 * collectives that have one, is placed the same way with the rows each
 * needs (reduce_scatter n/p, all_gather p·n, all_to_all n). The
 * collective's ranks are those PEs (docs/ccl.md). kb_init_process_group
 * installs the queues of the default all_reduce over every PE; other
 * collectives and options install their own first (the `install` figure;
 * the measured region includes it, the `collective` figure not).
 *
 * Figures, with nccl-tests' definitions: collective = the kernel's launch
 * to completion, t; algBW = S / t with S the bytes of one rank's buffer
 * (all_gather: its output, p rows); busBW = algBW × 2(p−1)/p for
 * all_reduce, × (p−1)/p for reduce_scatter, all_gather and all_to_all, × 1
 * for broadcast and reduce: the bytes each rank's links carry in the bandwidth-optimal
 * algorithm, so busBW compares with the link bandwidth whatever p. For
 * the all-reduce, kernel_span = the programs' span on the PEs, the α-β
 * prediction 2(p−1)α + 2(p−1)/p · N·β of src/ccl/alphabeta.h with α and β
 * from the machine along the ring, and ratio = kernel_span / prediction.
 *
 * Check: element i of rank r's input is ((7r + i) mod 13) − 6, small
 * integers, so every partial sum is exact in f32; every output row must
 * equal its plain host definition exactly (tolerance 0): the sum over
 * ranks (all_reduce, reduce_scatter's chunk r, reduce's row 0), rank j's
 * row (all_gather's block j, broadcast's from rank 0, reduce's other rows:
 * unchanged), rank j's chunk r (all_to_all's chunk j).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ccl_config.h"
#include "ccl/collective.h"
#include "internal.h"
#include "kernbench/dist.h"

/* Fills row[0..n) with the 13 values of pat repeated: the first period,
 * then copies of what is written so far, doubling (memcpy-fast). */
static void repeat13(float *row, const float pat[13], int64_t n)
{
    int64_t have = n < 13 ? n : 13;
    memcpy(row, pat, (size_t)have * sizeof *row);
    while (have < n) {
        int64_t take = have / 13 * 13 < n - have ? have / 13 * 13 : n - have;
        memcpy(row + have, row, (size_t)take * sizeof *row);
        have += take;
    }
}

/* Element i of rank r, ((7r + i) mod 13) - 6: a function of i mod 13 for
 * each rank, so a row is its 13-periodic pattern repeated. */
static void fill_row(float *row, int64_t rank, int64_t n)
{
    float pat[13];
    for (int j = 0; j < 13; j++)
        pat[j] = (float)((7 * rank + j) % 13 - 6);
    repeat13(row, pat, n);
}

/* One bench: its collective and its defaults. */
typedef struct spec {
    const char *bench;      /* its name, which starts its messages */
    const char *collective; /* the ccl.yaml name */
    kb__ccl_collective kind;
    int64_t world; /* default world, 0: every PE */
    int64_t bytes; /* default bytes per rank */
} spec;

/* Output row length for an input row of n elements over p ranks, 0 when
 * the collective works in place. */
static int64_t out_elems(const spec *s, int64_t n, int64_t p)
{
    switch (s->kind) {
    case KB__CCL_REDUCE_SCATTER:
        return n / p;
    case KB__CCL_ALL_GATHER:
        return n * p;
    case KB__CCL_ALL_TO_ALL:
        return n;
    default:
        return 0;
    }
}

/* The placement of world ranks described above; KB_EINVAL otherwise. */
static int placement(kb_machine *m, const spec *s, int64_t world, kb_policy *p, kb_bench_result *r)
{
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    int64_t per_sip = (int64_t)cubes * pes;
    /* within one SIP: the bound one (num_sips 0 defers to kb_set_device), else SIP 0 */
    int one_sip = kb_get_device(m) >= 0 ? 0 : 1;
    *p = (kb_policy){KB_REPLICATE, KB_REPLICATE, KB_ROW_WISE, one_sip, 1, 1, 0, 0};
    if (world <= pes) {
        p->num_pes = (int)world;
    } else if (world <= per_sip && world % pes == 0) {
        p->cube = KB_ROW_WISE, p->num_cubes = (int)(world / pes), p->num_pes = pes;
    } else if (world % per_sip == 0 && world / per_sip <= sips) {
        p->sip = p->cube = KB_ROW_WISE;
        p->num_sips = (int)(world / per_sip), p->num_cubes = cubes, p->num_pes = pes;
    } else {
        return kb_bench_bad_option(r,
                                   "%s: --opt world=%lld has no placement: use 2..%d, "
                                   "a multiple of %d up to %lld, or a multiple of %lld up to %lld",
                                   s->bench, (long long)world, pes, pes, (long long)per_sip,
                                   (long long)per_sip, (long long)per_sip * sips);
    }
    return 0;
}

/* Longest "ccl.algorithms.NAME.buffer_kind=KIND" with NAME and KIND
 * shorter than an option value. */
#define SET_MAX (2 * KB_BENCH_VALUE_MAX + 32)

/* ccl.yaml overrides for the options, written to sets; returns how many,
 * or a negative status (message in r). `buffer` goes to the algorithm that
 * will run: the one named, else the configuration's default for the
 * collective. algorithm and buffer are checked already (check_options). */
static int overrides(kb_machine *m, const spec *s, const char *algorithm, const char *buffer,
                     char sets[2][SET_MAX], kb_bench_result *r)
{
    int n = 0;
    char def[KB_BENCH_VALUE_MAX];
    if (algorithm)
        snprintf(sets[n++], SET_MAX, "ccl.defaults.algorithm.%s=%s", s->collective, algorithm);
    if (buffer && !algorithm) {
        int rc = kb_ccl_default_algorithm(m, s->collective, def, sizeof def);
        if (rc)
            return kb_bench_fail(r, rc, "%s: --opt buffer=%s: %s", s->bench, buffer,
                                 kb_last_error(m));
        algorithm = def; /* a loaded name follows the rule: it makes a path part */
    }
    if (buffer) snprintf(sets[n++], SET_MAX, "ccl.algorithms.%s.buffer_kind=%s", algorithm, buffer);
    return n;
}

/* The options' values checked before they go into an override or make a
 * tensor. */
static int check_options(const spec *s, const char *algorithm, const char *buffer, int64_t bytes,
                         int64_t world, kb_bench_result *r)
{
    /* ccl.yaml's rule for algorithm names: neither YAML syntax nor a path
     * separator can ride into the overrides on the value. */
    if (algorithm && !kb__ccl_name_ok(algorithm))
        return kb_bench_bad_option(r,
                                   "%s: --opt algorithm=%s: expected an algorithm "
                                   "name of " KB__CCL_NAME_RULE,
                                   s->bench, algorithm);
    if (buffer && strcmp(buffer, "tcm") && strcmp(buffer, "sram") && strcmp(buffer, "hbm"))
        return kb_bench_bad_option(r, "%s: --opt buffer=%s: expected tcm, sram or hbm", s->bench,
                                   buffer);
    if (bytes % 4)
        return kb_bench_bad_option(r, "%s: --opt bytes=%lld: not a multiple of 4 (f32)", s->bench,
                                   (long long)bytes);
    int chunks = s->kind == KB__CCL_REDUCE_SCATTER || s->kind == KB__CCL_ALL_TO_ALL;
    if (chunks && bytes / 4 % world)
        return kb_bench_bad_option(r,
                                   "%s: --opt bytes=%lld: %lld f32 elements do not split into "
                                   "%lld equal chunks (--opt world): use a multiple of %lld bytes",
                                   s->bench, (long long)bytes, (long long)(bytes / 4),
                                   (long long)world, (long long)(4 * world));
    return 0;
}

/* --opt placement: rows[r] := the row (buffer) whose PE runs rank r.
 * "default" (0 returned, rows untouched): the placement order; "reverse";
 * "stride:K" (rank r on row r·K mod world, K coprime to world); or a comma
 * list of the world's rows, each once. 1 when rows is set, or a negative
 * status (message in r). */
static int parse_placement(const spec *s, const char *v, int64_t world, int64_t *rows,
                           kb_bench_result *r)
{
    if (!v || !strcmp(v, "default")) return 0;
    if (!strcmp(v, "reverse")) {
        for (int64_t i = 0; i < world; i++)
            rows[i] = world - 1 - i;
        return 1;
    }
    char *end;
    if (!strncmp(v, "stride:", 7)) {
        long long k = strtoll(v + 7, &end, 10);
        int64_t a = k, b = world;
        while (b) { /* gcd(k, world) */
            int64_t rem = a % b;
            a = b;
            b = rem;
        }
        if (end == v + 7 || *end || k < 1 || k >= world || a != 1)
            return kb_bench_bad_option(r,
                                       "%s: --opt placement=%s: expected stride:K with K from 1 "
                                       "to %lld sharing no factor with the world %lld",
                                       s->bench, v, (long long)(world - 1), (long long)world);
        for (int64_t i = 0; i < world; i++)
            rows[i] = i * k % world;
        return 1;
    }
    int64_t n = 0;
    const char *p = v;
    while (*p) {
        long long x = strtoll(p, &end, 10);
        if (end == p || (*end && *end != ',') || x < 0 || x >= world || n == world)
            return kb_bench_bad_option(r,
                                       "%s: --opt placement=%s: expected default, reverse, "
                                       "stride:K or a comma list of the %lld rows 0..%lld, each "
                                       "once (entry %lld)",
                                       s->bench, v, (long long)world, (long long)(world - 1),
                                       (long long)n);
        for (int64_t j = 0; j < n; j++)
            if (rows[j] == x)
                return kb_bench_bad_option(r,
                                           "%s: --opt placement=%s: row %lld is given twice "
                                           "(entries %lld and %lld)",
                                           s->bench, v, x, (long long)j, (long long)n);
        rows[n++] = x;
        p = *end ? end + 1 : end;
    }
    if (n != world)
        return kb_bench_bad_option(r,
                                   "%s: --opt placement=%s: %lld entries for a world of %lld "
                                   "(one row per rank)",
                                   s->bench, v, (long long)n, (long long)world);
    return 1;
}

/* Installs the queues of the algorithm that will run (named or the
 * collective's default) with rank r on the PE of row rows[r] of t. */
static int place_ranks(kb_machine *m, const spec *s, const char *algorithm, kb_tensor t,
                       int64_t world, const int64_t *rows, kb_bench_result *r)
{
    char def[KB_BENCH_VALUE_MAX];
    if (!algorithm && kb_ccl_default_algorithm(m, s->collective, def, sizeof def))
        return kb_bench_fail(r, KB_ENOTFOUND, "%s: --opt placement: %s", s->bench,
                             kb_last_error(m));
    kb_pe_loc *row_pe = malloc((size_t)world * sizeof *row_pe),
              *map = malloc((size_t)world * sizeof *map);
    int rc = row_pe && map ? 0 : KB_ENOMEM;
    for (int i = 0; !rc && i < world; i++) {
        kb_shard_info si;
        rc = kb_tensor_get_shard(m, t, i, &si);
        if (!rc && si.offset[0] >= 0 && si.offset[0] < world)
            row_pe[si.offset[0]] = (kb_pe_loc){si.sip, si.cube, si.pe};
    }
    for (int64_t i = 0; !rc && i < world; i++)
        map[i] = row_pe[rows[i]];
    if (!rc) rc = kb_ccl_install(m, algorithm ? algorithm : def, map, (int)world);
    free(row_pe);
    free(map);
    if (rc) return kb_bench_fail(r, rc, "%s: --opt placement: %s", s->bench, kb_last_error(m));
    return 0;
}

/* Copies each rank's row in through one row-sized host buffer: the host
 * never holds the whole tensor. */
static int fill_and_copy(kb_machine *m, kb_tensor t, float *row, int64_t world, int64_t n)
{
    int rc = 0;
    for (int64_t rk = 0; rk < world && !rc; rk++) {
        fill_row(row, rk, n);
        rc = kb_copy_rows_from_host(m, t, rk, 1, row, (size_t)n * sizeof *row, KB_F32);
    }
    return rc;
}

/* dst[0..len) := element i of the 13-periodic pat at off + i. */
static void pattern_at(float *dst, const float pat[13], int64_t off, int64_t len)
{
    float rot[13];
    for (int j = 0; j < 13; j++)
        rot[j] = pat[(off + j) % 13];
    repeat13(dst, rot, len);
}

/* want[0..) := what rank r's output row (its buffer for the in-place
 * collectives) must hold, from the plain definitions over the inputs:
 * sum is the 13-periodic sum over the p ranks. */
static void expect_row(const spec *s, int64_t r, int64_t p, int64_t n, const float sum[13],
                       float *want)
{
    float pat[13];
    int64_t c = n / p;
    switch (s->kind) {
    case KB__CCL_REDUCE_SCATTER: /* chunk r of the sum */
        pattern_at(want, sum, r * c, c);
        break;
    case KB__CCL_ALL_GATHER: /* rank j's row in block j */
        for (int64_t j = 0; j < p; j++)
            fill_row(want + j * n, j, n);
        break;
    case KB__CCL_BROADCAST: /* rank 0's row */
        fill_row(want, 0, n);
        break;
    case KB__CCL_REDUCE: /* the sum on rank 0, the others as they were */
        if (r)
            fill_row(want, r, n);
        else
            repeat13(want, sum, n);
        break;
    case KB__CCL_SEND_RECV: /* hello_send changes no buffer */
        fill_row(want, r, n);
        break;
    case KB__CCL_ALL_TO_ALL: /* rank j's chunk r in chunk j */
        for (int64_t j = 0; j < p; j++) {
            fill_row(pat, j, 13);
            pattern_at(want + j * c, pat, r * c, c);
        }
        break;
    default: /* the sum */
        repeat13(want, sum, n);
        break;
    }
}

/* Reads the result rows back one at a time and compares each with
 * expect_row. */
static int check(kb_machine *m, const spec *s, kb_tensor t, kb_bench_result *r, int64_t world,
                 int64_t n)
{
    int64_t len = out_elems(s, n, world) ? out_elems(s, n, world) : n;
    float pat[13], sum[13] = {0};
    for (int64_t rk = 0; rk < world; rk++) {
        fill_row(pat, rk, 13);
        for (int j = 0; j < 13; j++)
            sum[j] += pat[j];
    }
    float *want = malloc((size_t)len * sizeof *want), *row = malloc((size_t)len * sizeof *row);
    int rc = want && row ? 0 : KB_ENOMEM;
    float err = 0;
    int nan = 0;
    for (int64_t rk = 0; !rc && rk < world; rk++) {
        rc = kb_copy_rows_to_host(m, t, rk, 1, row, (size_t)len * sizeof *row, KB_F32);
        if (rc) break;
        expect_row(s, rk, world, n, sum, want);
        /* the values are exact: a row that matches bit for bit has error 0 */
        if (!memcmp(row, want, (size_t)len * sizeof *row)) continue;
        for (int64_t i = 0; i < len; i++) {
            float d = fabsf(row[i] - want[i]);
            err = d > err ? d : err;
            nan |= d != d;
        }
    }
    if (!rc) kb_bench_check(r, s->collective, nan ? (double)NAN : (double)err, 0.0);
    free(want);
    free(row);
    return rc;
}

/* nccl-tests' bus bandwidth factor for p ranks. */
static double bus_factor(const spec *s, double p)
{
    switch (s->kind) {
    case KB__CCL_ALL_REDUCE:
        return 2 * (p - 1) / p;
    case KB__CCL_BROADCAST:
    case KB__CCL_REDUCE:
    case KB__CCL_SEND_RECV:
        return 1;
    default:
        return (p - 1) / p;
    }
}

static void report(kb_bench_result *r, const spec *s, int64_t world, int64_t bytes,
                   const kb_ccl_report *cp)
{
    const kb_ccl_report c = *cp;
    /* the ring chains, the all-to-alls and the mesh and tree all-reduces
     * have one bandwidth term (alphabeta.h: kb__ccl_chain_model_get,
     * kb__ccl_a2a_model_get, kb__ccl_tree_model_get) */
    int chain = s->kind == KB__CCL_BROADCAST || s->kind == KB__CCL_REDUCE ||
                s->kind == KB__CCL_SEND_RECV || s->kind == KB__CCL_ALL_TO_ALL ||
                (s->kind == KB__CCL_ALL_REDUCE && !c.phase_ps[1]); /* mesh, tree */
    double t_ps = (double)(c.end_ps - c.start_ps), run_ps = (double)(c.run_end_ps - c.run_start_ps);
    double p = (double)world,
           size = s->kind == KB__CCL_ALL_GATHER ? (double)bytes * p : (double)bytes;
    double alg = t_ps > 0 ? size / (t_ps * 1e-12) / 1e9 : 0;
    kb_bench_note(r, "algorithm", "%s", c.algorithm); /* whole: <= KB__CCL_NAME_MAX */
    kb_bench_note(r, "queues", "%d x %llu B slots in %s, messages of up to %llu B", c.n_slots,
                  (unsigned long long)c.slot_size, c.buffer_kind,
                  (unsigned long long)c.piece_bytes);
    kb_bench_figure(r, "world", p, "ranks");
    kb_bench_figure(r, "bytes_per_rank", (double)bytes, "B");
    kb_bench_figure(r, "install", (double)c.install_ps / 1e6, "us");
    kb_bench_figure(r, "collective", t_ps / 1e6, "us");
    kb_bench_figure(r, "kernel_span", run_ps / 1e6, "us");
    if (c.calibrated)
        kb_bench_note(r, "calibrated", "%d ring streams (docs/timing-model.md)", c.calibrated);
    kb_bench_figure(r, "alg_bw", alg, "GB/s");
    kb_bench_figure(r, "bus_bw", alg * bus_factor(s, p), "GB/s");
    if (c.predicted_ps) {
        kb_bench_figure(r, "alpha", c.alpha_ps / 1e3, "ns");
        kb_bench_figure(r, "beta_bw", c.beta_ps_per_byte > 0 ? 1e3 / c.beta_ps_per_byte : 0,
                        "GB/s");
        kb_bench_figure(r, "link_bw", c.link_bw_gbs, "GB/s");
        if (c.phase_ps[0])
            kb_bench_figure(r, chain ? "bw_term" : "rs_bw_term", (double)c.phase_ps[0] / 1e6, "us");
        if (c.phase_ps[1]) kb_bench_figure(r, "ag_bw_term", (double)c.phase_ps[1] / 1e6, "us");
        if (c.ends_ps) kb_bench_figure(r, "fill_drain", (double)c.ends_ps / 1e6, "us");
        kb_bench_figure(r, "alpha_beta", (double)c.predicted_ps / 1e6, "us");
        kb_bench_figure(r, "ratio", run_ps / (double)c.predicted_ps, "");
        if (c.phase_ps[0]) kb_bench_note(r, chain ? "bound" : "rs_bound", "%s", c.bottleneck[0]);
        if (c.phase_ps[1]) kb_bench_note(r, "ag_bound", "%s", c.bottleneck[1]);
        if (c.off_fit[0])
            kb_bench_note(r, "off_fit",
                          "the prediction may stray beyond 10 %% (docs/ccl.md, \"Other queue "
                          "geometries\"): %s",
                          c.off_fit);
    }
}

/* hello_send (send_recv) over t's shards, which no public call runs: the
 * collective runner directly; its report into rep. */
static int send_recv(kb_machine *m, kb_tensor t, kb_ccl_report *rep, kb_bench_result *r)
{
    kb__coll_req q = {.kind = KB__CCL_SEND_RECV, .op = KB_SUM, .n = 1, .in = &t};
    kb__coll_info info;
    kb__err err;
    kb__err_clear(&err);
    memset(&info, 0, sizeof info);
    int rc = kb__ccl_run(m, &q, &info, &err);
    if (rc) return kb_bench_fail(r, rc, "hello_send: %s", err.msg);
    kb__ccl_report_of(&info, rep);
    return 0;
}

/* The measured call: t is the input (the buffer of the in-place ones),
 * out the output. */
static int call(kb_machine *m, const spec *s, kb_tensor out, kb_tensor t)
{
    switch (s->kind) {
    case KB__CCL_REDUCE_SCATTER:
        return kb_reduce_scatter(m, out, t, KB_SUM);
    case KB__CCL_ALL_GATHER:
        return kb_all_gather(m, out, t);
    case KB__CCL_BROADCAST:
        return kb_broadcast(m, t, 0);
    case KB__CCL_ALL_TO_ALL:
        return kb_all_to_all(m, out, t);
    case KB__CCL_REDUCE:
        return kb_reduce(m, t, 0, KB_SUM);
    default:
        return kb_all_reduce(m, t, KB_SUM);
    }
}

static int run_spec(kb_machine *m, kb_bench_opts *o, kb_bench_result *r, const spec *s)
{
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    int64_t world, bytes, all = (int64_t)sips * cubes * pes;
    int rc = kb_bench_opt_i64(o, "world", s->world ? s->world : all, 2, all, &world);
    if (!rc) rc = kb_bench_opt_i64(o, "bytes", s->bytes, 4, (int64_t)1 << 30, &bytes);
    if (rc) return rc;
    const char *algorithm = kb_bench_opt_str(o, "algorithm", NULL);
    const char *buffer = kb_bench_opt_str(o, "buffer", NULL);
    if ((rc = check_options(s, algorithm, buffer, bytes, world, r))) return rc;
    const char *placed = kb_bench_opt_str(o, "placement", NULL);
    int64_t *rows = malloc((size_t)world * sizeof *rows);
    if (!rows) return kb_bench_fail(r, KB_ENOMEM, "%s: cannot allocate the placement", s->bench);
    int custom = parse_placement(s, placed, world, rows, r);
    if (custom < 0) {
        free(rows);
        return custom;
    }
    kb_policy p;
    if ((rc = placement(m, s, world, &p, r))) {
        free(rows);
        return rc;
    }
    char sets[2][SET_MAX];
    const char *setv[2] = {sets[0], sets[1]};
    int n_sets = overrides(m, s, algorithm, buffer, sets, r);
    if (n_sets < 0) {
        free(rows);
        return n_sets;
    }
    if (n_sets && (rc = kb_ccl_override(m, setv, (size_t)n_sets))) {
        free(rows);
        /* a name or kind the configuration does not know: a bad option value */
        r->usage_error = rc == KB_ECONFIG || rc == KB_ENOTFOUND;
        char typed[2][KB_BENCH_VALUE_MAX + 32] = {"", ""};
        if (algorithm) snprintf(typed[0], sizeof typed[0], " --opt algorithm=%s", algorithm);
        if (buffer) snprintf(typed[1], sizeof typed[1], " --opt buffer=%s", buffer);
        return kb_bench_fail(r, rc, "%s:%s%s: %s", s->bench, typed[0], typed[1], kb_last_error(m));
    }
    int64_t n = bytes / 4, shape[2] = {world, n}, oshape[2] = {world, out_elems(s, n, world)};
    float *row = malloc((size_t)n * sizeof *row);
    if (!row) {
        free(rows);
        return kb_bench_fail(r, KB_ENOMEM, "%s: cannot allocate a host row", s->bench);
    }
    kb_tensor t = {0}, out = {0};
    rc = kb_empty(m, "buf", 2, shape, KB_F32, &p, &t);
    if (!rc && oshape[1]) rc = kb_empty(m, "out", 2, oshape, KB_F32, &p, &out);
    int init_rc = rc ? 0 : kb_init_process_group(m, "ahbm");
    if (init_rc == KB_ECONFIG) /* the settings do not fit the default world: not --opt world */
        kb_bench_bad_option(r,
                            "%s: kb_init_process_group installs the default all_reduce "
                            "over its default world first (every PE unless "
                            "ccl.defaults.world_size says otherwise): %s",
                            s->bench, kb_last_error(m));
    if (!rc) rc = init_rc;
    if (!rc && !r->no_data) rc = fill_and_copy(m, t, row, world, n);
    if (!rc && custom) rc = place_ranks(m, s, algorithm, t, world, rows, r);
    if (!rc && custom) kb_bench_note(r, "placement", "%s (installed before the measure)", placed);
    kb_ccl_report rep;
    if (!rc) {
        kb_bench_measure_begin(r);
        rc = s->kind == KB__CCL_SEND_RECV ? send_recv(m, t, &rep, r) : call(m, s, out, t);
        kb_bench_measure_end(r);
    }
    if (!rc && (s->kind == KB__CCL_SEND_RECV || !kb_ccl_last(m, &rep)))
        report(r, s, world, bytes, &rep);
    if (!rc && !r->no_data) rc = check(m, s, oshape[1] ? out : t, r, world, n);
    if (rc == KB_ECONFIG && !r->error[0]) /* the algorithm cannot run on this world */
        kb_bench_bad_option(r, "%s: --opt world=%lld%s%s: %s", s->bench, (long long)world,
                            algorithm ? " --opt algorithm=" : "", algorithm ? algorithm : "",
                            kb_last_error(m));
    if (rc && !r->error[0]) kb_bench_fail(r, rc, "%s: %s", s->bench, kb_last_error(m));
    if (out.id) kb_free(m, out);
    if (t.id) kb_free(m, t);
    free(row);
    free(rows);
    return rc;
}

#define KIB 1024

static const spec ALL_REDUCE = {"ccl_allreduce", "all_reduce", KB__CCL_ALL_REDUCE, 0, 1024 * KIB};
static const spec REDUCE_SCATTER = {"ccl_reduce_scatter", "reduce_scatter", KB__CCL_REDUCE_SCATTER,
                                    0, 1024 * KIB};
static const spec ALL_GATHER = {"ccl_all_gather", "all_gather", KB__CCL_ALL_GATHER, 0, 4 * KIB};
static const spec BROADCAST = {"ccl_broadcast", "broadcast", KB__CCL_BROADCAST, 0, 1024 * KIB};
static const spec REDUCE = {"ccl_reduce", "reduce", KB__CCL_REDUCE, 0, 1024 * KIB};
static const spec ALL_TO_ALL = {"ccl_all_to_all", "all_to_all", KB__CCL_ALL_TO_ALL, 16, 64 * KIB};
static const spec HELLO_SEND = {"hello_send", "send_recv", KB__CCL_SEND_RECV, 16, 64 * KIB};

static int ccl_allreduce(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    return run_spec(m, o, r, &ALL_REDUCE);
}
static int ccl_reduce_scatter(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    return run_spec(m, o, r, &REDUCE_SCATTER);
}
static int ccl_all_gather(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    return run_spec(m, o, r, &ALL_GATHER);
}
static int ccl_broadcast(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    return run_spec(m, o, r, &BROADCAST);
}
static int ccl_reduce(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    return run_spec(m, o, r, &REDUCE);
}
static int ccl_all_to_all(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    return run_spec(m, o, r, &ALL_TO_ALL);
}
static int hello_send(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    return run_spec(m, o, r, &HELLO_SEND);
}

#define BUFFER_DOC                                                                                 \
    {                                                                                              \
        "buffer", "tcm", "where the receive queues live: tcm, sram or hbm"                         \
    }
#define WORLD_DOC(def)                                                                             \
    {                                                                                              \
        "world", def, "collective ranks: 2..PEs per cube, whole cubes of SIP 0, or whole SIPs"     \
    }
#define PLACEMENT_DOC                                                                              \
    {                                                                                              \
        "placement", "default",                                                                    \
            "rank -> buffer row: default, reverse, stride:K or a comma list (kb_ccl_install)"      \
    }
/* The options of a collective's bench: alg is its built-in default algorithm. */
#define OPTS(coll, alg, world, bytes, bytes_doc)                                                   \
    {                                                                                              \
        {"algorithm", alg, "ccl.yaml " coll " algorithm (default: the configuration's)"},          \
            BUFFER_DOC, WORLD_DOC(world), {"bytes", bytes, bytes_doc}, PLACEMENT_DOC,              \
    }

static const kb_bench_opt_doc ar_opts[] = {
    {"algorithm", "ring_allreduce",
     "ccl.yaml all_reduce algorithm (ring_allreduce, "
     "mesh_allreduce, tree_allreduce, ...)"},
    BUFFER_DOC,
    WORLD_DOC("all PEs"),
    {"bytes", "1048576", "bytes per rank (f32, a multiple of 4)"},
    PLACEMENT_DOC,
};
static const kb_bench_opt_doc rs_opts[] =
    OPTS("reduce_scatter", "ring_reduce_scatter", "all PEs", "1048576",
         "bytes of each rank's input (f32; its N elements must split into world chunks)");
static const kb_bench_opt_doc ag_opts[] =
    OPTS("all_gather", "ring_all_gather", "all PEs", "4096", "bytes of each rank's input (f32)");
static const kb_bench_opt_doc bc_opts[] = OPTS("broadcast", "ring_broadcast", "all PEs", "1048576",
                                               "bytes per rank (f32); rank 0 is the source");
static const kb_bench_opt_doc red_opts[] = OPTS("reduce", "ring_reduce", "all PEs", "1048576",
                                                "bytes per rank (f32); rank 0 gets the sum");
static const kb_bench_opt_doc a2a_opts[] =
    OPTS("all_to_all", "ring_all_to_all", "16", "65536",
         "bytes of each rank's input (f32; its N elements must split into world chunks)");

static const kb_bench_opt_doc hello_opts[] =
    OPTS("send_recv", "hello_send", "16", "65536",
         "bytes per rank (f32); each rank sends them to NEXT, buffers unchanged");

#define N_OPTS(v) ((int)(sizeof v / sizeof v[0]))

const kb_bench kb__bench_ccl_allreduce = {
    "ccl_allreduce",
    "all-reduce over PEs through the inter-PE queues, against the alpha-beta model", ar_opts,
    N_OPTS(ar_opts), ccl_allreduce};
const kb_bench kb__bench_ccl_reduce_scatter = {
    "ccl_reduce_scatter", "reduce-scatter over PEs, with nccl-tests' bus bandwidth", rs_opts,
    N_OPTS(rs_opts), ccl_reduce_scatter};
const kb_bench kb__bench_ccl_all_gather = {"ccl_all_gather",
                                           "all-gather over PEs, with nccl-tests' bus bandwidth",
                                           ag_opts, N_OPTS(ag_opts), ccl_all_gather};
const kb_bench kb__bench_ccl_broadcast = {"ccl_broadcast",
                                          "broadcast from rank 0 over PEs, with nccl-tests' bus "
                                          "bandwidth",
                                          bc_opts, N_OPTS(bc_opts), ccl_broadcast};
const kb_bench kb__bench_ccl_reduce = {"ccl_reduce",
                                       "reduce (sum) to rank 0 over PEs, with nccl-tests' bus "
                                       "bandwidth",
                                       red_opts, N_OPTS(red_opts), ccl_reduce};
const kb_bench kb__bench_ccl_all_to_all = {
    "ccl_all_to_all",
    "all-to-all over PEs (chunks forwarded along the ring), with nccl-tests' bus "
    "bandwidth",
    a2a_opts, N_OPTS(a2a_opts), ccl_all_to_all};
const kb_bench kb__bench_hello_send = {
    "hello_send",
    "every rank sends its buffer to the next over the inter-PE queues, against the alpha-beta "
    "model",
    hello_opts, N_OPTS(hello_opts), hello_send};
