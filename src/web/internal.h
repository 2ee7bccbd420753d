/*
 * web/internal.h — the server's state, shared by server.c (HTTP) and
 * runs.c (child processes, history). Every field below `mu` is guarded by
 * it; the configuration and the directory handles never change once
 * serving.
 */
#ifndef KB_WEB_INTERNAL_H
#define KB_WEB_INTERNAL_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <sys/types.h>

#include "web/web.h"

typedef enum kb__web_state {
    KB__RUN_RUNNING,
    KB__RUN_DONE,      /* exit 0: every check passed */
    KB__RUN_FAILED,    /* exit 1: a check failed or the simulation reported an error */
    KB__RUN_USAGE,     /* exit 2: the options were refused */
    KB__RUN_CRASHED,   /* killed by a signal nobody sent */
    KB__RUN_CANCELLED, /* killed on request */
    KB__RUN_TIMEOUT,   /* killed at the wall-time limit */
} kb__web_state;

typedef struct kb__web_run {
    char id[40];
    pid_t pid;     /* its process group too; 0 once reaped */
    double t0, t1; /* wall clock at start and end (s) */
    kb__web_state state;
    int code;     /* exit status, or the signal */
    json_t *argv; /* the command line (array of strings) */
} kb__web_run;

typedef struct kb__web {
    kb__web_config cfg;
    char exe[PATH_MAX];
    int runs_fd; /* the results directory's runs/ folder */
    char runs_path[PATH_MAX];
    char host_ok[2][96]; /* accepted Host values: "addr:port", "localhost:port" */
    pthread_mutex_t mu;
    kb__web_run *runs; /* this session's runs, in start order */
    size_t n_runs, cap_runs;
    unsigned seq;
    int active; /* runs going */
} kb__web;

/* runs.c — all take w->mu themselves. */
/* Starts the run req asks for (JSON object, docs/web.md). Returns an HTTP
 * status: 202 with *id set, 400 (msg: what is wrong), 429 (too many runs),
 * 500 (msg). */
int kb__web_run_start(kb__web *w, json_t *req, char *id, size_t id_size, char *msg, size_t n);
/* 200, 404 (no such run), 409 (not running). */
int kb__web_run_cancel(kb__web *w, const char *id);
/* Reaps finished children and kills those past the wall-time limit. */
void kb__web_runs_tick(kb__web *w);
/* Kills every run still going and waits for it. */
void kb__web_runs_stop(kb__web *w);
/* The history (every run folder with a status, newest first). New reference. */
json_t *kb__web_runs_list(kb__web *w);
/* One run's status with its progress and the end of its stderr; NULL: none. */
json_t *kb__web_run_status(kb__web *w, const char *id);
/* The form's choices: benches and their options, probe cases, fabric
 * models, the limits. New reference. */
json_t *kb__web_choices(const kb__web *w);
/* 1 when s is a safe file or folder name: [A-Za-z0-9._-]+, no leading dot. */
int kb__web_safe_name(const char *s);

#endif
