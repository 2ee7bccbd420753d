/* Point-to-point kb_send / kb_recv between host ranks on the built-in
 * machine (2 SIPs): rank r bound to SIP r mod 2, its one-shard tensors on
 * PE r / 2 of cube 0 there (first_pe), so every rank has a PE of its own.
 * Expected values come from the inputs' formula. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"
#include "support/machine.h"

#define N     40
#define RANKS 4

static float val(int r, int i)
{
    return (float)(100 * r + i);
}

/* A one-shard tensor on the rank's own PE: rank r's values, or zeros. */
static int tensor(kb_machine *m, int rank, int fill, kb_tensor *t)
{
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / 2};
    int64_t n = N;
    int rc = kb_zeros(m, NULL, 1, &n, KB_F32, &p, t);
    if (rc || !fill) return rc;
    float h[N];
    for (int i = 0; i < N; i++)
        h[i] = val(rank, i);
    return kb_copy_from_host(m, *t, h, sizeof h, KB_F32);
}

typedef struct out {
    float got[RANKS][N];
} out;

/* A pipeline: rank 0 sends its values to rank 1, which passes what it got
 * on to rank 2, and so on; the last rank's tensor ends up with rank 0's. */
static int chain(kb_machine *m, int rank, int nprocs, void *arg)
{
    out *o = arg;
    kb_tensor t = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = tensor(m, rank, rank == 0, &t);
    if (!rc && rank > 0) rc = kb_recv(m, t, rank - 1);
    if (!rc && rank + 1 < nprocs) rc = kb_send(m, t, rank + 1);
    if (!rc) rc = kb_copy_to_host(m, t, o->got[rank], sizeof o->got[rank], KB_F32);
    return rc;
}

Test(dist_p2p, a_chain_of_sends_carries_rank_0s_tensor_to_the_last_rank)
{
    kb_machine *m = kb_test_machine();
    out *o = calloc(1, sizeof *o);
    cr_assert_eq(kb_spawn(m, chain, RANKS, o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < RANKS; r++)
        for (int i = 0; i < N; i++)
            cr_expect_eq(o->got[r][i], val(0, i), "rank %d element %d", r, i);
    free(o);
    kb_close(m);
}

/* Ranks 0 and 1 swap tensors the way that cannot block: 0 sends first,
 * 1 receives first. */
static int swap(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    out *o = arg;
    kb_tensor mine = {0}, theirs = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = tensor(m, rank, 1, &mine);
    if (!rc) rc = tensor(m, rank + 2, 0, &theirs); /* on PE 1: apart from the other rank's */
    int peer = 1 - rank;
    if (!rc) rc = rank == 0 ? kb_send(m, mine, peer) : kb_recv(m, theirs, peer);
    if (!rc) rc = rank == 0 ? kb_recv(m, theirs, peer) : kb_send(m, mine, peer);
    if (!rc) rc = kb_copy_to_host(m, theirs, o->got[rank], sizeof o->got[rank], KB_F32);
    if (!rc) rc = kb_copy_to_host(m, mine, o->got[rank + 2], sizeof o->got[rank], KB_F32);
    return rc;
}

Test(dist_p2p, two_ranks_swap_their_tensors_and_keep_their_own)
{
    kb_machine *m = kb_test_machine();
    out *o = calloc(1, sizeof *o);
    cr_assert_eq(kb_spawn(m, swap, 2, o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N; i++) {
            cr_expect_eq(o->got[r][i], val(1 - r, i), "rank %d received element %d", r, i);
            cr_expect_eq(o->got[r + 2][i], val(r, i), "rank %d's own element %d changed", r, i);
        }
    free(o);
    kb_close(m);
}

/* Both ranks send first: neither receive comes, which the pairing sees. */
static int both_send(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_tensor t = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = tensor(m, rank, 1, &t);
    return rc ? rc : kb_send(m, t, 1 - rank);
}

Test(dist_p2p, two_sends_to_each_other_are_a_mismatch_naming_both)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, both_send, 2, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "mismatched collectives"), "%s", e);
    cr_expect(strstr(e, "rank 0: kb_send(tensor 't"), "%s", e);
    cr_expect(strstr(e, "40 f32 per shard, dst 1) call #1"), "%s", e);
    cr_expect(strstr(e, "40 f32 per shard, dst 0) call #1"), "%s", e);
    kb_close(m);
}

/* Rank 1 ends without receiving. */
static int unanswered(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_tensor t = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = tensor(m, rank, 1, &t);
    return rc || rank ? rc : kb_send(m, t, 1);
}

Test(dist_p2p, a_send_nobody_receives_is_a_deadlock_naming_it)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, unanswered, 2, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "dst 1) call #1 waits for rank 1 (ended)"), "%s", e);
    kb_close(m);
}

/* Rank 0 sends to rank 1, which waits to receive from rank 2, which waits
 * in a barrier: each note says in which call the missing rank waits. */
static int cycle(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_tensor t = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = tensor(m, rank, 1, &t);
    if (rc) return rc;
    return rank == 0 ? kb_send(m, t, 1) : rank == 1 ? kb_recv(m, t, 2) : kb_barrier(m);
}

