/*
 * Collective errors name the tensor, PE, sizes and algorithm, and leave the
 * machine usable (a later all-reduce on it is right); TCM rings shrink the
 * tile scratch of their PEs; ccl config from kb_open, kb_ccl_configure and kb_ccl_override.
 */
#include "ccl/coll_fixture.h"
#include "kernel/tl_internal.h"
#include "runtime/machine.h"
#include <unistd.h>

static int run_err(kb_machine *m, kb__coll_req *r, kb__err *e)
{
    kb__err_clear(e);
    return kb__ccl_run(m, r, NULL, e);
}

/* The machine still all-reduces correctly. */
static void still_usable(kb_machine *m)
{
    kb_tensor t = cf_tensor(m, "ok", CF_ONE_CUBE, 4, 11, KB_F32, 1);
    cf_check_all_reduce(m, t, NULL, KB_SUM, 4, 11, KB_F32, NULL);
}

Test(coll_errors, unknown_algorithm)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__coll_req r = {
        KB__CCL_ALL_REDUCE, KB_SUM, "ring_allreduc", 1, &t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    cr_assert_eq(run_err(m, &r, &e), KB_ENOTFOUND);
    cr_assert(strstr(e.msg, "'ring_allreduc'; did you mean 'ring_allreduce'"), "%s", e.msg);
    still_usable(m);
    kb_close(m);
}

Test(coll_errors, unknown_module_lists_the_known_ones)
{
    const char *sets[] = {"ccl.algorithms.mine={module: ring_alreduce, topology: ring_1d}"};
    kb_machine *m = cf_open(sets, 1);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, "mine", 1, &t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    cr_assert_eq(run_err(m, &r, &e), KB_ENOTFOUND);
    cr_assert(strstr(e.msg, "algorithm 'mine': unknown module 'ring_alreduce' (known modules: "
                            "ring_allreduce, mesh_allreduce"),
              "%s", e.msg);
    still_usable(m);
    kb_close(m);
}

Test(coll_errors, mismatched_dtypes_name_both)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_set_device(m, 0);
    kb_tensor t[2] = {cf_tensor(m, "a", CF_ONE_CUBE, 4, 8, KB_F32, 1)};
    kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 1, 1, 4, 0, 0};
    int64_t shape = 32;
    kb_set_device(m, 1);
    p.num_sips = 0;
    cr_assert_eq(kb_empty(m, "b", 1, &shape, KB_F16, &p, &t[1]), 0, "%s", kb_last_error(m));
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, NULL, 2, t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    cr_assert_eq(run_err(m, &r, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "tensor 'b' shard 0 on sip1/cube0/pe0 is f16 [8 elements], but the "
                            "first buffer is f32 [8]"),
              "%s", e.msg);
    still_usable(m);
    kb_close(m);
}

Test(coll_errors, mismatched_sizes)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t[2] = {cf_tensor(m, "a", CF_ONE_CUBE, 2, 8, KB_F32, 1)};
    kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 1, 2, 1, 0, 0};
    int64_t shape = 18;
    cr_assert_eq(kb_empty(m, "b", 1, &shape, KB_F32, &p, &t[1]), 0, "%s", kb_last_error(m));
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, NULL, 2, t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    cr_assert_eq(run_err(m, &r, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "tensor 'b' shard 0 on sip0/cube0/pe0 is f32 [9 elements]"), "%s",
              e.msg);
    still_usable(m);
    kb_close(m);
}

Test(coll_errors, two_buffers_on_one_pe)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t[2] = {cf_tensor(m, "a", CF_ONE_CUBE, 4, 8, KB_F32, 1),
                      cf_tensor(m, "b", CF_ONE_CUBE, 4, 8, KB_F32, 1)};
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, NULL, 2, t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    cr_assert_eq(run_err(m, &r, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "tensor 'b' shard 0 and tensor 'a' shard 0 are both on "
                            "sip0/cube0/pe0; a PE holds at most one buffer"),
              "%s", e.msg);
    still_usable(m);
    kb_close(m);
}

