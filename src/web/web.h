/*
 * web/web.h — `kernbench web`: a local HTTP server (libmicrohttpd) that
 * shows machines and reports, starts runs of the kernbench binary itself as
 * child processes, keeps their history in a results directory and compares
 * two runs (docs/web.md).
 *
 * Safety: it binds 127.0.0.1 unless told otherwise; every request's Host
 * (and Origin, when sent) must name the served address (DNS rebinding); it
 * serves only its embedded assets and files directly inside a run's folder
 * of the results directory (components of [A-Za-z0-9._-], no leading dot,
 * opened without following symlinks); request bodies are limited; runs are
 * limited in number, each a child process in its own process group with an
 * address-space limit and a wall-time limit, killed on cancel; a run's
 * options are checked by the command-line parser (validate) before it
 * starts; a run that fails or crashes is recorded and the server goes on.
 *
 * Threads: libmicrohttpd's one polling thread answers requests; the calling
 * thread reaps children and enforces limits; one mutex guards the runs.
 */
#ifndef KB_WEB_WEB_H
#define KB_WEB_WEB_H

#include <stddef.h>
#include <stdint.h>

/* Checks a run's argv (argv[0] the command: "run", "probe", "topo") with
 * the command line's own parser; 0, or nonzero with a message in msg. */
typedef int (*kb__web_validate_fn)(int argc, char **argv, char *msg, size_t n);

typedef struct kb__web_config {
    const char *listen;     /* IPv4 address to bind; NULL: 127.0.0.1 */
    int port;               /* first port tried (the next ones when taken) */
    int port_tries;         /* ports tried from `port` on */
    const char *results;    /* the results directory (created when missing) */
    const char *exe;        /* the binary runs start; NULL: this process's own */
    int max_runs;           /* runs at once */
    double run_wall_s;      /* a run is killed after this long */
    uint64_t run_mem_bytes; /* its address-space limit (RLIMIT_AS) */
    size_t max_body;        /* largest request body accepted, bytes */
    kb__web_validate_fn validate;
} kb__web_config;

/* Serves until SIGINT or SIGTERM (blocked in the calling thread and waited
 * for; runs still going are killed). Prints the address once listening.
 * Returns 0, or 1 after a message (the directory, no free port, bad address). */
int kb__web_serve(const kb__web_config *c);

#endif
