/*
 * cli/sweep.h — `kernbench sweep`: the points of a sweep (cmd_sweep.c) and
 * the worker processes that run them (sweep_pool.c).
 *
 * A sweep is a base command line (run or probe with fixed options) and
 * axes; point i is the base plus one value of every axis, the cartesian
 * product in the order the axes were given (the first axis varies
 * slowest). Each point is one separate simulation in its own process.
 * Invariants: a point's record depends only on its command line, so the
 * records, and the files, are the same whatever the number of workers.
 */
#ifndef KB_CLI_SWEEP_H
#define KB_CLI_SWEEP_H

#include <stddef.h>

#include "report/report.h"

typedef enum kb__axis_kind {
    KB__AXIS_OPTION,    /* an option of the command: --KEY=VALUE */
    KB__AXIS_BENCH_OPT, /* a bench option: --opt KEY=VALUE */
    KB__AXIS_SET,       /* a parameter: --set KEY=VALUE */
} kb__axis_kind;

typedef struct kb__sweep_axis {
    const char *key; /* as given */
    kb__axis_kind kind;
    char **values; /* owned */
    size_t n;
} kb__sweep_axis;

typedef struct kb__sweep {
    const char *cmd;                                      /* "run" or "probe" */
    int (*point)(int argc, char **argv, kb__report *rec); /* kb__cli_run_point, ... */
    char **base; /* [cmd, fixed options...], borrowed from argv */
    int n_base;
    kb__sweep_axis *axes;
    size_t n_axes, n_points;
} kb__sweep;

/* Point i's command line (argv[0] = the command), NULL-ended; free with
 * kb__sweep_argv_free. NULL when out of memory. */
char **kb__sweep_argv(const kb__sweep *s, size_t i, int *argc);
void kb__sweep_argv_free(char **argv);

/* Point i's record, compact, one line with its newline: the command's
 * record (rec, may have no root when the command failed before it began
 * one) with "point" (axis -> value), "status" (the exit status) and
 * "error" (the message, or null). NULL when out of memory. */
char *kb__sweep_point_text(const kb__sweep *s, size_t i, kb__report *rec, int status,
                           const char *error);

/* Runs every point i with pending[i] set in up to `jobs` worker processes,
 * one process per point; calls done(user, i, text) in the parent as each
 * ends (text is the point's record, malloc'd, the callee's). A point whose
 * process dies gets a record with its error. tick (may be NULL) is called
 * with tick_user every few ms while points run. 0, or KB_EIO when no
 * process could be started (message on stderr). */
int kb__sweep_pool_run(const kb__sweep *s, const unsigned char *pending, int jobs,
                       void (*done)(void *user, size_t i, char *text), void *user,
                       void (*tick)(void *tick_user), void *tick_user);

/* The MPI side of a sweep (sweep_mpi.c). */
typedef struct kb__sweep_mpi {
    int active;     /* started by mpirun, MPI initialised */
    int rank, size; /* this rank, the world's size */
} kb__sweep_mpi;

/* Initialises MPI when mpirun started this process. 0 (mpi->active says
 * whether MPI runs), or an error after a message: KB_EUNSUPPORTED when
 * mpirun started several ranks of a build without MPI. */
int kb__sweep_mpi_init(kb__sweep_mpi *mpi);
void kb__sweep_mpi_fini(kb__sweep_mpi *mpi);
/* Every rank passes its status (0 to go on); every rank gets the largest.
 * Called once by every rank before points run, so no rank waits for a
 * rank that stopped. Without MPI: status. */
int kb__sweep_mpi_agree(const kb__sweep_mpi *mpi, int status);
/* Runs the points pending[] marks (rank 0's pending, broadcast to every rank)
 * spread over the ranks, each rank with up to `jobs` workers; done is
 * called on rank 0 for every point, whichever rank ran it. Without MPI
 * active: kb__sweep_pool_run. 0 or an error code. */
int kb__sweep_mpi_run(const kb__sweep_mpi *mpi, const kb__sweep *s, unsigned char *pending,
                      int jobs, void (*done)(void *user, size_t i, char *text), void *user);

#endif