Test(coll_errors, world_size_not_fitting_mesh_2d)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 6, 8, KB_F32, 1);
    kb_tensor t2 = cf_tensor(m, "y", CF_ONE_CUBE, 2, 8, KB_F32, 1);
    kb__coll_req r = {
        KB__CCL_ALL_REDUCE, KB_SUM, "mesh_allreduce", 1, &t2, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    cr_assert_eq(run_err(m, &r, &e), KB_ECONFIG);
    cr_assert(strstr(e.msg, "collective all_reduce over 2 buffers: algorithm 'mesh_allreduce': "
                            "world_size (requested by the caller): mesh_2d needs"),
              "%s", e.msg);
    r.in = &t; /* 6 = 2 x 3 works */
    cf_check_all_reduce(m, t, "mesh_allreduce", KB_AVG, 6, 8, KB_F32, NULL);
    still_usable(m);
    kb_close(m);
}

Test(coll_errors, reduce_scatter_sizes_and_broadcast_root)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor in = cf_tensor(m, "in", CF_ONE_CUBE, 4, 10, KB_F32, 1);
    kb_tensor out = cf_tensor(m, "out", CF_ONE_CUBE, 4, 3, KB_F32, 0);
    kb__coll_req r = {KB__CCL_REDUCE_SCATTER, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, NULL};
    kb__err e;
    cr_assert_eq(run_err(m, &r, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "10 elements per buffer do not divide by 4 ranks"), "%s", e.msg);
    kb_tensor in8 = cf_tensor(m, "in8", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    r.in = &in8; /* out holds 3 per rank, N/p is 8/4 = 2 */
    cr_assert_eq(run_err(m, &r, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "is f32 [3 elements], expected f32 [2] (N/p: 8 input elements / 4 "
                            "buffers)"),
              "%s", e.msg);
    r.in = &in;
    kb__coll_req b = {KB__CCL_BROADCAST, KB_SUM, NULL, 1, &in, NULL, 4, NULL, 0, 0, NULL};
    cr_assert_eq(run_err(m, &b, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "root 4, but there are 4 buffers"), "%s", e.msg);
    kb__coll_req w = {
        KB__CCL_ALL_REDUCE, KB_SUM, "ring_broadcast", 1, &in, NULL, 0, NULL, 0, 0, NULL};
    cr_assert_eq(run_err(m, &w, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "algorithm 'ring_broadcast' implements broadcast"), "%s", e.msg);
    still_usable(m);
    kb_close(m);
}

Test(coll_errors, rings_that_do_not_fit_and_a_failing_kernel)
{
    /* SRAM rings of 2 x 1 MiB per rank: 8 ranks of a cube need 16 MiB */
    const char *sets[] = {"ccl.algorithms.ring_allreduce_sram.slot_size=1MiB",
                          "ccl.algorithms.ring_allreduce_sram.n_slots=1", "cube.sram.size=12MiB"};
    kb_machine *m = cf_open(sets, 3);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 8, 8, KB_F32, 1);
    kb__coll_req r = {
        KB__CCL_ALL_REDUCE, KB_SUM, "ring_allreduce_sram", 1, &t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    int rc = run_err(m, &r, &e);
    cr_assert(rc == KB_ENOSPC || rc == KB_ECONFIG, "%d %s", rc, e.msg);
    cr_assert(strstr(e.msg, "ring_allreduce_sram"), "%s", e.msg);
    cr_assert(kb__ccl_state_plan(m) == NULL);
    still_usable(m);
    kb_close(m);
}

Test(coll_tcm, rings_take_their_bytes_from_the_tile_scratch)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 8, KB_F32, NULL);
    const kb__ccl_plan *pl = kb__ccl_state_plan(m);
    uint64_t rings = 2ull * pl->r.s.n_slots * pl->r.s.slot_size;
    kb__pe *pe = m->pe_units[0];
    cr_assert_eq(pe->tcm.base, rings);
    cr_assert_eq(kb__range_bytes_used(&m->tcm[0]), rings);
    /* a new program sees exactly the usable TCM minus the rings */
    kb__tcm_reset(&pe->tcm);
    cr_assert_eq(pe->tcm.free_bytes, m->params.pe.tcm_size - m->params.pe.tcm_reserved - rings);
    /* HBM rings on the same PEs take no TCM; the TCM install stays cached */
    t = cf_tensor(m, "y", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce_hbm", KB_SUM, 4, 8, KB_F32, NULL);
    cr_assert_eq(pe->tcm.base, rings);
    cr_assert_eq(kb__range_bytes_used(&m->tcm[0]), rings);
    /* a new configuration drops every install and gives the TCM back */
    cr_assert_eq(kb_ccl_configure(m, NULL, NULL, 0), 0, "%s", kb_last_error(m));
    cr_assert_eq(pe->tcm.base, 0u);
    cr_assert_eq(kb__range_bytes_used(&m->tcm[0]), 0u);
    kb_close(m);
}

