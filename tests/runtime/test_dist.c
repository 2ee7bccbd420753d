/* Host ranks and the process group (kernbench/dist.h) on the built-in
 * machine (2 SIPs x 16 cubes x 8 PEs): rank and device state per rank,
 * concurrent copies from ranks, error propagation and sibling
 * cancellation (and what a canceled rank's call says), the process-group
 * rules, deadlock reports for mismatched collective calls, and two host
 * ranks whose buffers share a PE. Collective data is checked in
 * tests/ccl/test_dist_coll.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"

static kb_machine *open_m(void)
{
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, NULL, eb, sizeof eb), 0, "%s", eb);
    return m;
}

/* One PE of the bound SIP holds the whole tensor: one shard per rank. */
static const kb_policy ONE_PE = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};

typedef struct seen {
    int rank[8], world[8], dev[8];
} seen;

static int record(kb_machine *m, int rank, int nprocs, void *arg)
{
    seen *s = arg;
    s->rank[rank] = kb_rank(m);
    s->world[rank] = kb_world_size(m);
    s->dev[rank] = kb_get_device(m);
    cr_assert_eq(nprocs, kb_world_size(m));
    return 0;
}

Test(dist, spawn_defaults_to_one_rank_per_sip_bound_to_it)
{
    kb_machine *m = open_m();
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    seen s;
    memset(&s, -1, sizeof s);
    cr_assert_eq(kb_spawn(m, record, 0, &s), 0, "%s", kb_last_error(m));
    for (int r = 0; r < sips; r++) {
        cr_expect_eq(s.rank[r], r);
        cr_expect_eq(s.world[r], sips);
        cr_expect_eq(s.dev[r], r);
    }
    cr_expect_eq(s.rank[sips], -1, "no extra rank ran");
    cr_expect_eq(kb_rank(m), 0);
    cr_expect_eq(kb_world_size(m), 1);
    kb_close(m);
}

Test(dist, more_ranks_than_sips_wrap_around_the_sips)
{
    kb_machine *m = open_m();
    seen s;
    memset(&s, -1, sizeof s);
    cr_assert_eq(kb_spawn(m, record, 5, &s), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 5; r++)
        cr_expect_eq(s.dev[r], r % 2);
    kb_close(m);
}

static int rebind(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    int *out = arg;
    if (kb_set_device(m, 1 - rank)) return -1;
    kb_tensor t;
    int64_t shape[1] = {64};
    if (kb_zeros(m, NULL, 1, shape, KB_F32, &ONE_PE, &t)) return -1; /* blocks: others run */
    out[rank] = kb_get_device(m);
    kb_shard_info si;
    if (kb_tensor_get_shard(m, t, 0, &si)) return -1;
    out[2 + rank] = si.sip;
    return kb_free(m, t);
}

Test(dist, set_device_binds_only_the_calling_rank)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_set_device(m, 1), 0);
    int out[4] = {-1, -1, -1, -1};
    cr_assert_eq(kb_spawn(m, rebind, 2, out), 0, "%s", kb_last_error(m));
    cr_expect_eq(out[0], 1);
    cr_expect_eq(out[1], 0);
    cr_expect_eq(out[2], 1, "rank 0's tensor lives on SIP 1");
    cr_expect_eq(out[3], 0, "rank 1's tensor lives on SIP 0");
    cr_expect_eq(kb_get_device(m), 1, "the driver's binding is untouched");
    kb_close(m);
}

#define N_COPY 4096

