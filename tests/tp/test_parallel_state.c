/* The model-parallel state of kernbench/tp.h from 1, 2 and 4 host ranks on
 * the small test machine (2 SIPs x 2 cubes x 2 PEs): the Megatron lookups
 * and every refusal of kb_tp_initialize_model_parallel. Expected ranks are
 * computed from the rank numbers (consecutive ranks share a
 * tensor-parallel group), never pasted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kernbench/tp.h"
#include "support/machine.h"

#define MAX_RANKS 4

typedef struct seen {
    int size;                /* what every rank passes, unless per_rank is set */
    int per_rank[MAX_RANKS]; /* 0: use size */
    int skip_group;          /* 1: no kb_init_process_group first */
    int init_before, init_after, init_destroyed;
    int tp_rank[MAX_RANKS], tp_world[MAX_RANKS], dp_rank[MAX_RANKS], dp_world[MAX_RANKS];
    int tp_grank[MAX_RANKS], tp_gsize[MAX_RANKS], dp_grank[MAX_RANKS], dp_gsize[MAX_RANKS];
    int rc[MAX_RANKS];
    char msg[MAX_RANKS][1024];
} seen;

static void keep(seen *s, int rank, int rc, kb_machine *m)
{
    s->rc[rank] = rc;
    snprintf(s->msg[rank], sizeof s->msg[rank], "%s", rc ? kb_last_error(m) : "");
}

static int lookups(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    seen *s = arg;
    int rc = s->skip_group ? 0 : kb_init_process_group(m, "ahbm");
    int before = -1;
    if (!rc) rc = kb_tp_model_parallel_is_initialized(m, &before);
    int size = s->per_rank[rank] ? s->per_rank[rank] : s->size;
    if (!rc) rc = kb_tp_initialize_model_parallel(m, size);
    keep(s, rank, rc, m);
    if (rc) return rc;
    int after = -1, gone = -1;
    kb_tp_model_parallel_is_initialized(m, &after);
    rc = kb_tp_get_tensor_model_parallel_rank(m, &s->tp_rank[rank]);
    if (!rc) rc = kb_tp_get_tensor_model_parallel_world_size(m, &s->tp_world[rank]);
    if (!rc) rc = kb_tp_get_data_parallel_rank(m, &s->dp_rank[rank]);
    if (!rc) rc = kb_tp_get_data_parallel_world_size(m, &s->dp_world[rank]);
    kb_group tp = {-1}, dp = {-1};
    if (!rc) rc = kb_tp_get_tensor_model_parallel_group(m, &tp);
    if (!rc) rc = kb_tp_get_data_parallel_group(m, &dp);
    s->tp_grank[rank] = kb_group_rank(m, tp), s->tp_gsize[rank] = kb_group_size(m, tp);
    s->dp_grank[rank] = kb_group_rank(m, dp), s->dp_gsize[rank] = kb_group_size(m, dp);
    if (!rc) rc = kb_tp_destroy_model_parallel(m);
    if (!rc) rc = kb_tp_model_parallel_is_initialized(m, &gone);
    if (rank == 0) s->init_before = before, s->init_after = after, s->init_destroyed = gone;
    keep(s, rank, rc, m);
    return rc;
}

/* nprocs ranks with tensor-parallel size `size`: Megatron's ranks, and the
 * groups hold the caller at those ranks. */
static void expect_megatron_ranks(int nprocs, int size)
{
    kb_machine *m = kb_test_small_machine(0);
    seen s;
    memset(&s, 0, sizeof s);
    s.size = size;
    cr_assert_eq(kb_spawn(m, lookups, nprocs, &s), 0, "%s", kb_last_error(m));
    for (int r = 0; r < nprocs; r++) {
        cr_expect_eq(s.tp_rank[r], r % size, "rank %d", r);
        cr_expect_eq(s.tp_world[r], size, "rank %d", r);
        cr_expect_eq(s.dp_rank[r], r / size, "rank %d", r);
        cr_expect_eq(s.dp_world[r], nprocs / size, "rank %d", r);
        cr_expect_eq(s.tp_grank[r], r % size, "rank %d in its tensor-parallel group", r);
        cr_expect_eq(s.tp_gsize[r], size, "rank %d", r);
        cr_expect_eq(s.dp_grank[r], r / size, "rank %d in its data-parallel group", r);
        cr_expect_eq(s.dp_gsize[r], nprocs / size, "rank %d", r);
    }
    cr_expect_eq(s.init_before, 0);
    cr_expect_eq(s.init_after, 1);
    cr_expect_eq(s.init_destroyed, 0, "kb_tp_destroy_model_parallel cleared it");
    kb_close(m);
}

