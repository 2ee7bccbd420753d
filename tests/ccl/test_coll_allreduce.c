/*
 * All-reduce data: every algorithm (ring, mesh, tree) x buffer kind (tcm,
 * sram, hbm) x world (2, 4, 8 in a cube; 16 over two cubes; 16 over both
 * SIPs) gives every buffer the host reference (sum, max, min, avg; f16 and
 * f32), bit for bit, with buffers whose size does not divide by the world.
 */
#include "ccl/coll_fixture.h"

#define N 37 /* elements per buffer: not a multiple of any world */

static void matrix(const char *algo, const char *kind)
{
    char set[128];
    snprintf(set, sizeof set, "ccl.algorithms.%s.buffer_kind=%s", algo, kind);
    const char *sets[] = {set};
    kb_machine *m = cf_open(sets, 1);
    static const struct {
        cf_place where;
        int w;
    } worlds[] = {
        {CF_ONE_CUBE, 2}, {CF_ONE_CUBE, 4}, {CF_ONE_CUBE, 8}, {CF_CUBES, 16}, {CF_TWO_SIPS, 16}};
    static const kb_reduce_op ops[] = {KB_SUM, KB_MAX, KB_MIN, KB_AVG};
    static const kb_dtype dts[] = {KB_F16, KB_F32};
    int mesh = !strcmp(algo, "mesh_allreduce");
    for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++) {
        if (mesh && worlds[i].w == 2) continue; /* 2 is not R x C with R, C >= 2 */
        for (size_t o = 0; o < 4; o++)
            for (size_t d = 0; d < 2; d++) {
                kb_tensor t = cf_tensor(m, "x", worlds[i].where, worlds[i].w, N, dts[d], 1);
                kb__coll_info info;
                cf_check_all_reduce(m, t, algo, ops[o], worlds[i].w, N, dts[d], &info);
                cr_assert_eq(info.world, (uint32_t)worlds[i].w);
                cr_assert_eq(kb_free(m, t), 0);
            }
    }
    kb_close(m);
}

Test(coll_allreduce, ring_tcm)
{
    matrix("ring_allreduce", "tcm");
}
Test(coll_allreduce, ring_sram)
{
    matrix("ring_allreduce", "sram");
}
Test(coll_allreduce, ring_hbm)
{
    matrix("ring_allreduce", "hbm");
}
Test(coll_allreduce, mesh_tcm)
{
    matrix("mesh_allreduce", "tcm");
}
Test(coll_allreduce, mesh_sram)
{
    matrix("mesh_allreduce", "sram");
}
Test(coll_allreduce, mesh_hbm)
{
    matrix("mesh_allreduce", "hbm");
}
Test(coll_allreduce, tree_tcm)
{
    matrix("tree_allreduce", "tcm");
}
Test(coll_allreduce, tree_sram)
{
    matrix("tree_allreduce", "sram");
}
Test(coll_allreduce, tree_hbm)
{
    matrix("tree_allreduce", "hbm");
}

Test(coll_allreduce, ranks_spread_over_cubes_use_the_placement_order)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_SPREAD_PES, 8, N, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 8, N, KB_F32, NULL);
    const kb__ccl_plan *pl = kb__ccl_state_plan(m);
    cr_assert_not_null(pl);
    /* 2 PEs in each of cubes 0..3: ranks follow the cube cycle, PEs in order */
    for (uint32_t r = 0; r + 1 < 8; r += 2) {
        cr_assert_eq(pl->loc[r].cube, pl->loc[r + 1].cube);
        cr_assert_eq(pl->loc[r].pe + 1, pl->loc[r + 1].pe);
    }
    kb_close(m);
}

Test(coll_allreduce, large_buffers_go_in_pieces_and_rounds)
{
    /* 1 MiB of usable TCM: 16 KiB pieces (4096 f32), a window of 32 pieces;
     * 150 000 elements per chunk are 37 pieces, so two rounds */
    const char *sets[] = {"pe.tcm.size=5MiB"};
    kb_machine *m = cf_open(sets, 1);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 2, 300000, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 2, 300000, KB_F32, NULL);
    kb_close(m);
}