static int copy_round_trip(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    int *bad = arg;
    int64_t shape[1] = {N_COPY};
    kb_tensor t;
    if (kb_empty(m, NULL, 1, shape, KB_F32, NULL, &t)) return -1;
    float *in = malloc(N_COPY * sizeof *in), *out = malloc(N_COPY * sizeof *out);
    for (int i = 0; i < N_COPY; i++)
        in[i] = (float)(rank * 100000 + i);
    int rc = kb_copy_from_host(m, t, in, N_COPY * sizeof *in, KB_F32);
    if (!rc) rc = kb_copy_to_host(m, t, out, N_COPY * sizeof *out, KB_F32);
    for (int i = 0; !rc && i < N_COPY; i++)
        if (out[i] != in[i]) bad[rank]++;
    free(in);
    free(out);
    return rc ? rc : kb_free(m, t);
}

Test(dist, ranks_copying_at_the_same_time_keep_their_own_data)
{
    kb_machine *m = open_m();
    int bad[4] = {0};
    cr_assert_eq(kb_spawn(m, copy_round_trip, 4, bad), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 4; r++)
        cr_expect_eq(bad[r], 0, "rank %d: %d elements differ", r, bad[r]);
    kb_close(m);
}

/* Rank 1 fails; rank 0 waits in a collective until it is canceled. */
static int one_fails(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    int *canceled = arg;
    if (kb_init_process_group(m, "ahbm")) return -1;
    if (rank == 1) return kb_set_device(m, 7);
    kb_tensor t;
    int64_t shape[1] = {16};
    int rc = kb_zeros(m, NULL, 1, shape, KB_F32, &ONE_PE, &t);
    if (!rc) rc = kb_all_reduce(m, t, KB_SUM);
    *canceled = rc == KB_ECANCELED;
    return rc;
}

Test(dist, a_failing_rank_cancels_its_siblings_and_is_the_only_root_cause)
{
    kb_machine *m = open_m();
    int canceled = 0;
    int rc = kb_spawn(m, one_fails, 2, &canceled);
    cr_assert_eq(rc, KB_ERANGE, "got %d: %s", rc, kb_last_error(m));
    cr_expect(canceled, "rank 0's collective returned KB_ECANCELED");
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "rank 1: kb_set_device: SIP 7 does not exist"), "%s", e);
    cr_expect_null(strstr(e, "rank 0"), "a canceled rank is not a root cause: %s", e);
    /* the machine stays usable: a new group runs */
    seen s;
    cr_expect_eq(kb_spawn(m, record, 2, &s), 0, "%s", kb_last_error(m));
    kb_close(m);
}

static int no_group(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)nprocs, (void)arg;
    kb_tensor t;
    int64_t shape[1] = {16};
    if (kb_zeros(m, NULL, 1, shape, KB_F32, &ONE_PE, &t)) return -1;
    return kb_all_reduce(m, t, KB_SUM);
}

Test(dist, collectives_need_a_process_group)
{
    kb_machine *m = open_m();
    cr_expect_eq(kb_spawn(m, no_group, 2, NULL), KB_ESTATE);
    cr_expect(strstr(kb_last_error(m), "no process group (call kb_init_process_group"), "%s",
              kb_last_error(m));
    kb_tensor t;
    int64_t shape[1] = {16};
    cr_assert_eq(kb_zeros(m, NULL, 1, shape, KB_F32, &ONE_PE, &t), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_all_reduce(m, t, KB_SUM), KB_ESTATE, "from the driver too");
    cr_expect_eq(kb_init_process_group(m, "nccl"), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "backend 'nccl' is not known"), "%s", kb_last_error(m));
    cr_expect_eq(kb_is_initialized(m), 0);
    kb_close(m);
}

static int nested(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)nprocs;
    return kb_spawn(m, record, 2, arg);
}

Test(dist, nested_spawn_is_refused)
{
    kb_machine *m = open_m();
    seen s;
    cr_expect_eq(kb_spawn(m, nested, 2, &s), KB_ESTATE);
    cr_expect(strstr(kb_last_error(m), "nested spawns are not supported"), "%s", kb_last_error(m));
    kb_close(m);
}

