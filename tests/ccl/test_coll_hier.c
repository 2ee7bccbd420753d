/*
 * Hierarchical collectives (topology `hierarchical`: a ring inside each
 * SIP's group of ranks, a ring between the peers of the groups): the plan's
 * ports, every buffer of hier_allreduce, hier_reduce_scatter and
 * hier_all_gather against the
 * host reference (sum, max, min, avg; f16 and f32; groups of 1 to 16 ranks,
 * one or two SIPs), the α-β prediction the runner reports and the time
 * within 10 % of it for bandwidth-bound sizes, and the errors for worlds
 * that do not split evenly over the SIPs.
 */
#include "ccl/alphabeta.h"
#include "ccl/coll_fixture.h"
#include "support/ab.h"
#include "ccl/plan.h"
#include "runtime/machine.h"

#define N 37 /* elements per buffer: not a multiple of any world */

static kb__ccl_plan *hier_plan(const kb__topo_params *p, uint32_t ws, kb__ccl_config **c)
{
    const char *text = "algorithms:\n  h: {module: hier_allreduce, topology: hierarchical}\n";
    kb__err err;
    cr_assert_eq(kb__ccl_config_load_string(c, "t.yaml", text, strlen(text), NULL, 0, &err), 0,
                 "%s", err.msg);
    kb__ccl_resolved r;
    kb__ccl_plan *pl;
    cr_assert_eq(kb__ccl_resolve(&(*c)->algos[0], p, ws, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_plan_build(&pl, p, &r, &err), 0, "%s", err.msg);
    return pl;
}

Test(coll_hier, ports_are_the_group_ring_and_the_peers_ring)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    p.system.sips = 4;
    uint32_t per_sip = kb__topo_cubes_per_sip(&p) * kb__topo_pes_per_cube(&p), ws = 4 * per_sip;
    kb__ccl_config *c;
    kb__ccl_plan *pl = hier_plan(&p, ws, &c);
    cr_assert_eq(pl->group, per_sip);
    for (uint32_t r = 0; r < ws; r++) {
        uint32_t g = r / per_sip, l = r % per_sip;
        cr_assert_eq(pl->loc[r].sip, g);
        cr_assert_eq(pl->ports[r][KB__CCL_E].peer, (int)(g * per_sip + (l + 1) % per_sip));
        cr_assert_eq(pl->ports[r][KB__CCL_W].peer,
                     (int)(g * per_sip + (l + per_sip - 1) % per_sip));
        cr_assert_eq(pl->ports[r][KB__CCL_S].peer, (int)((r + per_sip) % ws));
        cr_assert_eq(pl->ports[r][KB__CCL_N].peer, (int)((r + ws - per_sip) % ws));
        /* peers sit on the same PE of the same cube of their SIPs */
        kb__ccl_loc a = pl->loc[r], b = pl->ports[r][KB__CCL_S].loc;
        cr_assert(a.cube == b.cube && a.pe == b.pe && a.sip != b.sip);
        cr_assert_eq(pl->ports[r][KB__CCL_S].path, KB__CCL_PATH_CROSS_SIP);
    }
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    /* inside one SIP there are no peers: a plain ring */
    pl = hier_plan(&p, 8, &c);
    cr_assert_eq(pl->group, 8u);
    cr_assert_eq(pl->ports[0][KB__CCL_S].peer, -1);
    cr_assert_eq(pl->ports[0][KB__CCL_E].peer, 1);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
}