Test(tp_state, two_ranks_form_one_tensor_parallel_group)
{
    expect_megatron_ranks(2, 2);
}

Test(tp_state, four_ranks_form_one_tensor_parallel_group)
{
    expect_megatron_ranks(4, 4);
}

Test(tp_state, four_ranks_of_size_two_make_two_data_parallel_replicas)
{
    expect_megatron_ranks(4, 2);
}

Test(tp_state, two_ranks_of_size_one_are_pure_data_parallelism)
{
    expect_megatron_ranks(2, 1);
}

Test(tp_state, the_driver_alone_is_a_group_of_one)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_tp_initialize_model_parallel(m, 1), 0, "%s", kb_last_error(m));
    int v[4] = {-1, -1, -1, -1};
    cr_expect_eq(kb_tp_get_tensor_model_parallel_rank(m, &v[0]), 0);
    cr_expect_eq(kb_tp_get_tensor_model_parallel_world_size(m, &v[1]), 0);
    cr_expect_eq(kb_tp_get_data_parallel_rank(m, &v[2]), 0);
    cr_expect_eq(kb_tp_get_data_parallel_world_size(m, &v[3]), 0);
    cr_expect(v[0] == 0 && v[1] == 1 && v[2] == 0 && v[3] == 1, "%d %d %d %d", v[0], v[1], v[2],
              v[3]);
    kb_close(m);
}

/* Runs `lookups` and returns rank 0's code (the message in s->msg[0]). */
static int spawn_init(seen *s, int nprocs)
{
    kb_machine *m = kb_test_small_machine(0);
    int rc = kb_spawn(m, lookups, nprocs, s);
    kb_close(m);
    return rc;
}

Test(tp_state, a_size_that_does_not_divide_the_world_is_refused)
{
    seen s;
    memset(&s, 0, sizeof s);
    s.size = 3;
    cr_expect_eq(spawn_init(&s, 4), KB_EINVAL);
    cr_expect(strstr(s.msg[0], "tensor_model_parallel_size 3 does not divide the world size 4"),
              "%s", s.msg[0]);
}

Test(tp_state, sizes_below_one_are_refused)
{
    for (int size = 0; size >= -1; size--) {
        seen s;
        memset(&s, 0, sizeof s);
        s.size = size;
        cr_expect_eq(spawn_init(&s, 2), KB_EINVAL, "size %d", size);
        char want[96];
        snprintf(want, sizeof want, "tensor_model_parallel_size %d: must be >= 1", size);
        cr_expect(strstr(s.msg[0], want), "%s", s.msg[0]);
    }
}

Test(tp_state, ranks_passing_different_sizes_all_fail_naming_each_size)
{
    seen s;
    memset(&s, 0, sizeof s);
    s.per_rank[0] = 2, s.per_rank[1] = 4;
    cr_expect_eq(spawn_init(&s, 2), KB_EINVAL);
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(s.rc[r], KB_EINVAL, "rank %d decided alike", r);
        cr_expect(strstr(s.msg[r], "different tensor_model_parallel_size values"), "%s", s.msg[r]);
        cr_expect(strstr(s.msg[r], "rank 0: 2; rank 1: 4;"), "%s", s.msg[r]);
    }
}

Test(tp_state, initializing_needs_the_process_group)
{
    seen s;
    memset(&s, 0, sizeof s);
    s.size = 2;
    s.skip_group = 1;
    cr_expect_eq(spawn_init(&s, 2), KB_ESTATE);
    cr_expect(strstr(s.msg[0], "no process group (call kb_init_process_group"), "%s", s.msg[0]);
    kb_machine *m = kb_test_small_machine(0);
    cr_expect_eq(kb_tp_initialize_model_parallel(m, 1), KB_ESTATE, "from the driver too");
    kb_close(m);
}