/* Rank 0 sums, rank 1 takes the maximum. */
static int mismatched_op(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    if (kb_init_process_group(m, "ahbm")) return -1;
    kb_tensor t;
    int64_t shape[1] = {32};
    if (kb_zeros(m, rank ? "y" : "x", 1, shape, KB_F32, &ONE_PE, &t)) return -1;
    return kb_all_reduce(m, t, rank ? KB_MAX : KB_SUM);
}

Test(dist, mismatched_ops_are_a_deadlock_naming_each_ranks_call)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_spawn(m, mismatched_op, 2, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "mismatched collectives"), "%s", e);
    cr_expect(strstr(e, "rank 0: kb_all_reduce(tensor 'x': 32 f32 per shard, sum) call #1"), "%s",
              e);
    cr_expect(strstr(e, "rank 1: kb_all_reduce(tensor 'y': 32 f32 per shard, max) call #1"), "%s",
              e);
    kb_close(m);
}

static int mismatched_size(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    if (kb_init_process_group(m, "ahbm")) return -1;
    kb_tensor t;
    int64_t shape[1] = {rank ? 64 : 32};
    if (kb_zeros(m, NULL, 1, shape, KB_F32, &ONE_PE, &t)) return -1;
    return kb_all_reduce(m, t, KB_SUM);
}

Test(dist, mismatched_sizes_are_a_deadlock)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_spawn(m, mismatched_size, 2, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), "32 f32 per shard"), "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), "64 f32 per shard"), "%s", kb_last_error(m));
    kb_close(m);
}

/* Rank 0 makes one barrier more than rank 1. */
static int extra_barrier(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    if (kb_init_process_group(m, "ahbm") || kb_barrier(m)) return -1;
    return rank == 0 ? kb_barrier(m) : 0;
}

Test(dist, a_call_no_other_rank_makes_is_reported_with_the_ranks_that_ended)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_spawn(m, extra_barrier, 3, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "deadlock between ranks"), "%s", e);
    cr_expect(strstr(e, "rank 0"), "%s", e);
    cr_expect(strstr(e, "kb_barrier() call #2 waits for ranks 1 (ended), 2 (ended)"), "%s", e);
    kb_close(m);
}

static void nop(tl_ctx *k)
{
    (void)k;
}

/* Rank 0 launches without waiting; rank 1's kb_sync has nothing of its own. */
static int sync_own(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    kb_launch_id *ids = arg;
    kb_launch_opts o = {{1, 1, 1}, rank};
    if (rank == 0) return kb_launch(m, "nop", nop, &o, NULL, 0, &ids[0]);
    uint64_t t0 = kb_now_ps(m);
    int rc = kb_sync(m);
    ids[1].id = kb_now_ps(m) - t0;
    return rc;
}

Test(dist, a_rank_syncs_only_its_own_launches_and_the_driver_adopts_the_rest)
{
    kb_machine *m = open_m();
    kb_launch_id ids[2] = {{0}, {99}};
    cr_assert_eq(kb_spawn(m, sync_own, 2, ids), 0, "%s", kb_last_error(m));
    cr_expect_eq(ids[1].id, 0, "rank 1's kb_sync did not run rank 0's launch");
    cr_expect_eq(kb_wait(m, ids[0]), 0, "the driver waits for what rank 0 left: %s",
                 kb_last_error(m));
    kb_close(m);
}

static int wait_foreign(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    kb_launch_id *ids = arg;
    kb_launch_opts o = {{1, 1, 1}, rank};
    if (rank == 0) return kb_launch(m, "nop", nop, &o, NULL, 0, &ids[0]) || kb_sync(m);
    kb_launch_id id = ids[0]; /* rank 0 launched before it blocked in kb_sync */
    int rc = kb_wait(m, id);
    ids[1].id = (uint64_t)(rc == KB_EINVAL && strstr(kb_last_error(m), "belongs to host rank 0"));
    return 0;
}