Test(coll_hier, a_world_that_does_not_split_evenly_over_the_sips_is_refused)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    const char *text = "algorithms:\n  h: {module: hier_allreduce, topology: hierarchical}\n";
    kb__ccl_config *c;
    kb__err err;
    cr_assert_eq(kb__ccl_config_load_string(&c, "t.yaml", text, strlen(text), NULL, 0, &err), 0);
    kb__ccl_resolved r;
    cr_assert_eq(kb__ccl_resolve(&c->algos[0], &p, 130, &r, &err), KB_ECONFIG);
    cr_expect(strstr(err.msg, "a world size of at most 128 (one SIP) or a multiple of it, not 130"),
              "%s", err.msg);
    /* a PE set with 3 PEs on SIP 0 and 1 on SIP 1 */
    cr_assert_eq(kb__ccl_resolve(&c->algos[0], &p, 4, &r, &err), 0, "%s", err.msg);
    kb__ccl_loc set[4] = {{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {1, 0, 0}};
    kb__ccl_plan *pl;
    cr_assert_eq(kb__ccl_plan_build_on(&pl, &p, &r, set, 4, &err), KB_ECONFIG);
    cr_expect(strstr(err.msg, "as many ranks on every SIP") && strstr(err.msg, "sip0 has 3"), "%s",
              err.msg);
    kb__ccl_config_destroy(c);
    /* and through a collective call, with the machine still usable after */
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, N, KB_F32, 1);
    kb_policy pol = {KB_COLUMN_WISE, KB_COLUMN_WISE, KB_COLUMN_WISE, 2, 1, 1, 0, 5}; /* PE 5 */
    int64_t shape = 2 * N;
    kb_tensor u;
    cr_assert_eq(kb_empty(m, "u", 1, &shape, KB_F32, &pol, &u), 0, "%s", kb_last_error(m));
    kb_tensor both[2] = {t, u}; /* 4 buffers on SIP 0, 1 on SIP 1 each */
    kb__coll_req req = {
        KB__CCL_ALL_REDUCE, KB_SUM, "hier_allreduce", 2, both, NULL, 0, NULL, 0, 0, NULL};
    kb__err_clear(&err);
    int rc = kb__ccl_run(m, &req, NULL, &err);
    cr_assert_eq(rc, KB_ECONFIG, "%d: %s", rc, err.msg);
    cr_expect(strstr(err.msg, "sip0 has 5"), "%s", err.msg);
    cf_check_all_reduce(m, t, "hier_allreduce", KB_SUM, 4, N, KB_F32, NULL);
    kb_close(m);
}

/* Every buffer of an all-reduce, for each op and dtype, over the worlds:
 * one group (2, 8 in a cube; 16 over two cubes) and two groups of 1, 2, 8. */
static void allreduce_matrix(const char *kind)
{
    char set[128];
    snprintf(set, sizeof set, "ccl.algorithms.hier_allreduce.buffer_kind=%s", kind);
    const char *sets[] = {set};
    kb_machine *m = cf_open(sets, 1);
    static const struct {
        cf_place where;
        int w;
    } worlds[] = {{CF_ONE_CUBE, 2}, {CF_ONE_CUBE, 8}, {CF_CUBES, 16},
                  {CF_TWO_SIPS, 2}, {CF_TWO_SIPS, 4}, {CF_TWO_SIPS, 16}};
    static const kb_reduce_op ops[] = {KB_SUM, KB_MAX, KB_MIN, KB_AVG};
    static const kb_dtype dts[] = {KB_F16, KB_F32};
    for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++)
        for (size_t o = 0; o < 4; o++)
            for (size_t d = 0; d < 2; d++) {
                kb_tensor t = cf_tensor(m, "x", worlds[i].where, worlds[i].w, N, dts[d], 1);
                kb__coll_info info;
                cf_check_all_reduce(m, t, "hier_allreduce", ops[o], worlds[i].w, N, dts[d], &info);
                cr_assert_eq(info.world, (uint32_t)worlds[i].w);
                cr_assert_eq(kb_free(m, t), 0);
            }
    kb_close(m);
}

Test(coll_hier, allreduce_tcm)
{
    allreduce_matrix("tcm");
}
Test(coll_hier, allreduce_sram)
{
    allreduce_matrix("sram");
}
Test(coll_hier, allreduce_hbm)
{
    allreduce_matrix("hbm");
}

/* A large buffer streams through several rounds of every phase. */
Test(coll_hier, allreduce_of_large_buffers_over_both_sips)
{
    kb_machine *m = cf_open(NULL, 0);
    int64_t n = 300001;
    kb_tensor t = cf_tensor(m, "x", CF_TWO_SIPS, 4, n, KB_F32, 1);
    cf_check_all_reduce(m, t, "hier_allreduce", KB_AVG, 4, n, KB_F32, NULL);
    kb_close(m);
}

