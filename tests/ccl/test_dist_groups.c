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

/* Starts the process group and makes the pairs {0, 1} and {2, 3}, in g. */
static int two_pairs(kb_machine *m, kb_group g[2])
{
    static const int a[2] = {0, 1}, b[2] = {2, 3};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_new_group(m, a, 2, &g[0]);
    if (!rc) rc = kb_new_group(m, b, 2, &g[1]);
    return rc;
}

/* Pairs {0, 1} and {2, 3}; every rank all-reduces within its pair. */
static int pairs(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    out *o = arg;
    kb_group g[2];
    kb_tensor t = {0};
    int rc = two_pairs(m, g);
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
/* Starts the process group and makes [3, 0] in *g. */
static int group_3_0(kb_machine *m, kb_group *g)
{
    static const int list[2] = {3, 0};
    int rc = kb_init_process_group(m, "ahbm");
    return rc ? rc : kb_new_group(m, list, 2, g);
}

static int reversed(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    out *o = arg;
    kb_group g;
    int rc = group_3_0(m, &g);
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

/* The same group [3, 0]: the all-to-all's chunk j goes to the group's rank
 * j (host rank 3 first), and the reduce to host rank 0 leaves host rank
 * 3's buffer as it was. */
static int reversed_a2a_reduce(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    out *o = arg;
    kb_group g;
    int rc = group_3_0(m, &g);
    if (rc || rank == 1 || rank == 2) return rc;
    kb_tensor in = {0}, swapped = {0}, b = {0};
    int64_t n = N;
    if (!rc) rc = input(m, rank, N, &in);
    if (!rc) rc = kb_empty(m, NULL, 1, &n, KB_F32, &ONE_PE, &swapped);
    if (!rc) rc = kb_all_to_all_group(m, g, swapped, in);
    if (!rc) rc = kb_copy_to_host(m, swapped, o->got[rank], N * sizeof(float), KB_F32);
    if (!rc) rc = input(m, rank, N, &b);
    if (!rc) rc = kb_reduce_group(m, g, b, 0, KB_SUM);
    if (!rc) rc = kb_copy_to_host(m, b, o->got[rank] + N, N * sizeof(float), KB_F32);
    return rc;
}

Test(dist_groups, all_to_all_and_reduce_follow_the_groups_rank_order)
{
    kb_machine *m = kb_test_machine();
    out *o = calloc(1, sizeof *o);
    cr_assert_eq(kb_spawn(m, reversed_a2a_reduce, RANKS, o), 0, "%s", kb_last_error(m));
    int c = N / 2, host[2] = {3, 0}; /* group rank -> host rank */
    for (int gr = 0; gr < 2; gr++) {
        int r = host[gr];
        for (int j = 0; j < 2; j++) /* chunk j: group rank j's chunk gr */
            for (int i = 0; i < c; i++)
                cr_expect_eq(o->got[r][j * c + i], val(host[j], gr * c + i),
                             "host rank %d chunk %d element %d", r, j, i);
        for (int i = 0; i < N; i++)
            cr_expect_eq(o->got[r][N + i], r == 0 ? val(3, i) + val(0, i) : val(3, i),
                         "host rank %d after the reduce, element %d", r, i);
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

/* The pair reduces to host rank 2, which is not in it. */
static int foreign_dst(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_group g;
    kb_tensor t = {0};
    int rc = pair_and_input(m, rank, &g, &t);
    if (!rc && rank < 2) rc = kb_reduce_group(m, g, t, 2, KB_SUM);
    return rc;
}

Test(dist_groups, a_reduce_destination_outside_the_group_is_refused)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, foreign_dst, 3, NULL), KB_EINVAL, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), ": kb_reduce: dst 2 is not a member of group 4097 [0, 1]"),
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
    cr_expect(strstr(e, "waits for rank 1 (waiting in kb_barrier over the world)"), "%s", e);
    cr_expect(strstr(e, "kb_barrier() call #2 waits for rank 0 (waiting in kb_all_reduce over "
                        "group 4097 [0, 1])"),
              "%s", e);
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

/* The [start, end) of every all-reduce span in the trace of kb_spawn(fn,
 * RANKS, arg) on a fresh machine, in trace order, and its host thread
 * (tid, when not NULL); returns how many (at most max). Whether a thread
 * named "collectives 2" was declared goes to *second (when not NULL). */
static int all_reduce_spans_on(kb_rank_fn fn, void *arg, uint64_t *start, uint64_t *end, int *tid,
                               int *second, int max)
{
    kb_machine *m = kb_test_machine();
    const char *path = "groups_trace.json";
    cr_assert_eq(kb_trace_start(m, path), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_spawn(m, fn, RANKS, arg), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[4096];
    int n = 0;
    if (second) *second = 0;
    while (fgets(line, sizeof line, f)) {
        if (second && strstr(line, "\"thread_name\"") && strstr(line, "\"collectives 2\""))
            *second = 1;
        if (strstr(line, "\"cat\":\"collective\",\"ph\":\"X\"") && strstr(line, "all_reduce") &&
            n < max) {
            start[n] = kb_test_trace_ps(line, "ts");
            end[n] = start[n] + kb_test_trace_ps(line, "dur");
            const char *t = strstr(line, "\"tid\":");
            if (tid) cr_assert(t && sscanf(t + 6, "%d", &tid[n]) == 1, "%s", line);
            n++;
        }
    }
    fclose(f);
    remove(path);
    kb_close(m);
    return n;
}

static int all_reduce_spans(kb_rank_fn fn, void *arg, uint64_t *start, uint64_t *end, int max)
{
    return all_reduce_spans_on(fn, arg, start, end, NULL, NULL, max);
}

/* The two pairs' tensors share PEs (ranks 0 and 2 on sip0/cube0/pe0, 1 and
 * 3 on sip1's): their all-reduces take turns, each whole, so their spans
 * do not overlap. */
Test(dist_groups, groups_on_the_same_pes_take_turns)
{
    out *o = calloc(1, sizeof *o);
    uint64_t start[3], end[3];
    cr_assert_eq(all_reduce_spans(pairs, o, start, end, 3), 2, "one all-reduce span per pair");
    cr_expect(end[0] <= start[1] || end[1] <= start[0], "[%llu, %llu) and [%llu, %llu) overlap",
              (unsigned long long)start[0], (unsigned long long)end[0],
              (unsigned long long)start[1], (unsigned long long)end[1]);
    free(o);
}

/* Three pairs {0, 1}, {2, 3}, {4, 5} on the same two PEs (even ranks on
 * sip0/cube0/pe0, odd ones on sip1's): two calls wait for the running one
 * at once; each pair gets its own sums, one all-reduce after the other. */
#define TRIO_RANKS 6
typedef struct trio {
    float got[TRIO_RANKS];
    uint64_t end[TRIO_RANKS];
} trio;

static int three_pairs(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    trio *o = arg;
    int pair[2] = {rank / 2 * 2, rank / 2 * 2 + 1};
    kb_group g = KB_GROUP_WORLD;
    int rc = kb_init_process_group(m, "ahbm");
    for (int k = 0; k < TRIO_RANKS / 2 && !rc; k++) {
        const int list[2] = {2 * k, 2 * k + 1};
        kb_group h;
        rc = kb_new_group(m, list, 2, &h);
        if (list[0] == pair[0]) g = h;
    }
    kb_tensor t = {0};
    if (!rc) rc = input(m, rank, N, &t);
    if (!rc) rc = kb_all_reduce_group(m, g, t, KB_SUM);
    o->end[rank] = kb_now_ps(m);
    float h[N];
    if (!rc) rc = kb_copy_to_host(m, t, h, sizeof h, KB_F32);
    if (!rc) o->got[rank] = h[N - 1];
    return rc;
}

Test(dist_groups, several_calls_waiting_for_the_same_pes_run_in_turn, .timeout = 60)
{
    kb_machine *m = kb_test_machine();
    trio o = {0};
    cr_assert_eq(kb_spawn(m, three_pairs, TRIO_RANKS, &o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < TRIO_RANKS; r++) {
        int lo = r / 2 * 2;
        cr_expect_eq(o.got[r], val(lo, N - 1) + val(lo + 1, N - 1), "rank %d", r);
    }
    cr_expect(o.end[0] != o.end[2] && o.end[2] != o.end[4] && o.end[0] != o.end[4],
              "the pairs end at different times: %llu, %llu, %llu ps", (unsigned long long)o.end[0],
              (unsigned long long)o.end[2], (unsigned long long)o.end[4]);
    kb_close(m);
}

/* Pairs {0, 1} and {2, 3} again, each pair on its own PEs (PE k of cube 0
 * of each SIP for pair k), reducing 16 KiB per rank; bit k of `only` says
 * whether pair k calls its all-reduce. */
#define APART_N 4096
typedef struct apart {
    int only;
    float first[RANKS], last[RANKS];
} apart;

static int pairs_apart(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    apart *o = arg;
    kb_policy own = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / 2};
    int64_t n = APART_N;
    kb_group g[2];
    kb_tensor t;
    int rc = two_pairs(m, g);
    if (rc || !(o->only >> (rank / 2) & 1)) return rc;
    float *h = malloc(APART_N * sizeof *h);
    if (!h) return KB_ENOMEM;
    for (int i = 0; i < APART_N; i++)
        h[i] = val(rank, i);
    rc = kb_empty(m, NULL, 1, &n, KB_F32, &own, &t);
    if (!rc) rc = kb_copy_from_host(m, t, h, APART_N * sizeof *h, KB_F32);
    if (!rc) rc = kb_all_reduce_group(m, g[rank / 2], t, KB_SUM);
    if (!rc) rc = kb_copy_to_host(m, t, h, APART_N * sizeof *h, KB_F32);
    if (!rc) o->first[rank] = h[0], o->last[rank] = h[APART_N - 1];
    free(h);
    return rc;
}

/* On PEs of their own the pairs' all-reduces run at the same time: their
 * spans overlap (on two host threads of the trace), together they take
 * less than one after the other would, each takes at least as long as
 * alone (they share the SIP link), and each pair gets its own sums. */
Test(dist_groups, groups_on_their_own_pes_run_at_the_same_time)
{
    uint64_t s0[2], e0[2], s1[2], e1[2], s[3], e[3];
    apart alone0 = {.only = 1}, alone1 = {.only = 2}, both = {.only = 3};
    cr_assert_eq(all_reduce_spans(pairs_apart, &alone0, s0, e0, 2), 1);
    cr_assert_eq(all_reduce_spans(pairs_apart, &alone1, s1, e1, 2), 1);
    int tid[3], second;
    cr_assert_eq(all_reduce_spans_on(pairs_apart, &both, s, e, tid, &second, 3), 2);
    cr_expect_neq(tid[0], tid[1], "overlapping spans go to different host threads");
    cr_expect(second, "the second thread of collectives is named");
    uint64_t d0 = e0[0] - s0[0], d1 = e1[0] - s1[0];
    cr_expect(s[0] < e[1] && s[1] < e[0], "[%llu, %llu) and [%llu, %llu) do not overlap",
              (unsigned long long)s[0], (unsigned long long)e[0], (unsigned long long)s[1],
              (unsigned long long)e[1]);
    uint64_t lo = s[0] < s[1] ? s[0] : s[1], hi = e[0] > e[1] ? e[0] : e[1];
    cr_expect_lt(hi - lo, d0 + d1, "together %llu ps, one after the other %llu ps",
                 (unsigned long long)(hi - lo), (unsigned long long)(d0 + d1));
    uint64_t alone = d0 < d1 ? d0 : d1;
    cr_expect_geq(e[0] - s[0], alone);
    cr_expect_geq(e[1] - s[1], alone);
    for (int r = 0; r < RANKS; r++) {
        int lo_rank = r / 2 * 2;
        cr_expect_eq(both.first[r], val(lo_rank, 0) + val(lo_rank + 1, 0), "rank %d", r);
        cr_expect_eq(both.last[r], val(lo_rank, APART_N - 1) + val(lo_rank + 1, APART_N - 1),
                     "rank %d", r);
    }
}

/* While pair {0, 1} all-reduces 8 MiB (PE 0 of cube 0 of each SIP), pair
 * {2, 3} all-reduces small tensors over 20 PE sets in turn (PE 0 of cubes
 * 1..15, PE 1 of cubes 0..4), one install each, all made after the big
 * one's: the cache fills (the world's install from kb_init_process_group
 * goes first), and then the running pair's install is the least recently
 * used. It must stay: both pairs' sums come out right. */
#define EVICT_SETS 20
typedef struct evict_run {
    float big[2];
    float small[2][EVICT_SETS];
    uint64_t big_end, small_end[EVICT_SETS]; /* when the all-reduces returned */
} evict_run;

static int evict_beside(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    evict_run *o = arg;
    kb_group g[2];
    int rc = two_pairs(m, g);
    if (!rc && rank < 2) {
        kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};
        int64_t n = 2 << 20;
        kb_tensor t;
        float *all = malloc((size_t)n * sizeof *all);
        rc = all ? kb_full(m, NULL, 1, &n, KB_F32, &here, rank + 1, &t) : KB_ENOMEM;
        if (!rc) rc = kb_barrier(m);
        if (!rc) rc = kb_all_reduce_group(m, g[0], t, KB_SUM);
        o->big_end = kb_now_ps(m);
        if (!rc) rc = kb_copy_to_host(m, t, all, (size_t)n * sizeof *all, KB_F32);
        if (!rc) o->big[rank] = all[n - 1];
        free(all);
        return rc;
    }
    if (!rc) rc = kb_barrier(m); /* the big one is installed first */
    for (int k = 0; k < EVICT_SETS && !rc; k++) {
        int cube = k < 15 ? k + 1 : k - 15, pe = k < 15 ? 0 : 1;
        kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, cube, pe};
        int64_t n = 256;
        kb_tensor t;
        float h[256];
        rc = kb_full(m, NULL, 1, &n, KB_F32, &here, (float)(rank + k), &t);
        if (!rc) rc = kb_all_reduce_group(m, g[1], t, KB_SUM);
        o->small_end[k] = kb_now_ps(m);
        if (!rc) rc = kb_copy_to_host(m, t, h, sizeof h, KB_F32);
        if (!rc) o->small[rank - 2][k] = h[255];
        if (!rc) rc = kb_free(m, t);
    }
    return rc;
}