Test(dist, waiting_for_another_ranks_launch_is_refused)
{
    kb_machine *m = open_m();
    kb_launch_id ids[2] = {{0}, {0}};
    cr_assert_eq(kb_spawn(m, wait_foreign, 2, ids), 0, "%s", kb_last_error(m));
    cr_expect_eq(ids[1].id, 1, "rank 1 was told the launch is rank 0's");
    kb_close(m);
}

static int close_from_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    char *msg = arg;
    if (rank != 1) return 0;
    kb_close(m);
    snprintf(msg, 256, "%s", kb_last_error(m));
    return 0;
}

Test(dist, kb_close_from_a_rank_is_refused_and_the_machine_stays_open)
{
    kb_machine *m = open_m();
    char msg[256] = "";
    cr_assert_eq(kb_spawn(m, close_from_rank, 2, msg), 0, "%s", kb_last_error(m));
    cr_expect(strstr(msg, "kb_close: called from rank 1") != NULL, "%s", msg);
    int64_t shape[1] = {16};
    kb_tensor t;
    cr_expect_eq(kb_full(m, "after", 1, shape, KB_F32, &ONE_PE, 1.0, &t), 0, "%s",
                 kb_last_error(m));
    kb_close(m);
}

/* ---- abandoned ranks, own messages, freed tensors, big reports ---- */

typedef struct abandon {
    int tries, woke, rc;
} abandon;

/* Rank 1 retries kb_barrier while it fails; rank 0 returns at once, so
 * kb_spawn abandons rank 1 after its cancellation rounds. */
static int retry_barrier(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    abandon *a = arg;
    if (rank == 0) return 0;
    int rc;
    while ((rc = kb_barrier(m)) != 0 && a->tries < 1000)
        a->tries++;
    a->woke = 1, a->rc = rc;
    return rc;
}

static int two_barriers(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)nprocs, (void)arg;
    int rc = kb_barrier(m);
    return rc ? rc : kb_barrier(m);
}

Test(dist, an_abandoned_rank_never_joins_a_later_group)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0);
    abandon a = {0, 0, 0};
    cr_assert_eq(kb_spawn(m, retry_barrier, 2, &a), KB_EDEADLOCK);
    cr_expect(strstr(kb_last_error(m), "abandoned") != NULL, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), "rank 1") != NULL, "%s", kb_last_error(m));
    for (int n = 1; n <= 2; n++)
        cr_expect_eq(kb_spawn(m, two_barriers, n, NULL), 0, "%d ranks: %s", n, kb_last_error(m));
    cr_expect(!(a.woke && a.rc == 0), "the abandoned rank's barrier succeeded in a later group");
    kb_close(m);
}

static int own_failure(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    if (rank == 0) {
        kb_set_device(m, 99); /* fails; the rank handles it and goes on */
        return kb_barrier(m);
    }
    return KB_EIO; /* no failed kernbench call of its own */
}

Test(dist, a_rank_failing_without_a_failed_call_never_gets_another_ranks_message)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0);
    cr_assert_eq(kb_spawn(m, own_failure, 2, NULL), KB_EIO);
    char want[160];
    snprintf(want, sizeof want, "rank 1: the rank function returned %d (%s)", KB_EIO,
             kb_strerror(KB_EIO));
    cr_expect(strstr(kb_last_error(m), want) != NULL, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), "kb_set_device") == NULL, "%s", kb_last_error(m));
    kb_close(m);
}

typedef struct freed {
    int rc[2];
    char msg[2][512];
} freed;

static int reduce_freed(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    freed *f = arg;
    int64_t shape[1] = {8};
    kb_tensor t;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_full(m, "x", 1, shape, KB_F32, &ONE_PE, rank + 1.0, &t);
    if (!rc && rank == 1) rc = kb_free(m, t);
    if (!rc) rc = kb_all_reduce(m, t, KB_SUM);
    f->rc[rank] = rc;
    snprintf(f->msg[rank], sizeof f->msg[rank], "%s", rc ? kb_last_error(m) : "");
    return rc;
}