static void all_gather(cf_place where, int w, int64_t n, kb_dtype dt)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor in = cf_tensor(m, "in", where, w, n, dt, 1);
    kb_tensor out = cf_tensor(m, "out", where, w, n * w, dt, 0);
    kb__coll_req r = {
        KB__CCL_ALL_GATHER, KB_SUM, "hier_all_gather", 1, &in, &out, 0, NULL, 0, 0, NULL};
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, NULL, &e), 0, "%s", e.msg);
    float *h = cf_read(m, out, n * w * w);
    for (int b = 0; b < w; b++)
        for (int src = 0; src < w; src++)
            for (int64_t x = 0; x < n; x++) {
                float got = h[((int64_t)b * w + src) * n + x];
                cr_assert_eq(got, (float)cf_value(src, x),
                             "world %d: buffer %d, part %d, element %lld", w, b, src, (long long)x);
            }
    free(h);
    kb_close(m);
}

Test(coll_hier, all_gather_puts_every_input_in_every_output)
{
    all_gather(CF_ONE_CUBE, 4, 13, KB_F32);
    all_gather(CF_TWO_SIPS, 2, 13, KB_F16);
    all_gather(CF_TWO_SIPS, 16, 9, KB_F32);
    all_gather(CF_TWO_SIPS, 4, 20001, KB_F16);
}

/* Every output of a hierarchical reduce-scatter against the host
 * reference, bit for bit (the values are small integers: every partial is
 * exact, so the order of the ops does not change a bit). */
static void reduce_scatter(const char *kind, cf_place where, int w, int64_t per_rank, kb_dtype dt,
                           kb_reduce_op op)
{
    char set[128];
    snprintf(set, sizeof set, "ccl.algorithms.hier_reduce_scatter.buffer_kind=%s", kind);
    const char *sets[] = {set};
    kb_machine *m = cf_open(sets, 1);
    int64_t n = (int64_t)w * per_rank;
    kb_tensor in = cf_tensor(m, "in", where, w, n, dt, 1);
    kb_tensor out = cf_tensor(m, "out", where, w, per_rank, dt, 0);
    kb__coll_req r = {
        KB__CCL_REDUCE_SCATTER, op, "hier_reduce_scatter", 1, &in, &out, 0, NULL, 0, 0, NULL};
    kb__coll_info info;
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, &info, &e), 0, "%s", e.msg);
    cr_assert_eq(info.world, (uint32_t)w);
    float *h = cf_read(m, out, n);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < per_rank; x++) {
            float want = cf_expect(op, w, (int64_t)b * per_rank + x, dt);
            cr_assert(!memcmp(&want, &h[(int64_t)b * per_rank + x], sizeof want),
                      "%s, world %d, %lld per rank: buffer %d element %lld: %g, expected %g", kind,
                      w, (long long)per_rank, b, (long long)x, h[(int64_t)b * per_rank + x], want);
        }
    /* the input is left as it was */
    float *x = cf_read(m, in, n * w);
    for (int b = 0; b < w; b++)
        for (int64_t i = 0; i < n; i++)
            cr_assert_eq(x[(int64_t)b * n + i], cf_round(cf_value(b, i), dt), "input %d[%lld]", b,
                         (long long)i);
    free(x);
    free(h);
    kb_close(m);
}

Test(coll_hier, reduce_scatter_leaves_every_block_reduced_over_every_rank)
{
    static const kb_reduce_op ops[] = {KB_SUM, KB_MAX, KB_MIN, KB_AVG};
    for (size_t o = 0; o < 4; o++) {
        reduce_scatter("tcm", CF_TWO_SIPS, 16, 5, KB_F32, ops[o]);
        reduce_scatter("tcm", CF_TWO_SIPS, 4, 3, KB_F16, ops[o]);
    }
    reduce_scatter("sram", CF_TWO_SIPS, 2, 7, KB_F32, KB_SUM); /* groups of one */
    reduce_scatter("hbm", CF_TWO_SIPS, 16, 9, KB_F16, KB_AVG);
    reduce_scatter("tcm", CF_ONE_CUBE, 8, 5, KB_F32, KB_SUM);     /* one group: the ring */
    reduce_scatter("tcm", CF_TWO_SIPS, 4, 40001, KB_F32, KB_SUM); /* several rounds */
}