Test(dist_p2p, a_deadlock_names_the_send_or_receive_a_rank_waits_in)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, cycle, 3, NULL), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "dst 1) call #1 waits for rank 1 (waiting in kb_recv from rank 2)"), "%s",
              e);
    cr_expect(strstr(e, "src 2) call #1 waits for rank 2 (waiting in kb_barrier over the world)"),
              "%s", e);
    cr_expect(strstr(e, "kb_barrier() call #1 waits for ranks 0 (waiting in kb_send to rank 1), "
                        "1 (waiting in kb_recv from rank 2)"),
              "%s", e);
    kb_close(m);
}

/* The refusals each rank can see alone. */
static int misuse(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    const char *what = arg;
    kb_tensor t = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = tensor(m, rank, 1, &t);
    if (rc || rank) return rc;
    if (!strcmp(what, "self")) return kb_send(m, t, 0);
    return kb_recv(m, t, 5); /* "far" */
}

Test(dist_p2p, a_peer_that_is_not_another_rank_is_refused)
{
    kb_machine *m = kb_test_machine();
    cr_expect_eq(kb_spawn(m, misuse, 2, "self"), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "kb_send: dst 0 is not another host rank (0..1 but 0)"),
              "%s", kb_last_error(m));
    cr_expect_eq(kb_spawn(m, misuse, 2, "far"), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "kb_recv: src 5 is not another host rank"), "%s",
              kb_last_error(m));
    /* the driver has nobody to talk to */
    kb_tensor t;
    int64_t n = N;
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};
    cr_assert_eq(kb_zeros(m, NULL, 1, &n, KB_F32, &one, &t), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_send(m, t, 1), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "the driver has no other rank"), "%s", kb_last_error(m));
    kb_close(m);
}

Test(dist_p2p, the_same_chain_twice_ends_at_the_same_time)
{
    cr_expect_eq(kb_test_spawn_end(chain, RANKS, sizeof(out)),
                 kb_test_spawn_end(chain, RANKS, sizeof(out)));
}

/* Rank 0 computes for a while on its PE; meanwhile ranks 1 and 2 pass a
 * tensor between their own PEs. A collective's launch waits only for its
 * members' streams and PEs, so the transfer ends before rank 0's kernel. */
static void busy(tl_ctx *k)
{
    tl_tile t = tl_full(k, 1, (int64_t[]){4096}, 1.0, TL_F32);
    for (int i = 0; i < 400; i++) {
        uint64_t scope = tl_scope_begin(k);
        tl_tile u = tl_exp(k, tl_mul(k, t, tl_scalar(k, 0.0, TL_F32)));
        tl_scope_end(k, scope, 1, &u);
        tl_free(k, t);
        t = u;
    }
    tl_item(k, tl_sum(k, t, TL_AXIS_ALL));
}

typedef struct times {
    uint64_t kernel_end, recv_end;
} times;

static int overlap(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    times *o = arg;
    kb_tensor t = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = tensor(m, rank, 1, &t);
    if (!rc) rc = kb_barrier(m);
    if (rc) return rc;
    if (rank == 0) {
        kb_arg a = kb_arg_tensor(t);
        kb_launch_opts lo = {{1, 1, 1}, -1};
        kb_launch_id id;
        rc = kb_launch(m, "busy", busy, &lo, &a, 1, &id);
        if (!rc) rc = kb_wait(m, id);
        o->kernel_end = kb_now_ps(m);
    } else if (rank == 1) {
        rc = kb_send(m, t, 2);
    } else {
        rc = kb_recv(m, t, 1);
        o->recv_end = kb_now_ps(m);
    }
    return rc;
}

Test(dist_p2p, a_transfer_runs_beside_another_ranks_kernel)
{
    kb_machine *m = kb_test_machine();
    times o = {0, 0};
    cr_assert_eq(kb_spawn(m, overlap, 3, &o), 0, "%s", kb_last_error(m));
    cr_expect_gt(o.kernel_end, 0);
    cr_expect_lt(o.recv_end, o.kernel_end, "the transfer ended at %llu ps, the kernel at %llu ps",
                 (unsigned long long)o.recv_end, (unsigned long long)o.kernel_end);
    kb_close(m);
}

/* ---- sharded tensors ---------------------------------------------------------- */

/* Host ranks 0 and 2 (both on SIP 0): rank 0's tensor of SH_N f32 split by
 * columns over `shards` PEs of cube 0 from PE 0, rank 2's over as many from
 * PE 4; rank 0 sends, rank 2 receives, twice: shard i goes to shard i. */
#define SH_N (256 * 1024)
typedef struct sharded {
    int shards, shards_recv; /* the receiver's count (a mismatch when they differ) */
    float got[SH_N];
    uint64_t first, took; /* the first send's simulated time (installs), the second's */
} sharded;

