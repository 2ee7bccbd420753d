/* Random programs of host ranks over groups and point-to-point calls: most
 * never match up, and whatever the ranks do, kb_spawn must come back with
 * 0 or an error code and a message (never crash or hang), and the machine
 * must then run a correct program. Each rank draws its calls from its own
 * seeded stream, so every case is the same on every run. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"
#include "support/machine.h"

#define RANKS 4
#define CALLS 6
#define N     16
#define SEEDS 40

typedef struct plan {
    uint64_t seed;
} plan;

static uint32_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* Every rank draws the same program from the shared stream (seed): a
 * collective over one of the groups (all-reduce, broadcast, reduce,
 * all-to-all, barrier), made by its members, or a send from one rank to
 * another; with odds 1 in 40 per call a rank replaces the call
 * by one from its private stream, which the others rarely match. */
static int random_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    const plan *p = arg;
    uint64_t shared = p->seed * 0x9E3779B97F4A7C15ull + 1;
    uint64_t own = shared ^ ((uint64_t)rank + 1) * 0xBF58476D1CE4E5B9ull;
    static const int members[4][4] = {{0, 1, 2, 3}, {0, 1, -1, -1}, {2, 3, -1, -1}, {3, 1, -1, -1}};
    kb_group g[4] = {KB_GROUP_WORLD};
    kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / 2};
    int64_t n = N;
    kb_tensor t, out;
    int rc = kb_init_process_group(m, "ahbm");
    for (int k = 1; k < 4 && !rc; k++)
        rc = kb_new_group(m, members[k], 2, &g[k]);
    if (!rc) rc = kb_full(m, NULL, 1, &n, KB_F32, &here, rank, &t);
    if (!rc) rc = kb_empty(m, NULL, 1, &n, KB_F32, &here, &out);
    for (int k = 0; k < CALLS && !rc; k++) {
        int gi = 0, op = 0, a = 0, b = 0, src = 0;
        /* the shared draw always happens, so the streams stay in step */
        for (int pass = 0; pass < 2; pass++) {
            uint64_t *s = pass ? &own : &shared;
            if (pass && next(&own) % 40) break;
            gi = (int)(next(s) % 4), op = (int)(next(s) % 6), a = (int)(next(s) % (uint32_t)nprocs);
            b = (a + 1 + (int)(next(s) % (uint32_t)(nprocs - 1))) % nprocs;
            src = members[gi][next(s) % (gi ? 2u : 4u)];
        }
        if (op == 3) { /* a sends to b */
            if (rank == a) rc = kb_send(m, t, b);
            if (rank == b) rc = kb_recv(m, t, a);
            continue;
        }
        if (kb_group_rank(m, g[gi]) < 0) continue; /* not a member: not its call */
        if (op == 0)
            rc = kb_all_reduce_group(m, g[gi], t, KB_MAX);
        else if (op == 1)
            rc = kb_broadcast_group(m, g[gi], t, src);
        else if (op == 4)
            rc = kb_reduce_group(m, g[gi], t, src, KB_SUM);
        else if (op == 5)
            rc = kb_all_to_all_group(m, g[gi], out, t);
        else
            rc = kb_barrier_group(m, g[gi]);
    }
    return rc;
}

/* All ranks sum over the world: the program the machine must still run. */
static int all_sum(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    float *got = arg;
    kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / 2};
    int64_t n = N;
    kb_tensor t;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_full(m, NULL, 1, &n, KB_F32, &here, rank + 1, &t);
    if (!rc) rc = kb_all_reduce(m, t, KB_SUM);
    if (!rc) rc = kb_copy_to_host(m, t, &got[rank * N], N * sizeof *got, KB_F32);
    return rc;
}

Test(dist_random, random_programs_end_with_a_status_and_leave_the_machine_usable)
{
    int ok = 0, failed = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        kb_machine *m = kb_test_machine();
        plan p = {seed};
        int rc = kb_spawn(m, random_rank, RANKS, &p);
        if (rc) {
            failed++;
            cr_expect(rc == KB_EDEADLOCK || rc == KB_EINVAL || rc == KB_ERANGE, "seed %llu: %d %s",
                      (unsigned long long)seed, rc, kb_last_error(m));
            cr_expect(kb_last_error(m)[0], "seed %llu: no message", (unsigned long long)seed);
        } else {
            ok++;
        }
        float got[RANKS * N];
        cr_assert_eq(kb_spawn(m, all_sum, RANKS, got), 0, "seed %llu, after: %s",
                     (unsigned long long)seed, kb_last_error(m));
        for (int i = 0; i < RANKS * N; i++)
            cr_expect_eq(got[i], 1 + 2 + 3 + 4, "seed %llu, after: element %d",
                         (unsigned long long)seed, i);
        kb_close(m);
    }
    cr_expect_gt(failed, 0, "some programs fail (%d of %d ran through)", ok, SEEDS);
    cr_expect_gt(ok, 0, "some programs run through (%d of %d failed)", failed, SEEDS);
}