static void big_tile(tl_ctx *k)
{
    int64_t shape[2] = {tl_arg_i64(k, 1) / 64, 64};
    tl_zeros(k, 2, shape, TL_I8);
}

Test(coll_tcm, a_kernel_tile_cannot_use_ring_bytes)
{
    const char *sets[] = {"pe.tcm.size=5MiB"}; /* 1 MiB usable: one tile can ask for it all */
    kb_machine *m = cf_open(sets, 1);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, t, NULL, KB_SUM, 4, 8, KB_F32, NULL);
    uint64_t usable = m->params.pe.tcm_size - m->params.pe.tcm_reserved;
    uint64_t rings = m->pe_units[0]->tcm.base;
    kb_arg args[2] = {kb_arg_tensor(t), kb_arg_i64((int64_t)(usable - rings + 64))};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "big", big_tile, NULL, args, 2, &id), 0);
    int rc = kb_wait(m, id);
    cr_assert_eq(rc, KB_ENOSPC, "%d: %s", rc, kb_last_error(m));
    char want[160];
    snprintf(want, sizeof want, "TCM exhausted: asked %llu B, %llu B free (largest block %llu B)",
             (unsigned long long)(usable - rings + 64), (unsigned long long)(usable - rings),
             (unsigned long long)(usable - rings));
    cr_assert(strstr(kb_last_error(m), want), "%s", kb_last_error(m));
    kb_close(m);
}

/* Opens the built-in machine with the overrides sets[0..n) and a ccl.yaml
 * holding text, written to `name` in the build directory (path gets it,
 * for unlink; each test names its own file). */
static kb_machine *open_with_ccl(const char *name, char path[256], const char *text,
                                 const char *const *sets, size_t n)
{
    snprintf(path, 256, "%s/%s", KB_BINARY_DIR, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fputs(text, f) >= 0 && fclose(f) == 0, 1, "%s", path);
    kb_open_options o = {NULL, sets, n, 0, path, 0};
    kb_machine *m;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    return m;
}

Test(coll_config, kb_open_takes_ccl_path_and_ccl_overrides)
{
    char path[256];
    const char *sets[] = {"ccl.defaults.slot_size=8KiB", "pe.dma.channels=3"};
    kb_machine *m = open_with_ccl("coll_config_open.ccl.yaml", path,
                                  "defaults: {n_slots: 3}\n"
                                  "algorithms:\n  r: {module: ring_allreduce, topology: ring_1d}\n",
                                  sets, 2);
    const kb__ccl_config *c = kb__ccl_state_config(m);
    cr_assert_eq(c->algos[0].s.n_slots, 3u);
    cr_assert_eq(c->algos[0].s.slot_size, 8192u);
    cr_assert_eq(m->params.pe.dma_channels, 3u);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, t, "r", KB_MAX, 4, 8, KB_F32, NULL);
    /* back to the built-in file */
    cr_assert_eq(kb_ccl_configure(m, NULL, NULL, 0), 0, "%s", kb_last_error(m));
    cr_assert_null(kb__ccl_state_plan(m));
    t = cf_tensor(m, "y", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, t, "tree_allreduce", KB_SUM, 4, 8, KB_F32, NULL);
    const char *bad[] = {"ccl.defaults.n_slots=0"};
    cr_assert_eq(kb_ccl_configure(m, NULL, bad, 1), KB_ECONFIG);
    cr_assert(strstr(kb_last_error(m), "n_slots"), "%s", kb_last_error(m));
    still_usable(m);
    kb_close(m);
    unlink(path);
    kb_open_options o = {NULL, bad, 1, 0, NULL, 0};
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), KB_ECONFIG);
    cr_assert(strstr(eb, "ccl.defaults.n_slots"), "%s", eb);
}