static int sharded_pair(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    sharded *o = arg;
    if (rank == 1) return kb_init_process_group(m, "ahbm");
    int shards = rank == 0 ? o->shards : o->shards_recv;
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_COLUMN_WISE, 0, 1, shards, 0, rank ? 4 : 0};
    int64_t n = SH_N;
    kb_tensor t;
    float *h = malloc(SH_N * sizeof *h);
    int rc = h ? kb_init_process_group(m, "ahbm") : KB_ENOMEM;
    for (int i = 0; !rc && i < SH_N; i++)
        h[i] = rank == 0 ? val(3, i) : -1.0f;
    if (!rc) rc = kb_empty(m, rank ? "in" : "out", 1, &n, KB_F32, &p, &t);
    if (!rc) rc = kb_copy_from_host(m, t, h, SH_N * sizeof *h, KB_F32);
    uint64_t t0 = 0;
    for (int k = 0; k < 2 && !rc; k++) { /* the second goes through installed queues */
        if (k == 1 && rank == 0) o->first = kb_now_ps(m) - t0;
        t0 = kb_now_ps(m);
        rc = rank == 0 ? kb_send(m, t, 2) : kb_recv(m, t, 0);
    }
    if (!rc && rank == 0) o->took = kb_now_ps(m) - t0;
    if (!rc && rank == 2) rc = kb_copy_to_host(m, t, o->got, sizeof o->got, KB_F32);
    free(h);
    return rc;
}

/* Four shards go to four: the receiver gets every element; the four pairs
 * move at once on their own PEs, so the send takes well under the time of
 * the same bytes in one shard (at least twice as fast), and their installs
 * go out together. */
Test(dist_p2p, a_sharded_tensor_goes_shard_by_shard_side_by_side)
{
    kb_machine *m = kb_test_machine();
    sharded *four = calloc(1, sizeof *four), *one = calloc(1, sizeof *one);
    four->shards = four->shards_recv = 4;
    one->shards = one->shards_recv = 1;
    cr_assert_eq(kb_spawn(m, sharded_pair, 3, four), 0, "%s", kb_last_error(m));
    for (int i = 0; i < SH_N; i++)
        cr_assert_eq(four->got[i], val(3, i), "element %d", i);
    kb_close(m); /* a machine of its own: pe0 -> pe4 is one of the four pairs above */
    m = kb_test_machine();
    cr_assert_eq(kb_spawn(m, sharded_pair, 3, one), 0, "%s", kb_last_error(m));
    for (int i = 0; i < SH_N; i++)
        cr_assert_eq(one->got[i], val(3, i), "element %d", i);
    cr_expect_lt(2 * four->took, one->took, "4 shards %llu ps, 1 shard %llu ps",
                 (unsigned long long)four->took, (unsigned long long)one->took);
    /* the first send installs a ring per pair, pushed as one command: it
     * costs about one install more than the second, as with one pair (one
     * command per pair would cost four) */
    uint64_t install4 = four->first - four->took, install1 = one->first - one->took;
    cr_expect(install1 > 0 && 2 * install4 < 3 * install1,
              "installs of 4 pairs %llu ps, of 1 pair %llu ps", (unsigned long long)install4,
              (unsigned long long)install1);
    free(four);
    free(one);
    kb_close(m);
}

/* Tensors of different shard counts cannot pair shard by shard: a
 * mismatch naming both calls. */
Test(dist_p2p, tensors_of_different_shard_counts_are_a_mismatch)
{
    kb_machine *m = kb_test_machine();
    sharded *o = calloc(1, sizeof *o);
    o->shards = 4;
    o->shards_recv = 2;
    cr_assert_eq(kb_spawn(m, sharded_pair, 3, o), KB_EDEADLOCK, "%s", kb_last_error(m));
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "mismatched collectives"), "%s", e);
    cr_expect(strstr(e, "kb_send(tensor 'out': 65536 f32 per shard, dst 2)"), "%s", e);
    cr_expect(strstr(e, "kb_recv(tensor 'in': 131072 f32 per shard, src 0)"), "%s", e);
    free(o);
    kb_close(m);
}

/* Point-to-point uses the broadcast algorithm's queues as a ring of two: a
 * default broadcast over a tree is refused, naming it. */
static void tree_noop(tl_ctx *k)
{
    (void)k;
}

Test(dist_p2p, a_broadcast_algorithm_that_is_not_a_ring_is_refused)
{
    kb_machine *m = kb_test_machine();
    cr_assert_eq(kb_ccl_register(m, "tree_noop", "broadcast", "tree", tree_noop), 0, "%s",
                 kb_last_error(m));
    const char *sets[] = {
        "ccl.algorithms.tb={module: tree_noop, collective: broadcast, topology: tree}",
        "ccl.defaults.algorithm.broadcast=tb"};
    cr_assert_eq(kb_ccl_override(m, sets, 2), 0, "%s", kb_last_error(m));
    out *o = calloc(1, sizeof *o);
    cr_assert_eq(kb_spawn(m, chain, 2, o), KB_EUNSUPPORTED, "%s", kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), "point-to-point runs on the queues of the broadcast "
                                       "algorithm ('tb'), which must be ring_1d (it is tree)"),
              "%s", kb_last_error(m));
    free(o);
    kb_close(m);
}