Test(dist, a_freed_tensor_is_reported_to_the_rank_that_passed_it)
{
    kb_machine *m = open_m();
    freed f;
    memset(&f, 0, sizeof f);
    cr_assert_eq(kb_spawn(m, reduce_freed, 2, &f), KB_ENOTFOUND, "%s", kb_last_error(m));
    cr_expect_eq(f.rc[1], KB_ENOTFOUND);
    cr_expect(strstr(f.msg[1], "tensor 'x' (id ") && strstr(f.msg[1], "was freed"), "%s", f.msg[1]);
    cr_expect_eq(f.rc[0], KB_ECANCELED);
    cr_expect(strstr(f.msg[0], "canceled (rank 1 failed)") != NULL, "%s", f.msg[0]);
    cr_expect(strstr(kb_last_error(m), "mismatched") == NULL, "%s", kb_last_error(m));
    kb_close(m);
}

#define MANY  100
#define EARLY 57

static int many_barrier(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    int rc = kb_init_process_group(m, "ahbm");
    if (rc || rank == EARLY) return rc;
    return kb_barrier(m);
}

Test(dist, a_deadlock_report_too_long_for_the_message_counts_the_ranks_left_out)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_spawn(m, many_barrier, MANY, NULL), KB_EDEADLOCK);
    const char *e = kb_last_error(m);
    int shown = 0, more = -1;
    for (const char *p = strstr(e, "\n  rank "); p; p = strstr(p + 1, "\n  rank "))
        shown++;
    const char *tail = strstr(e, "  ... and ");
    cr_assert_not_null(tail, "%s", e);
    cr_assert_eq(sscanf(tail, "  ... and %d more ranks", &more), 1, "%s", tail);
    cr_expect_eq(shown + more, MANY - 1, "%d shown + %d more", shown, more);
    kb_close(m);
}

static int rs_wrong_out(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    int64_t n_in[1] = {32}, n_out[1] = {rank == 1 ? 8 : 16};
    kb_tensor in, out;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_full(m, "in", 1, n_in, KB_F32, &ONE_PE, 1.0, &in);
    if (!rc) rc = kb_empty(m, "out", 1, n_out, KB_F32, &ONE_PE, &out);
    return rc ? rc : kb_reduce_scatter(m, out, in, KB_SUM);
}

Test(dist, a_wrong_reduce_scatter_output_names_the_host_rank_and_n_over_p)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_spawn(m, rs_wrong_out, 2, NULL), KB_EINVAL);
    char want[160];
    snprintf(want, sizeof want,
             "host rank 1's output 'out' shard 0 is f32 [8 elements], expected "
             "f32 [%d]",
             32 / 2);
    cr_expect(strstr(kb_last_error(m), want) != NULL, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), "N/p") != NULL, "%s", kb_last_error(m));
    kb_close(m);
}

/* Each rank's last call: its code and message. */
typedef struct outcome {
    int rc[2];
    char msg[2][1024];
} outcome;

/* A collective kernel whose programs all receive first: nobody ever sends,
 * so the simulation runs out of events. */
static void receives_first(tl_ctx *k)
{
    int64_t n = 4;
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
}

