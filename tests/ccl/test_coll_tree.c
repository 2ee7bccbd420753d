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