Test(tp_state, lookups_before_initializing_are_refused)
{
    kb_machine *m = kb_test_small_machine(0);
    int v = 7;
    cr_expect_eq(kb_tp_get_tensor_model_parallel_rank(m, &v), KB_ESTATE);
    cr_expect_eq(v, -1);
    cr_expect(strstr(kb_last_error(m), "kb_tp_get_tensor_model_parallel_rank: model parallel is "
                                       "not initialized"),
              "%s", kb_last_error(m));
    cr_expect_eq(kb_tp_get_data_parallel_world_size(m, &v), KB_ESTATE);
    cr_expect_eq(kb_tp_get_tensor_model_parallel_world_size(m, NULL), KB_EINVAL);
    cr_expect_eq(kb_tp_model_parallel_is_initialized(m, NULL), KB_EINVAL);
    cr_expect_eq(kb_tp_get_data_parallel_rank(NULL, &v), KB_EINVAL);
    kb_close(m);
}

Test(tp_state, initializing_twice_is_refused_until_destroyed)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0);
    cr_assert_eq(kb_tp_initialize_model_parallel(m, 1), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_tp_initialize_model_parallel(m, 1), KB_ESTATE);
    cr_expect(strstr(kb_last_error(m), "already initialized"), "%s", kb_last_error(m));
    cr_expect_eq(kb_tp_destroy_model_parallel(m), 0);
    cr_expect_eq(kb_tp_initialize_model_parallel(m, 1), 0, "%s", kb_last_error(m));
    kb_close(m);
}

static int is_init(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    int *out = arg;
    return kb_tp_model_parallel_is_initialized(m, &out[rank]);
}

Test(tp_state, every_spawn_starts_uninitialized)
{
    kb_machine *m = kb_test_small_machine(0);
    seen s;
    memset(&s, 0, sizeof s);
    s.size = 2;
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0);
    cr_assert_eq(kb_tp_initialize_model_parallel(m, 1), 0, "the driver's own state");
    int out[2] = {-1, -1};
    cr_assert_eq(kb_spawn(m, is_init, 2, out), 0, "%s", kb_last_error(m));
    cr_expect(out[0] == 0 && out[1] == 0, "the ranks do not inherit the driver's state");
    cr_assert_eq(kb_spawn(m, lookups, 2, &s), 0, "%s", kb_last_error(m));
    int still = 0;
    cr_expect_eq(kb_tp_model_parallel_is_initialized(m, &still), 0);
    cr_expect_eq(still, 1, "the ranks left the driver's state alone");
    kb_close(m);
}

/* ---- PEs per rank ---------------------------------------------------------------- */

/* What each of 4 ranks (2 per SIP) resolves: the count and kb_tp_placement. */
typedef struct placed {
    int ask; /* kb_tp_set_pes_per_rank's argument */
    int pes[MAX_RANKS], rc[MAX_RANKS];
    kb_policy p[MAX_RANKS];
    char msg[MAX_RANKS][1024];
} placed;

static int place_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    placed *s = arg;
    int rc = kb_tp_set_pes_per_rank(m, s->ask);
    if (!rc) rc = kb_tp_get_pes_per_rank(m, &s->pes[rank]);
    if (!rc) rc = kb_tp_placement(m, &s->p[rank]);
    s->rc[rank] = rc;
    snprintf(s->msg[rank], sizeof s->msg[rank], "%s", rc ? kb_last_error(m) : "");
    return 0;
}

/* The small machine has 2 cubes x 2 PEs per SIP. With 2 ranks per SIP the
 * default gives each half of it: rank r (the (r / 2)-th of its SIP) takes
 * cube r / 2, both PEs, replicated. Asking for 1 PE puts ranks 0 and 2 on
 * PEs 0 and 1 of cube 0. */
