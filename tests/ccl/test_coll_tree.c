/*
 * The mesh and tree all-reduces stream their pieces: every piece climbs and
 * descends the tree while the next ones follow, so the call takes far less
 * than the pieces one after the other would (each a round trip through the
 * tree); and the tree of ranges crosses the SIP link with one edge, so that
 * link carries each piece once each way.
 */
#include "ccl/alphabeta.h"
#include "ccl/coll_fixture.h"
#include "ccl/plan.h"
#include "runtime/machine.h"

/* A sum all-reduce of `bytes` per rank over w ranks placed per `where`,
 * timing only; *span the programs' span, *sip_bytes what crossed SIP links. */
static void run_timed(const char *algo, cf_place where, int w, int64_t bytes, uint64_t *span,
                      uint64_t *sip_bytes, uint64_t *piece)
{
    kb_open_options o = {NULL, NULL, 0, 1, NULL, 0};
    kb_machine *m = NULL;
    cr_assert_eq(kb_open(&m, &o, NULL, 0), 0);
    kb_tensor t = cf_tensor(m, "x", where, w, bytes / 4, KB_F32, 0);
    kb_stats_reset(m);
    kb__coll_info info;
    kb__err e;
    cr_assert_eq(cf_run(m, &t, algo, &info, &e), 0, "%s", e.msg);
    kb_stats st;
    kb_stats_get(m, &st);
    *span = info.t_run_end - info.t_run_start;
    *sip_bytes = st.link_bytes[KB_LINK_SIP];
    *piece = info.piece_bytes;
    kb_close(m);
}

/* The time of one piece alone from rank 1 to rank 0 of a cube: a lower
 * bound of any hop of the tree. */
static uint64_t piece_hop_ps(uint64_t piece)
{
    kb_machine *m = cf_open(NULL, 0);
    kb__ccl_msg_cost c;
    kb__err e;
    cr_assert_eq(kb__ccl_msg_cost_get(m->dev->topo, (kb__ccl_loc){0, 0, 1}, (kb__ccl_loc){0, 0, 0},
                                      KB__CCL_BUF_TCM, piece, &c, &e),
                 0, "%s", e.msg);
    kb_close(m);
    return c.total_ps;
}

Test(coll_tree, pieces_stream_through_the_tree_and_the_mesh)
{
    int64_t bytes = 1 << 20;
    for (int a = 0; a < 2; a++) {
        const char *algo = a ? "mesh_allreduce" : "tree_allreduce";
        uint64_t span, sip, piece;
        run_timed(algo, CF_CUBES, 16, bytes, &span, &sip, &piece);
        /* one piece after the other: each crosses the tree up and down,
         * 2 x height hops (mesh 4 x 4: height 6; tree of 16: 4) */
        uint64_t pieces = ((uint64_t)bytes + piece - 1) / piece, height = a ? 6 : 4;
        uint64_t one_by_one = pieces * 2 * height * piece_hop_ps(piece);
        /* a lower bound for pieces one by one (each hop alone, without its
         * loads, stores and combines): streaming must beat it */
        cr_expect_lt(span, one_by_one * 9 / 10, "%s: %.3f us, pieces one by one at least %.3f us",
                     algo, (double)span / 1e6, (double)one_by_one / 1e6);
    }
}

Test(coll_tree, one_tree_edge_crosses_the_sip_link)
{
    int64_t bytes = 256 << 10;
    uint64_t span, sip, piece;
    run_timed("tree_allreduce", CF_TWO_SIPS, 256, bytes, &span, &sip, &piece);
    /* each piece once each way, with its slot descriptors and credits: a
     * little over 2 N (a binary heap sent 64 edges' worth) */
    cr_expect(sip > 2 * (uint64_t)bytes && sip < 2 * (uint64_t)bytes * 11 / 10,
              "%llu bytes crossed the SIP link for %lld per rank", (unsigned long long)sip,
              (long long)bytes);
}

Test(coll_tree, a_deep_mesh_streams_at_the_pace_of_its_model)
{
    /* 128 ranks are an 8 x 16 grid whose tree is 22 hops deep: a rank of
     * depth k gets piece u down 4 k ticks after sending it up, so it keeps
     * 4 k + 1 down receives in flight (89 at the deepest, 1.4 MiB of TCM).
     * Capped at the ring window (64 pieces less the children's receives),
     * the ranks past depth 14 waited on every down piece and the call took
     * 3.3x the alpha-beta prediction; streamed, the span stays near it. */
    kb_machine *m = cf_open(NULL, 0);
    int w = 128;
    int64_t bytes = 2 << 20;
    kb_tensor t = cf_tensor(m, "x", CF_CUBES, w, bytes / 4, KB_F32, 0);
    kb__coll_info info;
    kb__err e;
    cr_assert_eq(cf_run(m, &t, "mesh_allreduce", &info, &e), 0, "%s", e.msg);
    uint64_t span = info.t_run_end - info.t_run_start;
    uint64_t pieces = ((uint64_t)bytes + info.piece_bytes - 1) / info.piece_bytes;
    cr_assert_gt(pieces, 64, "%llu pieces: the case needs more than the old window",
                 (unsigned long long)pieces);
    cr_assert_gt(info.predicted_ps, 0);
    cr_expect_lt(span, info.predicted_ps * 7 / 5, "%.3f us against %.3f us predicted",
                 (double)span / 1e6, (double)info.predicted_ps / 1e6);
    kb_close(m);
}

Test(coll_tree, a_small_tcm_bounds_the_down_receives_and_the_result_stays_exact)
{
    /* 256 KiB of usable TCM hold fewer pieces than the deepest rank of the
     * 4 x 4 mesh (depth 6) would keep in flight, 4 x 6 + 1: past the
     * scratch it waits on its parent, and every buffer is still the host
     * reference bit for bit (both kernels, many pieces) */
    const char *sets[] = {"pe.tcm.size=4352KiB"};
    for (int a = 0; a < 2; a++) {
        const char *algo = a ? "mesh_allreduce" : "tree_allreduce";
        kb_machine *m = cf_open(sets, 1);
        int w = 16;
        int64_t n = 200000;
        kb_tensor t = cf_tensor(m, "x", CF_CUBES, w, n, KB_F32, 1);
        kb__coll_info info;
        cf_check_all_reduce(m, t, algo, KB_SUM, w, n, KB_F32, &info);
        uint64_t usable = m->params.pe.tcm_size - m->params.pe.tcm_reserved;
        cr_expect_lt(usable / info.piece_bytes, 4 * 6 + 1, "%s: %llu B pieces", algo,
                     (unsigned long long)info.piece_bytes);
        cr_expect_gt((uint64_t)n * 4 / info.piece_bytes, 4 * 6 + 1);
        kb_close(m);
    }
}