Test(dist_groups, an_install_in_use_is_not_evicted_by_another_groups_calls)
{
    kb_machine *m = kb_test_machine();
    evict_run *o = calloc(1, sizeof *o);
    cr_assert_eq(kb_spawn(m, evict_beside, RANKS, o), 0, "%s", kb_last_error(m));
    cr_expect_lt(o->small_end[EVICT_SETS - 1], o->big_end,
                 "the small calls all ran during the big one (the last ended at %llu ps, the big "
                 "one at %llu ps)",
                 (unsigned long long)o->small_end[EVICT_SETS - 1], (unsigned long long)o->big_end);
    cr_expect_eq(o->big[0], 3.0f);
    cr_expect_eq(o->big[1], 3.0f);
    for (int k = 0; k < EVICT_SETS; k++)
        for (int r = 0; r < 2; r++)
            cr_expect_eq(o->small[r][k], (float)(2 + k + 3 + k), "call %d rank %d", k, 2 + r);
    free(o);
    kb_close(m);
}

/* Pairs {0, 1} and {2, 3} all-reduce 4 MiB each on their own PEs, side by
 * side, while rank 4 (on neither pair's PEs) fails at 100 us: the spawn
 * cancels both running collectives, returns rank 4's error, and the
 * machine then runs both pairs again with the right sums. */