static int reduce_deadlocks(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    outcome *o = arg;
    int64_t shape[1] = {32};
    kb_tensor t;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_zeros(m, "x", 1, shape, KB_F32, &ONE_PE, &t);
    if (!rc) rc = kb_all_reduce(m, t, KB_SUM);
    o->rc[rank] = rc;
    snprintf(o->msg[rank], sizeof o->msg[rank], "%s", rc ? kb_last_error(m) : "");
    return rc;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* The rank that runs the collective waits for its kernel, the other for
 * the round; both are canceled by kb_spawn's deadlock handling. Each says
 * it was canceled and why; the simulator's report is in kb_spawn's
 * message, once. */
Test(dist, ranks_canceled_after_a_deadlock_say_why_and_the_report_comes_once)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_ccl_register(m, "receives_first", "all_reduce", "ring_1d", receives_first), 0,
                 "%s", kb_last_error(m));
    const char *sets[] = {"ccl.algorithms.stuck={module: receives_first, collective: all_reduce, "
                          "topology: ring_1d}",
                          "ccl.defaults.algorithm.all_reduce=stuck"};
    cr_assert_eq(kb_ccl_override(m, sets, 2), 0, "%s", kb_last_error(m));
    outcome o;
    memset(&o, 0, sizeof o);
    cr_assert_eq(kb_spawn(m, reduce_deadlocks, 2, &o), KB_EDEADLOCK, "%s", kb_last_error(m));
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(o.rc[r], KB_ECANCELED, "rank %d: %d %s", r, o.rc[r], o.msg[r]);
        cr_expect(strstr(o.msg[r], "canceled (kb_spawn found the ranks deadlocked)"), "rank %d: %s",
                  r, o.msg[r]);
        cr_expect_null(strstr(o.msg[r], "deadlock at"), "rank %d: %s", r, o.msg[r]);
        cr_expect_null(strstr(o.msg[r], "process '"), "rank %d: %s", r, o.msg[r]);
    }
    cr_expect(strstr(o.msg[0], "kernel stuck: ") || strstr(o.msg[1], "kernel stuck: "),
              "neither rank ran the collective: %s | %s", o.msg[0], o.msg[1]);
    const char *e = kb_last_error(m);
    cr_expect_eq(count(e, "deadlock between ranks at "), 1, "%s", e);
    cr_expect_eq(count(e, "\n  rank 0 waits on "), 1, "%s", e);
    cr_expect_eq(count(e, "\n  rank 1 waits on "), 1, "%s", e);
    cr_expect_null(strstr(e, "canceled"), "a canceled rank is not listed: %s", e);
    kb_close(m);
}

/* Rank 0 waits for its launch; rank 1 fails meanwhile. */
static int wait_then_canceled(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    outcome *o = arg;
    if (rank == 1) return kb_set_device(m, 7);
    kb_launch_opts lo = {{1, 1, 1}, 0};
    kb_launch_id id;
    int rc = kb_launch(m, "nop", nop, &lo, NULL, 0, &id);
    if (!rc) rc = kb_wait(m, id);
    o->rc[0] = rc;
    snprintf(o->msg[0], sizeof o->msg[0], "%s", rc ? kb_last_error(m) : "");
    return rc;
}

Test(dist, a_wait_canceled_because_a_sibling_failed_says_so)
{
    kb_machine *m = open_m();
    outcome o;
    memset(&o, 0, sizeof o);
    cr_assert_eq(kb_spawn(m, wait_then_canceled, 2, &o), KB_ERANGE, "%s", kb_last_error(m));
    cr_expect_eq(o.rc[0], KB_ECANCELED, "%d %s", o.rc[0], o.msg[0]);
    cr_expect_str_eq(
        o.msg[0], "kernel nop: the wait was canceled (rank 1 failed) before the launch completed");
    cr_expect_eq(kb_sync(m), 0, "the driver finishes the launch rank 0 left: %s", kb_last_error(m));
    kb_close(m);
}

typedef struct shared_pe {
    int rc[4];
    char msg[4][1024];
    kb_tensor t[4]; /* each rank's tensor, read by the driver afterwards */
    int spread;     /* 1: rank r's tensor on PE r / 2 of its SIP (first_pe) */
} shared_pe;

/* Each rank: a 32-element tensor on one PE of its SIP holding rank + 1,
 * then a sum all-reduce. */