Test(tp_state, ranks_that_share_a_sip_divide_its_pes)
{
    for (int ask = 0; ask <= 1; ask++) {
        placed s = {.ask = ask};
        kb_machine *m = kb_test_small_machine(0);
        cr_assert_eq(kb_spawn(m, place_rank, 4, &s), 0, "%s", kb_last_error(m));
        for (int r = 0; r < 4; r++) {
            cr_assert_eq(s.rc[r], 0, "rank %d: %s", r, s.msg[r]);
            int j = r / 2; /* its index among the ranks of its SIP */
            cr_expect_eq(s.pes[r], ask ? 1 : 2, "rank %d", r);
            cr_expect_eq(s.p[r].num_cubes * s.p[r].num_pes, s.pes[r], "rank %d", r);
            cr_expect_eq(s.p[r].first_cube, ask ? 0 : j, "rank %d", r);
            cr_expect_eq(s.p[r].first_pe, ask ? j : 0, "rank %d", r);
            cr_expect_eq(s.p[r].cube, KB_REPLICATE);
            cr_expect_eq(s.p[r].pe, KB_REPLICATE);
        }
        kb_close(m);
    }
}

Test(tp_state, pe_counts_that_do_not_fit_are_refused)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_expect_eq(kb_tp_set_pes_per_rank(m, 3), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "kb_tp_set_pes_per_rank: 3 PEs: expected 0 (the default"),
              "%s", kb_last_error(m));
    cr_expect_eq(kb_tp_set_pes_per_rank(m, 8), KB_EINVAL, "more than the SIP's 4");
    cr_expect_eq(kb_tp_set_pes_per_rank(m, -1), KB_EINVAL);
    /* 4 PEs for each of 2 ranks per SIP: the second runs past the SIP */
    placed s = {.ask = 4};
    cr_assert_eq(kb_spawn(m, place_rank, 4, &s), 0, "%s", kb_last_error(m));
    cr_expect_eq(s.rc[0], 0, "%s", s.msg[0]);
    cr_expect_eq(s.rc[2], KB_EINVAL);
    cr_expect(strstr(s.msg[2], "kb_tp_get_pes_per_rank: rank 2 is rank 1 of the ranks bound to a "
                               "SIP by default (rank / 2 SIPs) and takes 4 PEs from PE 4 of the "
                               "SIP, which runs past its 4 PEs"),
              "%s", s.msg[2]);
    kb_close(m);
}

/* ---- pipeline stages (kb_tp_initialize_model_parallel_pp) ------------------------------ */

#define PP_RANKS 8

typedef struct staged {
    int tp, pp[PP_RANKS]; /* sizes each rank passes */
    int rc[PP_RANKS];
    int tp_rank[PP_RANKS], dp_rank[PP_RANKS], dp_world[PP_RANKS], pp_rank[PP_RANKS],
        pp_world[PP_RANKS];
    int tp_id[PP_RANKS], dp_id[PP_RANKS], pp_id[PP_RANKS]; /* group handles: equal = same group */
    int dp_grank[PP_RANKS], pp_grank[PP_RANKS];
    char msg[PP_RANKS][1024];
} staged;

static int staged_lookups(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    staged *s = arg;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel_pp(m, s->tp, s->pp[rank]);
    s->rc[rank] = rc;
    snprintf(s->msg[rank], sizeof s->msg[rank], "%s", rc ? kb_last_error(m) : "");
    if (rc) return rc;
    kb_group tp = {-1}, dp = {-1}, pp = {-1};
    rc = kb_tp_get_tensor_model_parallel_rank(m, &s->tp_rank[rank]);
    if (!rc) rc = kb_tp_get_data_parallel_rank(m, &s->dp_rank[rank]);
    if (!rc) rc = kb_tp_get_data_parallel_world_size(m, &s->dp_world[rank]);
    if (!rc) rc = kb_tp_get_pipeline_model_parallel_rank(m, &s->pp_rank[rank]);
    if (!rc) rc = kb_tp_get_pipeline_model_parallel_world_size(m, &s->pp_world[rank]);
    if (!rc) rc = kb_tp_get_tensor_model_parallel_group(m, &tp);
    if (!rc) rc = kb_tp_get_data_parallel_group(m, &dp);
    if (!rc) rc = kb_tp_get_pipeline_model_parallel_group(m, &pp);
    s->tp_id[rank] = tp.id, s->dp_id[rank] = dp.id, s->pp_id[rank] = pp.id;
    s->dp_grank[rank] = kb_group_rank(m, dp), s->pp_grank[rank] = kb_group_rank(m, pp);
    s->rc[rank] = rc;
    return rc;
}

