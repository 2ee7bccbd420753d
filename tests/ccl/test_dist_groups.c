/* Groups of host ranks (kb_new_group) and the collectives over them, on the
 * built-in machine (2 SIPs): four ranks, rank r bound to SIP r mod 2, each
 * with its tensor on cube 0, PE 0 of its SIP. Expected values come from
 * plain host loops over the inputs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"
#include "support/files.h"
#include "support/machine.h"

#define N     48
#define RANKS 4

static const kb_policy ONE_PE = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};

/* Element i of host rank r's input: small integers, exact sums in f32. */
static float val(int r, int i)
{
    return (float)((7 * r + 2 * i) % 13 - 6);
}

typedef struct out {
    float got[RANKS][RANKS * N];
    int grank[RANKS][2], gsize[RANKS][2];
    int id[RANKS][2];
} out;

static int input(kb_machine *m, int rank, int64_t n, kb_tensor *t)
{
    float h[RANKS * N];
    for (int i = 0; i < n; i++)
        h[i] = val(rank, i);
    int rc = kb_empty(m, NULL, 1, &n, KB_F32, &ONE_PE, t);
    return rc ? rc : kb_copy_from_host(m, *t, h, (size_t)n * sizeof *h, KB_F32);
}

/* Pairs {0, 1} and {2, 3}; every rank all-reduces within its pair. */
static int pairs(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    out *o = arg;
    static const int a[2] = {0, 1}, b[2] = {2, 3};
    kb_group g[2];
    kb_tensor t = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_new_group(m, a, 2, &g[0]);
    if (!rc) rc = kb_new_group(m, b, 2, &g[1]);
    for (int k = 0; k < 2 && !rc; k++) {
        o->grank[rank][k] = kb_group_rank(m, g[k]);
        o->gsize[rank][k] = kb_group_size(m, g[k]);
        o->id[rank][k] = g[k].id;
    }
    if (!rc) rc = input(m, rank, N, &t);
    if (!rc) rc = kb_all_reduce_group(m, g[rank / 2], t, KB_SUM);
    if (!rc) rc = kb_copy_to_host(m, t, o->got[rank], N * sizeof(float), KB_F32);
    return rc;
}