static int reduce_one_pe(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    shared_pe *o = arg;
    int64_t shape[1] = {32};
    kb_tensor t;
    int rc = kb_init_process_group(m, "ahbm");
    kb_policy p = ONE_PE;
    p.first_pe = o->spread ? rank / 2 : 0;
    if (!rc) rc = kb_full(m, "x", 1, shape, KB_F32, &p, rank + 1.0, &t);
    if (rc) return rc;
    o->t[rank] = t;
    rc = kb_all_reduce(m, t, KB_SUM);
    o->rc[rank] = rc;
    snprintf(o->msg[rank], sizeof o->msg[rank], "%s", rc ? kb_last_error(m) : "");
    return rc;
}

/* Element 0 of tensor t, read by the driver. */
static float first_of(kb_machine *m, kb_tensor t)
{
    float out[32];
    cr_assert_eq(kb_copy_to_host(m, t, out, sizeof out, KB_F32), 0, "%s", kb_last_error(m));
    return out[0];
}

/* Four ranks on two SIPs: ranks 0 and 2 (and 1 and 3) put their one-PE
 * tensors on the same PE. The error names the two host ranks and the PE
 * and says what to do; no tensor changed; one rank per SIP then works. */
Test(dist, two_ranks_with_buffers_on_one_pe_are_named_with_the_pe)
{
    kb_machine *m = open_m();
    shared_pe o;
    memset(&o, 0, sizeof o);
    cr_assert_eq(kb_spawn(m, reduce_one_pe, 4, &o), KB_EINVAL, "%s", kb_last_error(m));
    const char *want = "kb_all_reduce: host ranks 0 and 2 both have a buffer on sip0/cube0/pe0 "
                       "(rank 0: tensor 'x' shard 0; rank 2: tensor 'x' shard 0)";
    for (int r = 0; r < 4; r++) {
        cr_expect_eq(o.rc[r], KB_EINVAL, "rank %d: %s", r, o.msg[r]);
        cr_expect(strstr(o.msg[r], want), "rank %d: %s", r, o.msg[r]);
        cr_expect(strstr(o.msg[r], "give ranks that share a SIP different first_pe (rank / 2"),
                  "rank %d: %s", r, o.msg[r]);
        cr_expect_eq(first_of(m, o.t[r]), (float)(r + 1), "rank %d's tensor changed", r);
    }
    cr_expect(strstr(kb_last_error(m), want), "%s", kb_last_error(m));
    memset(&o, 0, sizeof o);
    cr_assert_eq(kb_spawn(m, reduce_one_pe, 0, &o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 2; r++)
        cr_expect_eq(first_of(m, o.t[r]), 3.0f, "rank %d: not the sum 1 + 2", r);
    kb_close(m);
}

/* The remedy: four ranks on two SIPs, each rank's tensor on PE rank / 2 of
 * its SIP (first_pe), all-reduce over all four. */
Test(dist, ranks_sharing_a_sip_reduce_together_with_tensors_on_their_own_pes)
{
    kb_machine *m = open_m();
    shared_pe o;
    memset(&o, 0, sizeof o);
    o.spread = 1;
    cr_assert_eq(kb_spawn(m, reduce_one_pe, 4, &o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 4; r++)
        cr_expect_eq(first_of(m, o.t[r]), 10.0f, "rank %d: not the sum 1 + 2 + 3 + 4", r);
    kb_close(m);
}

/* ---- streams: each rank's launches are its own ------------------------------- */

#define BUSY_OPS                                                                                   \
    200 /* element-wise ops of the busy kernel: far longer than a launch's overhead                \
         */

static void busy(tl_ctx *k)
{
    int64_t n = 4096;
    tl_tile x = tl_zeros(k, 1, &n, TL_F32);
    for (int i = 0; i < BUSY_OPS; i++) {
        tl_tile y = tl_add(k, x, x);
        tl_free(k, x);
        x = y;
    }
}

/* Simulated time from issue to completion of `busy` on the first PE of SIP sip. */
static uint64_t busy_alone(kb_machine *m, int sip)
{
    kb_launch_opts o = {{1, 1, 1}, sip};
    kb_launch_id id;
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(kb_launch(m, "busy", busy, &o, NULL, 0, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    return kb_now_ps(m) - t0;
}

typedef struct streams {
    uint64_t t0, done[2];
} streams;

static int launch_busy(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    streams *s = arg;
    kb_launch_opts o = {{1, 1, 1}, rank};
    kb_launch_id id;
    int rc = kb_launch(m, "busy", busy, &o, NULL, 0, &id);
    if (!rc) rc = kb_wait(m, id);
    s->done[rank] = kb_now_ps(m) - s->t0;
    return rc;
}

Test(dist, two_ranks_kernels_on_their_own_sips_run_side_by_side)
{
    kb_machine *m = open_m();
    uint64_t d = busy_alone(m, 0);
    cr_assert_eq(busy_alone(m, 1), d); /* the machine is symmetric */
    streams s = {kb_now_ps(m), {0, 0}};
    cr_assert_eq(kb_spawn(m, launch_busy, 2, &s), 0, "%s", kb_last_error(m));
    /* side by side: each as long as alone; one after the other the second
     * would need about twice that */
    for (int r = 0; r < 2; r++) {
        cr_assert_geq(s.done[r], d, "rank %d", r);
        cr_assert_lt(s.done[r], d + d / 4, "rank %d: %llu ps, alone %llu ps", r,
                     (unsigned long long)s.done[r], (unsigned long long)d);
    }
    kb_close(m);
}

Test(dist, the_drivers_launches_stay_in_order_on_different_sips)
{
    kb_machine *m = open_m();
    uint64_t d = busy_alone(m, 0);
    kb_launch_opts o0 = {{1, 1, 1}, 0}, o1 = {{1, 1, 1}, 1};
    kb_launch_id a, b;
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(kb_launch(m, "busy", busy, &o0, NULL, 0, &a), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_launch(m, "busy", busy, &o1, NULL, 0, &b), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, b), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, a), 0, "%s", kb_last_error(m));
    uint64_t both = kb_now_ps(m) - t0;
    cr_assert_gt(both, d + 3 * d / 4, "%llu ps for two, %llu ps alone", (unsigned long long)both,
                 (unsigned long long)d);
    kb_close(m);
}

/* Rank 1 computes, then both all-reduce a tensor on PE 0 of their SIP. */
static int busy_then_reduce(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    streams *s = arg;
    int rc = kb_init_process_group(m, "ahbm");
    int64_t shape = 64;
    kb_tensor t;
    if (!rc) rc = kb_full(m, "t", 1, &shape, KB_F32, &ONE_PE, rank + 1.0, &t);
    kb_launch_id id;
    kb_launch_opts o = {{1, 1, 1}, rank};
    if (!rc && rank == 1) rc = kb_launch(m, "busy", busy, &o, NULL, 0, &id);
    if (!rc) {
        s->done[rank] = kb_now_ps(m); /* rank 1: issued, not waited for */
        rc = kb_all_reduce(m, t, KB_SUM);
    }
    return rc;
}

Test(dist, a_collective_waits_for_every_launch_issued_before_it)
{
    kb_machine *m = open_m();
    uint64_t d = busy_alone(m, 1);
    streams s = {0, {0, 0}};
    cr_assert_eq(kb_spawn(m, busy_then_reduce, 2, &s), 0, "%s", kb_last_error(m));
    kb_ccl_report rep;
    cr_assert_eq(kb_ccl_last(m, &rep), 0);
    /* rank 1's kernel runs on SIP 1's PE 0, which is also in the collective:
     * the collective's programs start after it */
    cr_assert_geq(rep.run_start_ps, s.done[1] + d / 2, "collective at %llu, busy issued at %llu",
                  (unsigned long long)rep.run_start_ps, (unsigned long long)s.done[1]);
    kb_close(m);
}