typedef struct cancel_run {
    int fail; /* rank 4 fails at 100 us */
    float last[RANKS];
    uint64_t entered[RANKS]; /* when the pairs' ranks called their all-reduce */
    int rc[RANKS];           /* and what it returned */
} cancel_run;

static int pairs_or_fail(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    cancel_run *o = arg;
    kb_group g[2];
    kb_policy own = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / 2};
    int64_t n = rank < RANKS ? 1 << 20 : 1024;
    kb_tensor t;
    int rc = two_pairs(m, g);
    if (!rc) rc = kb_full(m, NULL, 1, &n, KB_F32, &own, rank + 1, &t);
    if (!rc && rank == RANKS) {
        float h[1024];
        while (!rc && kb_now_ps(m) < 100000000)
            rc = kb_copy_to_host(m, t, h, sizeof h, KB_F32);
        return rc ? rc : o->fail ? KB_ERANGE : 0;
    }
    float *all = rc ? NULL : malloc((size_t)n * sizeof *all);
    if (!rc && !all) rc = KB_ENOMEM;
    o->entered[rank] = kb_now_ps(m);
    if (!rc) rc = o->rc[rank] = kb_all_reduce_group(m, g[rank / 2], t, KB_SUM);
    if (!rc) rc = kb_copy_to_host(m, t, all, (size_t)n * sizeof *all, KB_F32);
    if (!rc) o->last[rank] = all[n - 1];
    free(all);
    return rc;
}

Test(dist_groups, a_failing_rank_cancels_the_collectives_running_side_by_side)
{
    kb_machine *m = kb_test_machine();
    cancel_run o = {.fail = 1};
    cr_assert_eq(kb_spawn(m, pairs_or_fail, RANKS + 1, &o), KB_ERANGE, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), "rank 4"), "%s", kb_last_error(m));
    for (int r = 0; r < RANKS; r++) {
        cr_expect_lt(o.entered[r], 100000000ull, "rank %d was in its all-reduce before", r);
        cr_expect_eq(o.rc[r], KB_ECANCELED, "rank %d", r);
    }
    cr_expect_lt(kb_now_ps(m), 200000000ull, "the collectives did not run to their end");
    cancel_run again = {.fail = 0};
    cr_assert_eq(kb_spawn(m, pairs_or_fail, RANKS + 1, &again), 0, "%s", kb_last_error(m));
    for (int r = 0; r < RANKS; r++)
        cr_expect_eq(again.last[r], (float)(r / 2 * 2 + 1 + r / 2 * 2 + 2), "rank %d", r);
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