/* The runner's prediction is the model's, with the call's message size. */
Test(coll_hier, prediction_is_the_model_of_the_installed_plan)
{
    kb_machine *m = cf_open(NULL, 0);
    int64_t n = 8192;
    kb_tensor t = cf_tensor(m, "x", CF_TWO_SIPS, 16, n, KB_F32, 1);
    kb__coll_info info;
    cf_check_all_reduce(m, t, "hier_allreduce", KB_SUM, 16, n, KB_F32, &info);
    const kb__ccl_plan *pl = kb__ccl_state_plan(m);
    cr_assert_eq(pl->group, 8u);
    kb__ccl_hier_model hm;
    kb__err e;
    cr_assert_eq(kb__ccl_hier_model_get(m->dev->topo, pl, KB__CCL_ALL_REDUCE, (uint64_t)n, 4,
                                        info.piece_bytes, 64, &hm, &e),
                 0, "%s", e.msg);
    cr_assert_gt(hm.predicted_ps, 0u);
    /* and the programs' start */
    cr_assert_eq(info.predicted_ps, hm.predicted_ps + kb_test_ps(m->params.pe.cpu_dispatch_ns));
    cr_assert_eq(hm.hops, 2u * 7 + 2u * 1);
    cr_assert_eq(info.phase_ps[0] + info.phase_ps[1], hm.phase_ps[0] + hm.phase_ps[1]);
    /* the peers' ring crosses the SIP link: B is the SIP link's */
    cr_assert_float_eq(hm.bw_gbs, m->params.system.sip_link.bw_gbs, 1e-9);
    kb_close(m);
}

/* Bandwidth-bound (2 MiB per rank for the all-reduce, 1 MiB inputs for the
 * all-gather; 16 slots, so the queues do not pace the streams): the
 * programs' span within 10 % of the prediction. */
static void within_ten_percent(const char *algo, kb__ccl_collective kind, cf_place where, int w,
                               int64_t bytes)
{
    const char *sets[] = {"ccl.defaults.n_slots=16"};
    kb_open_options o = {NULL, sets, 1, 1, NULL, 0}; /* timing only: --no-data */
    kb_machine *m = NULL;
    cr_assert_eq(kb_open(&m, &o, NULL, 0), 0);
    int64_t n = bytes / 4;
    kb_tensor in = cf_tensor(m, "in", where, w, n, KB_F32, 0), out = {0};
    if (kind == KB__CCL_ALL_GATHER) out = cf_tensor(m, "out", where, w, n * w, KB_F32, 0);
    if (kind == KB__CCL_REDUCE_SCATTER) out = cf_tensor(m, "out", where, w, n / w, KB_F32, 0);
    kb__coll_req r = {kind, KB_SUM, algo, 1, &in, kind != KB__CCL_ALL_REDUCE ? &out : NULL,
                      0,    NULL,   0,    0, NULL};
    kb__coll_info info;
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, &info, &e), 0, "%s", e.msg);
    double span = (double)(info.t_run_end - info.t_run_start), pred = (double)info.predicted_ps;
    cr_assert_gt(pred, 0);
    cr_expect(span > 0.9 * pred && span < 1.1 * pred,
              "%s, %d ranks, %lld B: %.3f us simulated, %.3f us predicted (%.3f)", algo, w,
              (long long)bytes, span / 1e6, pred / 1e6, span / pred);
    kb_close(m);
}

Test(coll_hier, bandwidth_bound_allreduce_is_within_ten_percent_of_the_model)
{
    within_ten_percent("hier_allreduce", KB__CCL_ALL_REDUCE, CF_TWO_SIPS, 16, 2 << 20);
    within_ten_percent("hier_allreduce", KB__CCL_ALL_REDUCE, CF_CUBES, 16, 2 << 20);
}

/* The reduce-scatter's group steps each with their fill and drain (1.12
 * and 1.10 without them), and over two cubes a SIP the peers' messages,
 * which fit in the slots there, beside the next group step (0.84 when
 * they were counted after it). */
Test(coll_hier, bandwidth_bound_reduce_scatter_is_within_ten_percent_of_the_model)
{
    within_ten_percent("hier_reduce_scatter", KB__CCL_REDUCE_SCATTER, CF_TWO_SIPS, 16, 4 << 20);
    within_ten_percent("hier_reduce_scatter", KB__CCL_REDUCE_SCATTER, CF_TWO_SIPS, 16, 1 << 20);
    within_ten_percent("hier_reduce_scatter", KB__CCL_REDUCE_SCATTER, CF_TWO_SIPS, 32, 1 << 20);
}

Test(coll_hier, bandwidth_bound_all_gather_is_within_ten_percent_of_the_model)
{
    within_ten_percent("hier_all_gather", KB__CCL_ALL_GATHER, CF_TWO_SIPS, 16, 1 << 20);
}
