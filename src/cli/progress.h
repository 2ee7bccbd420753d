/*
 * cli/progress.h — the progress line a command shows on a terminal's stderr
 * while it simulates (progress.c).
 */
#ifndef KB_CLI_PROGRESS_H
#define KB_CLI_PROGRESS_H

#include "kernbench/kernbench.h"

typedef struct kb__cli_progress {
    kb_machine *m;       /* NULL: no line (stderr is not a terminal) */
    const char *what;    /* the line's prefix, borrowed */
    double t0, last;     /* wall clock at the start, of the last line (s) */
    int shown;           /* a line is on the terminal */
    int tty;             /* stderr is a terminal: the line is shown */
    int lines;           /* KERNBENCH_PROGRESS=lines: whole lines instead, on any stderr */
    kb_progress_fn also; /* called too at each hook (a report's sampler), or NULL */
    void *also_user;
} kb__cli_progress;

/* Starts the line for m's simulation (only if stderr is a terminal). */
void kb__cli_progress_start(kb__cli_progress *p, kb_machine *m, const char *what);
/* The same, also calling also(user, ...) every few thousand events whether
 * or not stderr is a terminal (also NULL: as kb__cli_progress_start). */
void kb__cli_progress_start_with(kb__cli_progress *p, kb_machine *m, const char *what,
                                 kb_progress_fn also, void *user);
/* Stops it and erases the line if one was shown. */
void kb__cli_progress_end(kb__cli_progress *p);

#endif