static int spawn_staged(staged *s, int nprocs)
{
    kb_machine *m = kb_test_small_machine(0);
    int rc = kb_spawn(m, staged_lookups, nprocs, s);
    kb_close(m);
    return rc;
}

/* Megatron's layout with n = world / pp ranks per stage: stage r / n,
 * tensor-parallel rank r mod tp, data-parallel rank (r mod n) / tp; two ranks
 * share a data-parallel group exactly when they share a stage and r mod tp,
 * a pipeline group exactly when r mod n is the same. */
static void expect_stages(int world, int tp, int pp)
{
    staged s;
    memset(&s, 0, sizeof s);
    s.tp = tp;
    for (int r = 0; r < world; r++)
        s.pp[r] = pp;
    cr_assert_eq(spawn_staged(&s, world), 0, "%s", s.msg[0]);
    int n = world / pp;
    for (int r = 0; r < world; r++) {
        cr_expect_eq(s.tp_rank[r], r % tp, "rank %d", r);
        cr_expect_eq(s.dp_rank[r], r % n / tp, "rank %d", r);
        cr_expect_eq(s.dp_world[r], n / tp, "rank %d", r);
        cr_expect_eq(s.pp_rank[r], r / n, "rank %d", r);
        cr_expect_eq(s.pp_world[r], pp, "rank %d", r);
        cr_expect_eq(s.dp_grank[r], r % n / tp, "rank %d in its data-parallel group", r);
        cr_expect_eq(s.pp_grank[r], r / n, "rank %d in its pipeline group", r);
        for (int q = 0; q < world; q++) {
            int same_dp = r / n == q / n && r % tp == q % tp, same_pp = r % n == q % n;
            cr_expect_eq(s.dp_id[r] == s.dp_id[q], same_dp, "ranks %d and %d: data-parallel", r, q);
            cr_expect_eq(s.pp_id[r] == s.pp_id[q], same_pp, "ranks %d and %d: pipeline", r, q);
            cr_expect_eq(s.tp_id[r] == s.tp_id[q], r / tp == q / tp, "ranks %d and %d: tensor", r,
                         q);
        }
    }
}

Test(tp_state, pipeline_stages_keep_data_parallel_groups_inside_a_stage)
{
    expect_stages(8, 2, 2);
    expect_stages(8, 1, 4);
    expect_stages(8, 2, 1);
    expect_stages(4, 1, 4);
}

Test(tp_state, pipeline_sizes_that_do_not_fit_are_refused)
{
    staged s;
    memset(&s, 0, sizeof s);
    s.tp = 2;
    for (int r = 0; r < 8; r++)
        s.pp[r] = 3;
    cr_expect_eq(spawn_staged(&s, 8), KB_EINVAL);
    cr_expect(strstr(s.msg[0], "tensor_model_parallel_size 2 x pipeline_model_parallel_size 3 "
                               "does not divide the world size 8"),
              "%s", s.msg[0]);
    for (int r = 0; r < 2; r++)
        s.pp[r] = 0;
    cr_expect_eq(spawn_staged(&s, 2), KB_EINVAL);
    cr_expect(strstr(s.msg[0], "pipeline_model_parallel_size 0: must be >= 1"), "%s", s.msg[0]);
    s.pp[0] = 1, s.pp[1] = 2;
    cr_expect_eq(spawn_staged(&s, 2), KB_EINVAL);
    for (int r = 0; r < 2; r++) {
        cr_expect(strstr(s.msg[r], "different pipeline_model_parallel_size values"), "%s",
                  s.msg[r]);
        cr_expect(strstr(s.msg[r], "rank 0: 1; rank 1: 2;"), "%s", s.msg[r]);
    }
}
