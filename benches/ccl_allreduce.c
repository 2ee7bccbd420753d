/*
 * ccl_allreduce.c — bench ccl_allreduce: an all-reduce over collective
 * ranks (PEs), with the algorithm's bandwidth against the α-β model.
 *
 * The buffer is an f32 tensor [world, n] split by rows, one row (`bytes`
 * bytes) per PE: world <= PEs per cube takes the first PEs of cube 0; up
 * to a SIP, whole cubes from cube 0 on, of SIP 0 or of the SIP --device
 * binds (kb_set_device); beyond, whole SIPs. The
 * collective's ranks are those PEs (docs/ccl.md). kb_init_process_group
 * installs the queues of the default algorithm over every PE; with other
 * options the measured all-reduce installs its own first (the `install`
 * figure; the measured region includes it, the `collective` figure not).
 *
 * Figures: collective = the kernel's launch to completion, t; algBW =
 * bytes / t, busBW = algBW × 2(p−1)/p (the bytes each rank's links carry
 * in a ring); kernel_span = the programs' span on the PEs, the α-β
 * prediction 2(p−1)α + 2(p−1)/p · N·β of src/ccl/alphabeta.h with α and β
 * from the machine along the ring, and ratio = kernel_span / prediction.
 *
 * Check: element i of rank r is ((7r + i) mod 13) − 6, small integers, so
 * every partial sum is exact in f32 and the result must equal the host sum
 * exactly (tolerance 0) on every rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ccl_config.h"
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

/* The placement of world ranks described above; KB_EINVAL otherwise. */
static int placement(kb_machine *m, int64_t world, kb_policy *p, kb_bench_result *r)
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
                                   "ccl_allreduce: --opt world=%lld has no placement: use 2..%d, "
                                   "a multiple of %d up to %lld, or a multiple of %lld up to %lld",
                                   (long long)world, pes, pes, (long long)per_sip,
                                   (long long)per_sip, (long long)per_sip * sips);
    }
    return 0;
}

/* Longest "ccl.algorithms.NAME.buffer_kind=KIND" with NAME and KIND
 * shorter than an option value. */
#define SET_MAX (2 * KB_BENCH_VALUE_MAX + 32)

/* ccl.yaml overrides for the options, written to sets; returns how many,
 * or a negative status (message in r). `buffer` goes to the algorithm that
 * will run: the one named, else the configuration's all_reduce default.
 * algorithm and buffer are checked already (check_names). */
static int overrides(kb_machine *m, const char *algorithm, const char *buffer,
                     char sets[2][SET_MAX], kb_bench_result *r)
{
    int n = 0;
    char def[KB_BENCH_VALUE_MAX];
    if (algorithm) snprintf(sets[n++], SET_MAX, "ccl.defaults.algorithm.all_reduce=%s", algorithm);
    if (buffer && !algorithm) {
        int rc = kb_ccl_default_algorithm(m, "all_reduce", def, sizeof def);
        if (rc)
            return kb_bench_fail(r, rc, "ccl_allreduce: --opt buffer=%s: %s", buffer,
                                 kb_last_error(m));
        algorithm = def; /* a loaded name follows the rule: it makes a path part */
    }
    if (buffer) snprintf(sets[n++], SET_MAX, "ccl.algorithms.%s.buffer_kind=%s", algorithm, buffer);
    return n;
}

