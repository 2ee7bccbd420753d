/*
 * sweep_pool.c — runs a sweep's points in worker processes (see sweep.h).
 *
 * One child per point, at most `jobs` at a time: the child runs the
 * command in-process (no exec), with its stderr in a temporary file that
 * becomes the point's error message, and writes the point's record to a
 * pipe; the parent collects records with poll() as children end. A point
 * that crashes or hangs its process cannot take the sweep down with it.
 * Cost: a fork per point (well under a millisecond for this process) plus
 * the point's own simulation.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/sweep.h"

typedef struct worker {
    pid_t pid;
    int fd; /* read end of the point's pipe; -1 free slot */
    size_t point;
    char *buf; /* what the child wrote so far */
    size_t len, cap;
} worker;

/* The child's stderr so far, as one line ("; " between lines), trimmed. */
static char *captured(FILE *f)
{
    fflush(stderr);
    long n = ftell(f);
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (!s) return NULL;
    rewind(f);
    size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
    s[got] = '\0';
    while (got && (s[got - 1] == '\n' || s[got - 1] == ' '))
        s[--got] = '\0';
    for (char *p = s; (p = strchr(p, '\n'));)
        *p = ';';
    return s;
}

static void write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* In the child: runs point i, writes its record to fd, never returns. */
static void child(const kb__sweep *s, size_t i, int fd)
{
    FILE *err = tmpfile();
    if (err) dup2(fileno(err), STDERR_FILENO);
    int argc;
    char **argv = kb__sweep_argv(s, i, &argc);
    kb__report rec;
    memset(&rec, 0, sizeof rec);
    int status = argv ? s->point(argc, argv, &rec) : 1;
    char *msg = err ? captured(err) : NULL;
    char *text = kb__sweep_point_text(s, i, &rec, status,
                                      msg && msg[0] ? msg
                                      : status      ? "failed (no message)"
                                                    : NULL);
    if (text) write_all(fd, text, strlen(text));
    _exit(text ? 0 : 1);
}

static int start(const kb__sweep *s, worker *w, size_t i)
{
    int p[2];
    if (pipe(p)) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        child(s, i, p[1]);
    }
    close(p[1]);
    *w = (worker){.pid = pid, .fd = p[0], .point = i};
    return 0;
}

/* Reads what worker w has written; 1 at end of file. */
static int drain(worker *w)
{
    if (w->len + 4096 > w->cap) {
        size_t cap = 2 * w->cap + 8192;
        char *b = realloc(w->buf, cap);
        if (!b) return 1;
        w->buf = b;
        w->cap = cap;
    }
    ssize_t n = read(w->fd, w->buf + w->len, w->cap - w->len - 1);
    if (n < 0 && errno == EINTR) return 0;
    if (n <= 0) return 1;
    w->len += (size_t)n;
    return 0;
}

/* The record of a point whose process ended without writing one. */
static char *died(const kb__sweep *s, size_t i, int wstatus)
{
    char msg[128];
    if (WIFSIGNALED(wstatus))
        snprintf(msg, sizeof msg, "the point's process was killed by signal %d (%s)",
                 WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    else
        snprintf(msg, sizeof msg, "the point's process exited %d without a record",
                 WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    kb__report rec;
    memset(&rec, 0, sizeof rec);
    return kb__sweep_point_text(s, i, &rec, 1, msg);
}

static void finish(const kb__sweep *s, worker *w, void (*done)(void *, size_t, char *), void *user)
{
    close(w->fd);
    int ws = 0;
    while (waitpid(w->pid, &ws, 0) < 0 && errno == EINTR)
        ;
    char *text = NULL;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && w->len && w->buf[w->len - 1] == '\n') {
        w->buf[w->len] = '\0';
        text = w->buf;
        w->buf = NULL;
    } else {
        text = died(s, w->point, ws);
    }
    size_t point = w->point;
    free(w->buf);
    *w = (worker){.fd = -1};
    if (text) done(user, point, text);
}

int kb__sweep_pool_run(const kb__sweep *s, const unsigned char *pending, int jobs,
                       void (*done)(void *user, size_t i, char *text), void *user,
                       void (*tick)(void *tick_user), void *tick_user)
{
    worker *ws = calloc((size_t)jobs, sizeof *ws);
    struct pollfd *pf = calloc((size_t)jobs, sizeof *pf);
    if (!ws || !pf) {
        free(ws), free(pf);
        fprintf(stderr, "kernbench sweep: out of memory\n");
        return KB_ENOMEM;
    }
    for (int k = 0; k < jobs; k++)
        ws[k].fd = -1;
    size_t next = 0;
    int running = 0, rc = 0;
    for (;;) {
        while (next < s->n_points && !pending[next])
            next++;
        for (int k = 0; k < jobs && next < s->n_points && ws[k].fd < 0; k++) {
            if (start(s, &ws[k], next)) {
                fprintf(stderr, "kernbench sweep: cannot start a worker: %s\n", strerror(errno));
                rc = KB_EIO;
                break;
            }
            running++;
            next++;
            while (next < s->n_points && !pending[next])
                next++;
        }
        if (!running) break;
        for (int k = 0; k < jobs; k++)
            pf[k] = (struct pollfd){.fd = ws[k].fd, .events = POLLIN};
        if (tick) tick(tick_user);
        if (poll(pf, (nfds_t)jobs, tick ? 5 : -1) < 0 && errno != EINTR) {
            rc = KB_EIO;
            break;
        }
        for (int k = 0; k < jobs; k++) {
            if (ws[k].fd < 0 || !(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (drain(&ws[k])) {
                finish(s, &ws[k], done, user);
                running--;
            }
        }
        if (rc) break;
    }
    for (int k = 0; k < jobs; k++) /* after an error: no child outlives the sweep */
        if (ws[k].fd >= 0) {
            kill(ws[k].pid, SIGKILL);
            finish(s, &ws[k], done, user);
        }
    free(ws);
    free(pf);
    return rc;
}