Test(dist_groups, two_pairs_each_reduce_within_their_group)
{
    kb_machine *m = kb_test_machine();
    out *o = calloc(1, sizeof *o);
    cr_assert_eq(kb_spawn(m, pairs, RANKS, o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < RANKS; r++) {
        int lo = r / 2 * 2;
        for (int i = 0; i < N; i++)
            cr_expect_eq(o->got[r][i], val(lo, i) + val(lo + 1, i), "rank %d element %d", r, i);
        for (int k = 0; k < 2; k++) {
            cr_expect_eq(o->grank[r][k], r / 2 == k ? r % 2 : -1, "rank %d in group %d", r, k);
            cr_expect_eq(o->gsize[r][k], 2);
            cr_expect_eq(o->id[r][k], o->id[0][k], "every rank gets the same handle");
        }
    }
    cr_expect_neq(o->id[0][0], o->id[0][1]);
    cr_expect_neq(o->id[0][0], KB_GROUP_WORLD.id);
    free(o);
    kb_close(m);
}

/* Group [3, 0] (SIPs 1 and 0): its rank 0 is host rank 3, so gathers put
 * rank 3's buffer first; the broadcast's src is a host rank (3). Ranks 1
 * and 2 are not members and only make the group. */
static int reversed(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    out *o = arg;
    static const int list[2] = {3, 0};
    kb_group g;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_new_group(m, list, 2, &g);
    if (rc || rank == 1 || rank == 2) return rc;
    kb_tensor in = {0}, gathered = {0}, scattered = {0}, b = {0};
    int64_t two = 2 * N, half = N / 2;
    if (!rc) rc = input(m, rank, N, &in);
    if (!rc) rc = kb_empty(m, NULL, 1, &two, KB_F32, &ONE_PE, &gathered);
    if (!rc) rc = kb_all_gather_group(m, g, gathered, in);
    if (!rc) rc = kb_copy_to_host(m, gathered, o->got[rank], 2 * N * sizeof(float), KB_F32);
    if (!rc) rc = kb_empty(m, NULL, 1, &half, KB_F32, &ONE_PE, &scattered);
    if (!rc) rc = kb_reduce_scatter_group(m, g, scattered, in, KB_MAX);
    float *rest = o->got[rank == 0 ? 1 : 2]; /* the non-members' rows */
    if (!rc) rc = kb_copy_to_host(m, scattered, rest, half * sizeof(float), KB_F32);
    if (!rc) rc = input(m, rank, N, &b);
    if (!rc) rc = kb_broadcast_group(m, g, b, 3);
    if (!rc) rc = kb_copy_to_host(m, b, rest + half, N * sizeof(float), KB_F32);
    if (!rc) rc = kb_barrier_group(m, g);
    return rc;
}

Test(dist_groups, index_order_follows_the_groups_rank_order)
{
    kb_machine *m = kb_test_machine();
    out *o = calloc(1, sizeof *o);
    cr_assert_eq(kb_spawn(m, reversed, RANKS, o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < RANKS; r += 3) {
        int gr = r == 3 ? 0 : 1; /* r's rank in [3, 0] */
        for (int i = 0; i < N; i++) {
            cr_expect_eq(o->got[r][i], val(3, i), "rank %d gathered block 0 element %d", r, i);
            cr_expect_eq(o->got[r][N + i], val(0, i), "rank %d gathered block 1 element %d", r, i);
        }
        const float *rs = o->got[r == 0 ? 1 : 2];
        for (int i = 0; i < N / 2; i++) {
            int e = gr * (N / 2) + i;
            float want = val(3, e) > val(0, e) ? val(3, e) : val(0, e);
            cr_expect_eq(rs[i], want, "rank %d scattered chunk element %d", r, i);
        }
        for (int i = 0; i < N; i++)
            cr_expect_eq(rs[N / 2 + i], val(3, i), "rank %d broadcast element %d", r, i);
    }
    free(o);
    kb_close(m);
}

/* ---- errors ------------------------------------------------------------------ */

static int bad_list(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)nprocs;
    const int *list = arg;
    kb_group g;
    int rc = kb_init_process_group(m, "ahbm");
    return rc ? rc : kb_new_group(m, list, 3, &g);
}

Test(dist_groups, a_bad_rank_list_is_refused_naming_the_entry)
{
    kb_machine *m = kb_test_machine();
    int dup[3] = {0, 1, 0}, range[3] = {0, 2, 1};
    cr_expect_eq(kb_spawn(m, bad_list, 2, dup), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "n 3"), "%s", kb_last_error(m)); /* 3 of a world of 2 */
    cr_expect_eq(kb_spawn(m, bad_list, 3, range), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_spawn(m, bad_list, 3, dup), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "host rank 0 is listed twice (ranks[0] and ranks[2])"), "%s",
              kb_last_error(m));
    int far[3] = {0, 1, 7};
    cr_expect_eq(kb_spawn(m, bad_list, 3, far), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "ranks[2] is 7, not a host rank (0..2)"), "%s",
              kb_last_error(m));
    kb_close(m);
}

/* Rank 1 lists the pair the other way round. */
static int differing_lists(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    static const int a[2] = {0, 1}, b[2] = {1, 0};
    kb_group g;
    int rc = kb_init_process_group(m, "ahbm");
    return rc ? rc : kb_new_group(m, rank ? b : a, 2, &g);
}

Test(dist_groups, ranks_that_list_different_groups_are_a_mismatch)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, differing_lists, 2, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "mismatched collectives"), "%s", e);
    cr_expect(strstr(e, "rank 0: kb_new_group(2 ranks) call #1"), "%s", e);
    kb_close(m);
}

