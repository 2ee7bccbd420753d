/* A rank canceled while its host tensor call moves data: the call waits
 * until the transfer completes (the hardware does not stop for a canceled
 * host thread), returns KB_ECANCELED, and never touches the caller's host
 * buffer afterwards; the machine stays usable. */
#include <criterion/criterion.h>
#include <string.h>

#include "kernbench/dist.h"

#define N 4096 /* elements: a transfer long enough to be in flight */

static const kb_policy ONE_PE = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};

typedef struct job {
    kb_tensor t;
    int which; /* 0 kb_full, 1 kb_copy_from_host, 2 kb_copy_to_host */
    int rc0;   /* rank 0's result */
    float host[N];
} job;

static kb_machine *open_m(void)
{
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, NULL, eb, sizeof eb), 0, "%s", eb);
    return m;
}

/* Rank 0 starts first and blocks in its transfer; rank 1 then fails. */
static int body(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    job *j = arg;
    if (rank == 1) return KB_EIO;
    int64_t shape[1] = {N};
    kb_tensor t;
    if (j->which == 0)
        j->rc0 = kb_full(m, "x", 1, shape, KB_F32, &ONE_PE, 1.0, &t);
    else if (j->which == 1)
        j->rc0 = kb_copy_from_host(m, j->t, j->host, sizeof j->host, KB_F32);
    else
        j->rc0 = kb_copy_to_host(m, j->t, j->host, sizeof j->host, KB_F32);
    if (j->which == 2)
        for (int i = 0; i < N; i++)
            j->host[i] = -7.0f; /* the caller owns the buffer again */
    return j->rc0;
}

static void run(kb_machine *m, job *j)
{
    cr_assert_eq(kb_spawn(m, body, 2, j), KB_EIO, "%s", kb_last_error(m));
    cr_expect_eq(j->rc0, KB_ECANCELED, "rank 0: %d", j->rc0);
    int64_t shape[1] = {64}; /* runs the simulation again */
    kb_tensor after;
    cr_expect_eq(kb_full(m, "after", 1, shape, KB_F32, &ONE_PE, 2.0, &after), 0, "%s",
                 kb_last_error(m));
}

static void make_source(kb_machine *m, job *j)
{
    int64_t shape[1] = {N};
    cr_assert_eq(kb_empty(m, "t", 1, shape, KB_F32, &ONE_PE, &j->t), 0, "%s", kb_last_error(m));
}

Test(dist_cancel, a_canceled_fill_still_completes_and_the_machine_goes_on)
{
    kb_machine *m = open_m();
    static job j;
    memset(&j, 0, sizeof j);
    j.which = 0;
    run(m, &j);
    kb_close(m);
}

Test(dist_cancel, a_canceled_copy_from_host_lands_every_byte_before_it_returns)
{
    kb_machine *m = open_m();
    static job j;
    memset(&j, 0, sizeof j);
    make_source(m, &j);
    j.which = 1;
    for (int i = 0; i < N; i++)
        j.host[i] = (float)(i % 97);
    run(m, &j);
    static float back[N];
    cr_assert_eq(kb_copy_to_host(m, j.t, back, sizeof back, KB_F32), 0, "%s", kb_last_error(m));
    for (int i = 0; i < N; i++)
        cr_assert_eq(back[i], (float)(i % 97), "element %d", i);
    kb_close(m);
}

Test(dist_cancel, a_canceled_copy_to_host_never_writes_the_buffer_after_returning)
{
    kb_machine *m = open_m();
    static job j;
    memset(&j, 0, sizeof j);
    make_source(m, &j);
    for (int i = 0; i < N; i++)
        j.host[i] = 3.0f;
    cr_assert_eq(kb_copy_from_host(m, j.t, j.host, sizeof j.host, KB_F32), 0);
    j.which = 2;
    run(m, &j);
    for (int i = 0; i < N; i++)
        cr_assert_eq(j.host[i], -7.0f, "element %d was written after the call returned", i);
    kb_close(m);
}