/* The options' values checked before they go into an override. */
static int check_names(const char *algorithm, const char *buffer, int64_t bytes, kb_bench_result *r)
{
    /* ccl.yaml's rule for algorithm names: neither YAML syntax nor a path
     * separator can ride into the overrides on the value. */
    if (algorithm && !kb__ccl_name_ok(algorithm))
        return kb_bench_bad_option(r,
                                   "ccl_allreduce: --opt algorithm=%s: expected an algorithm "
                                   "name of " KB__CCL_NAME_RULE,
                                   algorithm);
    if (buffer && strcmp(buffer, "tcm") && strcmp(buffer, "sram") && strcmp(buffer, "hbm"))
        return kb_bench_bad_option(r, "ccl_allreduce: --opt buffer=%s: expected tcm, sram or hbm",
                                   buffer);
    if (bytes % 4)
        return kb_bench_bad_option(r, "ccl_allreduce: --opt bytes=%lld: not a multiple of 4 (f32)",
                                   (long long)bytes);
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

/* Reads the reduced rows back one at a time and compares every rank's row
 * with the plain host sum over ranks, in rank order (13-periodic like the
 * inputs). */
static int check(kb_machine *m, kb_tensor t, kb_bench_result *r, float *row, int64_t world,
                 int64_t n)
{
    float pat[13], sum[13] = {0};
    for (int64_t rk = 0; rk < world; rk++) {
        fill_row(pat, rk, 13);
        for (int j = 0; j < 13; j++)
            sum[j] += pat[j];
    }
    float *want = malloc((size_t)n * sizeof *want);
    if (!want) return KB_ENOMEM;
    repeat13(want, sum, n);
    int rc = 0;
    float err = 0;
    int nan = 0;
    for (int64_t rk = 0; !rc && rk < world; rk++) {
        rc = kb_copy_rows_to_host(m, t, rk, 1, row, (size_t)n * sizeof *row, KB_F32);
        /* the sums are exact: a row that matches bit for bit has error 0 */
        if (rc || !memcmp(row, want, (size_t)n * sizeof *row)) continue;
        for (int64_t i = 0; i < n; i++) {
            float d = fabsf(row[i] - want[i]);
            err = d > err ? d : err;
            nan |= d != d;
        }
    }
    if (!rc) kb_bench_check(r, "sum", nan ? (double)NAN : (double)err, 0.0);
    free(want);
    return rc;
}

static void report(kb_bench_result *r, int64_t world, int64_t bytes)
{
    kb_ccl_report c;
    if (kb_ccl_last(r->m, &c)) return;
    double t_ps = (double)(c.end_ps - c.start_ps), run_ps = (double)(c.run_end_ps - c.run_start_ps);
    double p = (double)world, alg = t_ps > 0 ? (double)bytes / (t_ps * 1e-12) / 1e9 : 0;
    kb_bench_note(r, "algorithm", "%s", c.algorithm); /* whole: <= KB__CCL_NAME_MAX */
    kb_bench_note(r, "queues", "%d x %llu B slots in %s, messages of up to %llu B", c.n_slots,
                  (unsigned long long)c.slot_size, c.buffer_kind,
                  (unsigned long long)c.piece_bytes);
    kb_bench_figure(r, "world", p, "ranks");
    kb_bench_figure(r, "bytes_per_rank", (double)bytes, "B");
    kb_bench_figure(r, "install", (double)c.install_ps / 1e6, "us");
    kb_bench_figure(r, "collective", t_ps / 1e6, "us");
    kb_bench_figure(r, "kernel_span", run_ps / 1e6, "us");
    kb_bench_figure(r, "alg_bw", alg, "GB/s");
    kb_bench_figure(r, "bus_bw", alg * 2 * (p - 1) / p, "GB/s");
    if (c.predicted_ps) {
        kb_bench_figure(r, "alpha", c.alpha_ps / 1e3, "ns");
        kb_bench_figure(r, "beta_bw", c.beta_ps_per_byte > 0 ? 1e3 / c.beta_ps_per_byte : 0,
                        "GB/s");
        kb_bench_figure(r, "link_bw", c.link_bw_gbs, "GB/s");
        kb_bench_figure(r, "rs_bw_term", (double)c.phase_ps[0] / 1e6, "us");
        kb_bench_figure(r, "ag_bw_term", (double)c.phase_ps[1] / 1e6, "us");
        kb_bench_figure(r, "alpha_beta", (double)c.predicted_ps / 1e6, "us");
        kb_bench_figure(r, "ratio", run_ps / (double)c.predicted_ps, "");
        kb_bench_note(r, "rs_bound", "%s", c.bottleneck[0]);
        kb_bench_note(r, "ag_bound", "%s", c.bottleneck[1]);
    }
}

static int ccl_allreduce(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    int64_t world, bytes;
    int rc = kb_bench_opt_i64(o, "world", (int64_t)sips * cubes * pes, 2,
                              (int64_t)sips * cubes * pes, &world);
    if (!rc) rc = kb_bench_opt_i64(o, "bytes", 1 << 20, 4, (int64_t)1 << 30, &bytes);
    if (rc) return rc;
    const char *algorithm = kb_bench_opt_str(o, "algorithm", NULL);
    const char *buffer = kb_bench_opt_str(o, "buffer", NULL);
    if ((rc = check_names(algorithm, buffer, bytes, r))) return rc;
    kb_policy p;
    if ((rc = placement(m, world, &p, r))) return rc;
    char sets[2][SET_MAX];
    const char *setv[2] = {sets[0], sets[1]};
    int n_sets = overrides(m, algorithm, buffer, sets, r);
    if (n_sets < 0) return n_sets;
    if (n_sets && (rc = kb_ccl_override(m, setv, (size_t)n_sets))) {
        /* a name or kind the configuration does not know: a bad option value */
        r->usage_error = rc == KB_ECONFIG || rc == KB_ENOTFOUND;
        char typed[2][KB_BENCH_VALUE_MAX + 32] = {"", ""};
        if (algorithm) snprintf(typed[0], sizeof typed[0], " --opt algorithm=%s", algorithm);
        if (buffer) snprintf(typed[1], sizeof typed[1], " --opt buffer=%s", buffer);
        return kb_bench_fail(r, rc, "ccl_allreduce:%s%s: %s", typed[0], typed[1], kb_last_error(m));
    }
    int64_t n = bytes / 4, shape[2] = {world, n};
    float *row = malloc((size_t)n * sizeof *row);
    if (!row) return kb_bench_fail(r, KB_ENOMEM, "ccl_allreduce: cannot allocate a host row");
    kb_tensor t = {0};
    rc = kb_empty(m, "buf", 2, shape, KB_F32, &p, &t);
    int init_rc = rc ? 0 : kb_init_process_group(m, "ahbm");
    if (init_rc == KB_ECONFIG) /* the settings do not fit the default world: not --opt world */
        kb_bench_bad_option(r,
                            "ccl_allreduce: kb_init_process_group installs the default all_reduce "
                            "over its default world first (every PE unless "
                            "ccl.defaults.world_size says otherwise): %s",
                            kb_last_error(m));
    if (!rc) rc = init_rc;
    if (!rc && !r->no_data) rc = fill_and_copy(m, t, row, world, n);
    if (!rc) {
        kb_bench_measure_begin(r);
        rc = kb_all_reduce(m, t, KB_SUM);
        kb_bench_measure_end(r);
    }
    if (!rc) report(r, world, bytes);
    if (!rc && !r->no_data) rc = check(m, t, r, row, world, n);
    if (rc == KB_ECONFIG && !r->error[0]) /* the algorithm cannot run on this world */
        kb_bench_bad_option(r, "ccl_allreduce: --opt world=%lld%s%s: %s", (long long)world,
                            algorithm ? " --opt algorithm=" : "", algorithm ? algorithm : "",
                            kb_last_error(m));
    if (rc && !r->error[0]) kb_bench_fail(r, rc, "ccl_allreduce: %s", kb_last_error(m));
    if (t.id) kb_free(m, t);
    free(row);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"algorithm", "ring_allreduce",
     "ccl.yaml all_reduce algorithm (ring_allreduce, "
     "mesh_allreduce, tree_allreduce, ...)"},
    {"buffer", "tcm", "where the receive queues live: tcm, sram or hbm"},
    {"world", "all PEs", "collective ranks: 2..PEs per cube, whole cubes of SIP 0, or whole SIPs"},
    {"bytes", "1048576", "bytes per rank (f32, a multiple of 4)"},
};

const kb_bench kb__bench_ccl_allreduce = {
    "ccl_allreduce",
    "all-reduce over PEs through the inter-PE queues, against the alpha-beta model", opts,
    (int)(sizeof opts / sizeof opts[0]), ccl_allreduce};