/* The process group, the group [0, 1] and the rank's input. */
static int pair_and_input(kb_machine *m, int rank, kb_group *g, kb_tensor *t)
{
    static const int a[2] = {0, 1};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_new_group(m, a, 2, g);
    return rc ? rc : input(m, rank, N, t);
}

/* Rank 2 all-reduces in a group it is not in. */
static int outsider(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_group g;
    kb_tensor t = {0};
    int rc = pair_and_input(m, rank, &g, &t);
    if (!rc && rank == 2) rc = kb_all_reduce_group(m, g, t, KB_SUM);
    return rc;
}

Test(dist_groups, a_rank_outside_the_group_is_refused)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, outsider, 3, NULL), KB_EINVAL, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m),
                     "rank 2: kb_all_reduce: host rank 2 is not a member of group 4097 [0, 1]"),
              "%s", kb_last_error(m));
    kb_close(m);
}

/* The pair broadcasts from host rank 2, which is not in it. */
static int foreign_src(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_group g;
    kb_tensor t = {0};
    int rc = pair_and_input(m, rank, &g, &t);
    if (!rc && rank < 2) rc = kb_broadcast_group(m, g, t, 2);
    return rc;
}

Test(dist_groups, a_broadcast_source_outside_the_group_is_refused)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, foreign_src, 3, NULL), KB_EINVAL, "%s", kb_last_error(m));
    cr_expect(
        strstr(kb_last_error(m), ": kb_broadcast: src 2 is not a member of group 4097 [0, 1]"),
        "%s", kb_last_error(m));
    kb_close(m);
}

/* Rank 0 waits in the pair's all-reduce while rank 1 waits at the world's
 * barrier: neither can go on. */
static int crossed(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_group g;
    kb_tensor t = {0};
    int rc = pair_and_input(m, rank, &g, &t);
    if (rc) return rc;
    return rank == 0 ? kb_all_reduce_group(m, g, t, KB_SUM) : kb_barrier(m);
}

Test(dist_groups, waits_in_different_groups_are_a_deadlock_naming_both)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, crossed, 2, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "call #1 in group"), "%s", e);
    cr_expect(strstr(e, "waits for rank 1 (waiting in the world group)"), "%s", e);
    cr_expect(strstr(e, "kb_barrier() call #2 waits for rank 0 (waiting in another group)"), "%s",
              e);
    kb_close(m);
}

/* A handle is only good in the kb_spawn that made it. */
static int keep_handle(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)nprocs;
    static const int a[1] = {0};
    int rc = kb_init_process_group(m, "ahbm");
    return rc ? rc : kb_new_group(m, a, 1, arg);
}

static int use_handle(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)nprocs;
    return kb_barrier_group(m, *(kb_group *)arg);
}

Test(dist_groups, handles_belong_to_their_spawn_and_the_driver_has_the_world_only)
{
    kb_machine *m = kb_test_machine();
    kb_group g;
    cr_assert_eq(kb_spawn(m, keep_handle, 1, &g), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_group_size(m, g), -1, "the driver does not know a spawn's group");
    cr_expect_eq(kb_spawn(m, use_handle, 1, &g), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "is not a group of this kb_spawn"), "%s", kb_last_error(m));
    /* from the driver: {0} is the world, anything else is refused */
    int zero = 0, one = 1;
    kb_group w;
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_new_group(m, &zero, 1, &w), 0, "%s", kb_last_error(m));
    cr_expect_eq(w.id, KB_GROUP_WORLD.id);
    cr_expect_eq(kb_group_rank(m, w), 0);
    cr_expect_eq(kb_group_size(m, w), 1);
    cr_expect_eq(kb_new_group(m, &one, 1, &w), KB_EINVAL);
    cr_expect_eq(w.id, -1);
    cr_expect_eq(kb_barrier_group(m, g), KB_EINVAL);
    kb_close(m);
}

