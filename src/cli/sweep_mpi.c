/*
 * sweep_mpi.c — `mpirun -np N kernbench sweep ...`: the points spread over
 * the MPI ranks (point i to rank i mod N), each rank running its share in
 * its own worker processes (sweep_pool.c, --jobs per rank), every record
 * sent to rank 0, which writes the same files a local sweep writes (records
 * go out in point order whatever rank ran them).
 *
 * Built when CMake finds an MPI (KB_HAVE_MPI); without one, a sweep started
 * by mpirun with more than one rank stops with a message saying how to get
 * the MPI build, rather than run the whole sweep once per rank.
 * Protocol: rank 0 broadcasts which points are left to run (after
 * --resume); a record travels as one message, its point index (8 bytes,
 * little-endian) and its text. Rank 0 collects while its own points run
 * (a check every few ms), then the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sweep.h"

#define TAG_RECORD 17

/* The world size mpirun announced (Open MPI, PMI, PMIx), 0 when not under
 * mpirun; *rank the rank it announced. */
static int launched_size(int *rank)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (int i = 0; i < 3; i++) {
        const char *s = getenv(sizes[i]), *r = getenv(ranks[i]);
        if (s) {
            *rank = r ? atoi(r) : 0;
            return atoi(s);
        }
    }
    *rank = 0;
    return 0;
}

#ifdef KB_HAVE_MPI
#include <mpi.h>

int kb__sweep_mpi_init(kb__sweep_mpi *mpi)
{
    memset(mpi, 0, sizeof *mpi);
    int rank;
    if (launched_size(&rank) < 1) return 0;
    int argc = 0;
    char **argv = NULL;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "kernbench sweep: MPI_Init failed\n");
        return KB_EIO;
    }
    mpi->active = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi->size);
    return 0;
}

void kb__sweep_mpi_fini(kb__sweep_mpi *mpi)
{
    if (mpi->active) MPI_Finalize();
    mpi->active = 0;
}

int kb__sweep_mpi_agree(const kb__sweep_mpi *mpi, int status)
{
    int all = status;
    if (mpi->active) MPI_Allreduce(&status, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

typedef struct collect {
    void (*done)(void *, size_t, char *);
    void *user;
    size_t expected; /* records still to come from the other ranks */
} collect;

/* Receives one record (blocking when wait, else only if one is there). */
static int receive(collect *c, int wait)
{
    MPI_Status st;
    int flag = 1;
    if (wait)
        MPI_Probe(MPI_ANY_SOURCE, TAG_RECORD, MPI_COMM_WORLD, &st);
    else
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_RECORD, MPI_COMM_WORLD, &flag, &st);
    if (!flag) return 0;
    int n;
    MPI_Get_count(&st, MPI_BYTE, &n);
    unsigned char *buf = malloc((size_t)n + 1);
    if (!buf) return -1;
    MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, TAG_RECORD, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    uint64_t i = 0;
    for (int b = 7; b >= 0; b--)
        i = i << 8 | buf[b];
    char *text = strndup((char *)buf + 8, (size_t)n - 8);
    free(buf);
    c->expected--;
    if (text) c->done(c->user, (size_t)i, text);
    return text ? 1 : -1;
}

static void tick(void *user)
{
    collect *c = user;
    while (c->expected && receive(c, 0) > 0)
        ;
}

/* On a rank other than 0: each record to rank 0. */
static void send_record(void *user, size_t i, char *text)
{
    size_t n = strlen(text);
    unsigned char *buf = malloc(n + 8);
    if (buf) {
        for (int b = 0; b < 8; b++)
            buf[b] = (unsigned char)((uint64_t)i >> (8 * b));
        memcpy(buf + 8, text, n);
        MPI_Send(buf, (int)(n + 8), MPI_BYTE, 0, TAG_RECORD, MPI_COMM_WORLD);
    }
    free(buf);
    free(text);
}

int kb__sweep_mpi_run(const kb__sweep_mpi *mpi, const kb__sweep *s, unsigned char *pending,
                      int jobs, void (*done)(void *user, size_t i, char *text), void *user)
{
    if (!mpi->active) return kb__sweep_pool_run(s, pending, jobs, done, user, NULL, NULL);
    MPI_Bcast(pending, (int)s->n_points, MPI_BYTE, 0, MPI_COMM_WORLD);
    unsigned char *mine = malloc(s->n_points ? s->n_points : 1);
    if (!mine) return KB_ENOMEM;
    collect c = {done, user, 0};
    for (size_t i = 0; i < s->n_points; i++) {
        mine[i] = pending[i] && (int)(i % (size_t)mpi->size) == mpi->rank;
        c.expected += pending[i] && !mine[i];
    }
    int rc;
    if (mpi->rank == 0) {
        rc = kb__sweep_pool_run(s, mine, jobs, done, user, tick, &c);
        while (!rc && c.expected)
            if (receive(&c, 1) < 0) rc = KB_ENOMEM;
    } else {
        rc = kb__sweep_pool_run(s, mine, jobs, send_record, NULL, NULL, NULL);
    }
    free(mine);
    return rc;
}

#else /* no MPI in this build */

int kb__sweep_mpi_init(kb__sweep_mpi *mpi)
{
    memset(mpi, 0, sizeof *mpi);
    int rank, size = launched_size(&rank);
    if (size <= 1) return 0;
    if (rank == 0)
        fprintf(stderr,
                "kernbench sweep: started by mpirun with %d ranks, but this kernbench was "
                "built without MPI (every rank would run the whole sweep): install an MPI "
                "(Debian: libopenmpi-dev openmpi-bin) and rebuild; CMake finds it\n",
                size);
    return KB_EUNSUPPORTED;
}

void kb__sweep_mpi_fini(kb__sweep_mpi *mpi)
{
    (void)mpi;
}

int kb__sweep_mpi_agree(const kb__sweep_mpi *mpi, int status)
{
    (void)mpi;
    return status;
}

int kb__sweep_mpi_run(const kb__sweep_mpi *mpi, const kb__sweep *s, unsigned char *pending,
                      int jobs, void (*done)(void *user, size_t i, char *text), void *user)
{
    (void)mpi;
    return kb__sweep_pool_run(s, pending, jobs, done, user, NULL, NULL);
}

#endif
