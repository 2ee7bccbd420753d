/*
 * progress.c — the progress line of long runs: on a terminal's stderr, once
 * a command has simulated for a second, one line rewritten in place at most
 * four times a second with the simulated clock, the events run and the wall
 * time; erased when the command's simulation ends. Nothing when stderr is
 * not a terminal, so output to files and pipes never carries it, unless the
 * environment has KERNBENCH_PROGRESS=lines: then one line "progress: ..."
 * every half second on stderr, whatever it is (kernbench web reads them).
 */
#include "cli/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHOW_AFTER_S 1.0
#define EVERY_S      0.25
/* simulation events between looks at the wall clock (a few ms of work) */
#define EVENTS_PER_LOOK (1u << 16)
/* events between calls when a sampler is chained (its own spacing is coarser) */
#define EVENTS_PER_SAMPLE (1u << 8)

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_progress(void *user, uint64_t now_ps, uint64_t events)
{
    kb__cli_progress *p = user;
    if (p->also) p->also(p->also_user, now_ps, events);
    if (!p->tty && !p->lines) return;
    double t = wall_s() - p->t0;
    if (!p->tty) {
        if (t - p->last < 2 * EVERY_S) return;
        p->last = t;
        fprintf(stderr, "progress: %.3f us simulated, %.1f M events, %.1f s\n",
                (double)now_ps / 1e6, (double)events / 1e6, t);
        fflush(stderr);
        return;
    }
    if (t < SHOW_AFTER_S || t - p->last < EVERY_S) return;
    p->last = t;
    p->shown = 1;
    fprintf(stderr, "\r\033[K%s: %.3f us simulated, %.1f M events, %.1f s", p->what,
            (double)now_ps / 1e6, (double)events / 1e6, t);
    fflush(stderr);
}

void kb__cli_progress_start_with(kb__cli_progress *p, kb_machine *m, const char *what,
                                 kb_progress_fn also, void *user)
{
    *p = (kb__cli_progress){.what = what, .also = also, .also_user = user};
    p->tty = isatty(STDERR_FILENO);
    const char *env = getenv("KERNBENCH_PROGRESS");
    p->lines = env && !strcmp(env, "lines");
    if (!m || (!p->tty && !p->lines && !also)) return;
    p->m = m;
    p->t0 = wall_s();
    kb_set_progress(m, on_progress, p, also ? EVENTS_PER_SAMPLE : EVENTS_PER_LOOK);
}

void kb__cli_progress_start(kb__cli_progress *p, kb_machine *m, const char *what)
{
    kb__cli_progress_start_with(p, m, what, NULL, NULL);
}

void kb__cli_progress_end(kb__cli_progress *p)
{
    if (!p->m) return;
    kb_set_progress(p->m, NULL, NULL, 0);
    if (p->shown) fputs("\r\033[K", stderr);
    p->m = NULL;
}