/* The same program twice: the same simulated end, bit for bit. */
Test(dist_groups, runs_are_deterministic)
{
    cr_expect_eq(kb_test_spawn_end(pairs, RANKS, sizeof(out)),
                 kb_test_spawn_end(pairs, RANKS, sizeof(out)));
}

/* The two pairs' all-reduces run one after the other (one collective at a
 * time), each whole: their spans in the trace do not overlap. */
Test(dist_groups, two_groups_collectives_do_not_overlap)
{
    kb_machine *m = kb_test_machine();
    out *o = calloc(1, sizeof *o);
    const char *path = "groups_trace.json";
    cr_assert_eq(kb_trace_start(m, path), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_spawn(m, pairs, RANKS, o), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[4096];
    uint64_t start[3], end[3];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"cat\":\"collective\",\"ph\":\"X\"") && strstr(line, "all_reduce") &&
            n < 3) {
            start[n] = kb_test_trace_ps(line, "ts");
            end[n] = start[n] + kb_test_trace_ps(line, "dur");
            n++;
        }
    fclose(f);
    remove(path);
    cr_assert_eq(n, 2, "one all-reduce span per pair");
    cr_expect(end[0] <= start[1] || end[1] <= start[0], "[%llu, %llu) and [%llu, %llu) overlap",
              (unsigned long long)start[0], (unsigned long long)end[0],
              (unsigned long long)start[1], (unsigned long long)end[1]);
    free(o);
    kb_close(m);
}

/* Ranks 0 and 1 all-reduce 4 MiB in their pair while rank 2, not in it,
 * reloads the collective configuration in the middle (at 60 us; the
 * collective runs from about 27 us to 154 us). The reload waits for the
 * collective (it would free the queues under it), then applies. */
typedef struct reload_run {
    uint64_t reload_at, reloaded_at;
    float got[2];
} reload_run;

static int reload_midway(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    reload_run *o = arg;
    static const int pair[2] = {0, 1};
    kb_group g;
    kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / 2};
    int64_t n = rank < 2 ? 1 << 20 : 1024;
    kb_tensor t;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_new_group(m, pair, 2, &g);
    if (!rc) rc = kb_full(m, NULL, 1, &n, KB_F32, &here, rank + 1, &t);
    if (!rc && rank < 2) {
        float *all = malloc((size_t)n * sizeof *all);
        rc = all ? kb_all_reduce_group(m, g, t, KB_SUM) : KB_ENOMEM;
        if (!rc) rc = kb_copy_to_host(m, t, all, (size_t)n * sizeof *all, KB_F32);
        if (!rc) o->got[rank] = all[n - 1];
        free(all);
        return rc;
    }
    float h[1024];
    while (!rc && kb_now_ps(m) < 60000000)
        rc = kb_copy_to_host(m, t, h, sizeof h, KB_F32);
    o->reload_at = kb_now_ps(m);
    if (!rc) rc = kb_ccl_configure(m, NULL, NULL, 0);
    o->reloaded_at = kb_now_ps(m);
    return rc;
}

Test(dist_groups, a_reload_during_another_groups_collective_waits_for_it)
{
    kb_machine *m = kb_test_machine();
    reload_run o = {0};
    cr_assert_eq(kb_spawn(m, reload_midway, 3, &o), 0, "%s", kb_last_error(m));
    kb_ccl_report r;
    cr_assert_eq(kb_ccl_last(m, &r), 0);
    cr_expect(o.reload_at > r.start_ps && o.reload_at < r.end_ps,
              "the reload came at %llu ps, inside the collective [%llu, %llu)",
              (unsigned long long)o.reload_at, (unsigned long long)r.start_ps,
              (unsigned long long)r.end_ps);
    cr_expect_geq(o.reloaded_at, r.end_ps, "the reload waited for the collective's end");
    cr_expect_eq(o.got[0], 3.0f);
    cr_expect_eq(o.got[1], 3.0f);
    kb_close(m);
}