/* kb_ccl_override keeps the file and every earlier override, adds its own
 * (a later value of a key wins), and leaves everything as it was when it
 * fails. */
Test(coll_config, kb_ccl_override_layers_on_the_current_configuration)
{
    char path[256];
    const char *sets[] = {"ccl.defaults.slot_size=8KiB"};
    kb_machine *m = open_with_ccl("coll_config_override.ccl.yaml", path,
                                  "defaults: {n_slots: 3, algorithm: {all_reduce: r}}\n"
                                  "algorithms:\n  r: {module: ring_allreduce, topology: ring_1d}\n",
                                  sets, 1);
    unlink(path); /* the source is remembered, not re-read */
    const char *more[] = {"ccl.algorithms.r.buffer_kind=sram", "ccl.defaults.n_slots=5"};
    cr_assert_eq(kb_ccl_override(m, more, 2), 0, "%s", kb_last_error(m));
    const kb__ccl_config *c = kb__ccl_state_config(m);
    cr_assert_eq(c->n_algos, 1u);
    cr_assert_str_eq(c->algos[0].name, "r");
    cr_assert_eq(c->algos[0].s.n_slots, 5u);
    cr_assert_eq(c->algos[0].s.slot_size, 8192u);
    cr_assert_eq(c->algos[0].s.buffer_kind, KB__CCL_BUF_SRAM);
    char name[8];
    cr_assert_eq(kb_ccl_default_algorithm(m, "all_reduce", name, sizeof name), 0);
    cr_assert_str_eq(name, "r");
    cr_assert_eq(kb_ccl_default_algorithm(m, "broadcast", name, sizeof name), KB_ENOTFOUND);
    cr_assert(strstr(kb_last_error(m), "names no default algorithm for broadcast"), "%s",
              kb_last_error(m));
    cr_assert_eq(kb_ccl_default_algorithm(m, "allreduce", name, sizeof name), KB_EINVAL);
    cr_assert(strstr(kb_last_error(m), "unknown collective 'allreduce'"), "%s", kb_last_error(m));
    cr_assert_eq(kb_ccl_default_algorithm(m, "all_reduce", name, 1), KB_EINVAL);
    cr_assert(strstr(kb_last_error(m), "'r' does not fit a buffer of 1 bytes"), "%s",
              kb_last_error(m));
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, t, NULL, KB_SUM, 4, 8, KB_F32, NULL);
    const char *bad[] = {"ccl.algorithms.r.n_slots=0"};
    cr_assert_eq(kb_ccl_override(m, bad, 1), KB_ECONFIG);
    cr_assert(strstr(kb_last_error(m), "n_slots"), "%s", kb_last_error(m));
    c = kb__ccl_state_config(m);
    cr_assert_eq(c->algos[0].s.n_slots, 5u);
    cr_assert_eq(c->algos[0].s.buffer_kind, KB__CCL_BUF_SRAM);
    cr_assert_eq(kb_ccl_override(m, NULL, 1), KB_EINVAL);
    /* kb_ccl_configure starts a new source: the built-in file, no overrides */
    cr_assert_eq(kb_ccl_configure(m, NULL, NULL, 0), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_ccl_override(m, NULL, 0), 0, "%s", kb_last_error(m));
    kb__ccl_settings builtin;
    kb__ccl_settings_builtin(&builtin);
    const kb__ccl_algo *a;
    kb__err e;
    cr_assert_eq(kb__ccl_config_find(kb__ccl_state_config(m), "ring_allreduce", &a, &e), 0);
    cr_assert_eq(a->s.n_slots, builtin.n_slots);
    cr_assert_eq(a->s.slot_size, builtin.slot_size);
    char big[64];
    cr_assert_eq(kb_ccl_default_algorithm(m, "all_reduce", big, sizeof big), 0);
    cr_assert_str_eq(big, "ring_allreduce");
    still_usable(m);
    kb_close(m);
}
