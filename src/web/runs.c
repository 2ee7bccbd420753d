/*
 * runs.c — the runs `kernbench web` starts: each one a child process (the
 * kernbench binary) in its own process group, in its own folder of the
 * results directory (runs/ID/: request.json, status.json, stdout.txt,
 * stderr.txt, result.json, report.html), with an address-space limit and a
 * wall-time limit. Cost: a fork and exec per run; a tick is O(runs).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/probe.h"
#include "kernbench/bench.h"
#include "topo/kinds.h"
#include "web/internal.h"

#define MAX_ITEMS 64   /* --opt, --set, --case values per request */
#define MAX_TEXT  1024 /* bytes of one value */
#define MAX_ARGS  (4 * MAX_ITEMS + 32)

extern char **environ;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int kb__web_safe_name(const char *s)
{
    if (!s || !*s || *s == '.' || strlen(s) > 128) return 0;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
            *s != '.' && *s != '_' && *s != '-')
            return 0;
    return 1;
}

static const char *const state_names[] = {"running", "done",      "failed", "usage error",
                                          "crashed", "cancelled", "timeout"};

/* ---- the request -> argv ------------------------------------------------------- */

typedef struct argv_b {
    char *v[MAX_ARGS + 1];
    int n;
    char *msg;
    size_t msg_n;
} argv_b;

static int bad(argv_b *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(argv_b *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->msg, a->msg_n, fmt, ap);
    va_end(ap);
    return 400;
}

static int push(argv_b *a, const char *s)
{
    if (a->n >= MAX_ARGS) return bad(a, "%s", "too many values");
    if (!(a->v[a->n] = strdup(s))) return bad(a, "%s", "out of host memory");
    a->n++;
    a->v[a->n] = NULL;
    return 0;
}

/* A text value of the request: a string without control bytes, at most MAX_TEXT bytes. */
static int text_ok(argv_b *a, const json_t *v, const char *what)
{
    const char *s = json_string_value(v);
    if (!s) return bad(a, "%s: expected a string", what);
    if (strlen(s) > MAX_TEXT) return bad(a, "%s: longer than 1024 bytes", what);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20) return bad(a, "%s: control characters are not accepted", what);
    return 0;
}

/* "--name value" for each string of the array field key (at most MAX_ITEMS). */
static int push_list(argv_b *a, json_t *req, const char *key, const char *opt)
{
    json_t *list = json_object_get(req, key), *v;
    size_t i;
    if (!list) return 0;
    if (!json_is_array(list) || json_array_size(list) > MAX_ITEMS)
        return bad(a, "%s: expected an array of at most 64 strings", key);
    json_array_foreach(list, i, v)
    {
        int rc = text_ok(a, v, key);
        if (!rc && !strcmp(key, "cases") && kb__probe_case_find(json_string_value(v)) < 0)
            rc = bad(a, "unknown probe case '%s'", json_string_value(v));
        if (rc || (rc = push(a, opt)) || (rc = push(a, json_string_value(v)))) return rc;
    }
    return 0;
}

static int flag(json_t *req, const char *key)
{
    return json_is_true(json_object_get(req, key));
}

/* The command's own arguments from req (argv[0] = the command). */
static int build_args(argv_b *a, json_t *req)
{
    const char *cmd = json_string_value(json_object_get(req, "command"));
    if (!cmd || (strcmp(cmd, "run") && strcmp(cmd, "probe") && strcmp(cmd, "topo")))
        return bad(a, "%s", "command: expected \"run\", \"probe\" or \"topo\"");
    int rc = push(a, cmd);
    const char *bench = json_string_value(json_object_get(req, "bench"));
    if (!rc && !strcmp(cmd, "run") && bench) {
        /* built-in benches only: a path would load a shared object */
        if (!kb_bench_find(bench)) return bad(a, "unknown bench '%s'", bench);
        if (!(rc = push(a, "--bench"))) rc = push(a, bench);
    }
    if (!rc && !strcmp(cmd, "run")) rc = push_list(a, req, "opts", "--opt");
    if (!rc && !strcmp(cmd, "probe")) rc = push_list(a, req, "cases", "--case");
    if (!rc) rc = push_list(a, req, "sets", "--set");
    json_t *model = json_object_get(req, "fabric_model");
    if (!rc && model && json_string_length(model) && strcmp(cmd, "topo")) {
        if ((rc = text_ok(a, model, "fabric_model"))) return rc;
        if (!(rc = push(a, "--fabric"))) rc = push(a, json_string_value(model));
    }
    if (!rc && strcmp(cmd, "topo") && flag(req, "no_data")) rc = push(a, "--no-data");
    if (!rc && !strcmp(cmd, "probe") && flag(req, "sweep")) rc = push(a, "--sweep");
    json_t *bytes = json_object_get(req, "bytes");
    if (!rc && !strcmp(cmd, "probe") && bytes && json_string_length(bytes)) {
        if ((rc = text_ok(a, bytes, "bytes"))) return rc;
        if (!(rc = push(a, "--bytes"))) rc = push(a, json_string_value(bytes));
    }
    return rc;
}

static void argv_free(argv_b *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
    a->n = 0;
}

/* ---- files of a run ---------------------------------------------------------------- */

static int write_at(int dir, const char *name, const char *text)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return -1;
    size_t n = strlen(text), off = 0;
    while (off < n) {
        ssize_t w = write(fd, text + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(fd);
    return off == n ? 0 : -1;
}

static json_t *status_json(const kb__web_run *r)
{
    json_t *s = json_pack("{s:s, s:s, s:O, s:f, s:f}", "id", r->id, "state", state_names[r->state],
                          "command_line", r->argv, "started", r->t0, "wall_s",
                          (r->t1 ? r->t1 : wall_now()) - r->t0);
    if (s && r->state != KB__RUN_RUNNING)
        json_object_set_new(s,
                            r->state == KB__RUN_DONE || r->state == KB__RUN_FAILED ||
                                    r->state == KB__RUN_USAGE
                                ? "exit"
                                : "signal",
                            json_integer(r->code));
    return s;
}

/* Writes runs/ID/status.json (best effort: the history shows what it finds). */
static void save_status(kb__web *w, const kb__web_run *r)
{
    int dir = openat(w->runs_fd, r->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    json_t *s = status_json(r);
    char *text = s ? json_dumps(s, JSON_INDENT(1)) : NULL;
    if (dir >= 0 && text) write_at(dir, "status.json", text);
    free(text);
    json_decref(s);
    if (dir >= 0) close(dir);
}

/* ---- starting ------------------------------------------------------------------------- */

/* A fresh run folder; its name into id. The folder's fd, or -1. */
static int new_folder(kb__web *w, char *id, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    for (int tries = 0; tries < 1000; tries++) {
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(id, n, "%s-%03u", stamp, w->seq++ % 1000);
        if (!mkdirat(w->runs_fd, id, 0755))
            return openat(w->runs_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (errno != EEXIST) return -1;
    }
    return -1;
}

/* In the child, between fork and exec: raw system calls only (no libc
 * wrapper a sanitizer intercepts, no lock another thread may have held at
 * the fork). Under AddressSanitizer there is no address-space limit: its
 * shadow memory alone reserves terabytes. */
static void child(const kb__web *w, int out, int err, int nul, char **argv, char **envp)
{
    syscall(SYS_setpgid, 0, 0);
    struct rlimit mem = {w->cfg.run_mem_bytes, w->cfg.run_mem_bytes};
    rlim_t cpu = (rlim_t)w->cfg.run_wall_s + 5;
    struct rlimit cpu_l = {cpu, cpu}, core = {0, 0};
#ifndef KB_SANITIZE
    if (w->cfg.run_mem_bytes) syscall(SYS_prlimit64, 0, RLIMIT_AS, &mem, NULL);
#else
    (void)mem;
#endif
    syscall(SYS_prlimit64, 0, RLIMIT_CPU, &cpu_l, NULL); /* a backstop to the wall limit */
    syscall(SYS_prlimit64, 0, RLIMIT_CORE, &core, NULL);
    syscall(SYS_dup3, out, 1, 0);
    syscall(SYS_dup3, err, 2, 0);
    syscall(SYS_dup3, nul, 0, 0);
    syscall(SYS_close_range, 3, ~0u, 0);
    syscall(SYS_execve, w->exe, argv, envp);
    syscall(SYS_exit_group, 127);
}

/* The environment of a run: this one plus the progress lines (progress.c). */
static char **run_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = calloc(n + 2, sizeof *e);
    if (!e) return NULL;
    memcpy(e, environ, n * sizeof *e);
    e[n] = "KERNBENCH_PROGRESS=lines";
    return e;
}

static int spawn(kb__web *w, kb__web_run *r, int dir, argv_b *a)
{
    int out = openat(dir, "stdout.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = openat(dir, "stderr.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char **envp = run_env();
    char *argv[MAX_ARGS + 2];
    argv[0] = "kernbench";
    for (int i = 0; i <= a->n; i++)
        argv[i + 1] = a->v[i];
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = out >= 0 && err >= 0 && nul >= 0 && envp ? fork() : -1;
    if (pid == 0) child(w, out, err, nul, argv, envp);
    if (pid > 0) setpgid(pid, pid);
    free(envp);
    if (nul >= 0) close(nul);
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    if (pid < 0) return -1;
    r->pid = pid;
    return 0;
}

/* The run's files as arguments: --json, --report, and --topology when the
 * request carries a machine description (written into the folder). */
static int output_args(kb__web *w, argv_b *a, json_t *req, int dir, const char *id)
{
    char path[PATH_MAX + 64];
    json_t *yaml = json_object_get(req, "topology_yaml");
    int rc = 0;
    if (yaml && json_string_length(yaml)) {
        if (!json_is_string(yaml)) return bad(a, "%s", "topology_yaml: expected a string");
        if (write_at(dir, "topology.yaml", json_string_value(yaml)))
            return snprintf(a->msg, a->msg_n, "cannot write the topology"), 500;
        snprintf(path, sizeof path, "%s/%s/topology.yaml", w->runs_path, id);
        if (!(rc = push(a, "--topology"))) rc = push(a, path);
    }
    snprintf(path, sizeof path, "%s/%s/result.json", w->runs_path, id);
    if (!rc && !(rc = push(a, "--json"))) rc = push(a, path);
    snprintf(path, sizeof path, "%s/%s/report.html", w->runs_path, id);
    if (!rc && !(rc = push(a, "--report"))) rc = push(a, path);
    return rc;
}

static kb__web_run *add_run(kb__web *w)
{
    if (w->n_runs == w->cap_runs) {
        size_t cap = w->cap_runs ? 2 * w->cap_runs : 16;
        kb__web_run *v = realloc(w->runs, cap * sizeof *v);
        if (!v) return NULL;
        w->runs = v, w->cap_runs = cap;
    }
    kb__web_run *r = &w->runs[w->n_runs++];
    memset(r, 0, sizeof *r);
    return r;
}

int kb__web_run_start(kb__web *w, json_t *req, char *id, size_t id_size, char *msg, size_t n)
{
    argv_b a = {.msg = msg, .msg_n = n};
    if (!json_is_object(req)) return snprintf(msg, n, "expected a JSON object"), 400;
    int rc = build_args(&a, req);
    if (!rc && w->cfg.validate && w->cfg.validate(a.n, a.v, msg, n)) rc = 400;
    if (rc) {
        argv_free(&a);
        return rc;
    }
    pthread_mutex_lock(&w->mu);
    int dir = -1;
    kb__web_run *r = NULL;
    if (w->active >= w->cfg.max_runs) {
        snprintf(msg, n, "%d runs are going already (the limit, --max-runs)", w->active);
        rc = 429;
    } else if ((dir = new_folder(w, id, id_size)) < 0 || !(r = add_run(w))) {
        snprintf(msg, n, "cannot create a run folder in %s: %s", w->runs_path, strerror(errno));
        rc = 500;
    }
    if (!rc) rc = output_args(w, &a, req, dir, id);
    char *text = rc ? NULL : json_dumps(req, JSON_INDENT(1));
    if (text) write_at(dir, "request.json", text);
    free(text);
    if (!rc) {
        snprintf(r->id, sizeof r->id, "%s", id);
        r->argv = json_array();
        json_array_append_new(r->argv, json_string("kernbench"));
        for (int i = 0; i < a.n; i++)
            json_array_append_new(r->argv, json_string(a.v[i]));
        r->t0 = wall_now();
        if (spawn(w, r, dir, &a)) {
            snprintf(msg, n, "cannot start %s: %s", w->exe, strerror(errno));
            json_decref(r->argv);
            w->n_runs--;
            rc = 500;
        } else {
            w->active++;
            save_status(w, r);
        }
    } else if (r) {
        w->n_runs--;
    }
    pthread_mutex_unlock(&w->mu);
    if (dir >= 0) close(dir);
    argv_free(&a);
    return rc ? rc : 202;
}

/* ---- watching ---------------------------------------------------------------------- */

static kb__web_run *find(kb__web *w, const char *id)
{
    for (size_t i = 0; i < w->n_runs; i++)
        if (!strcmp(w->runs[i].id, id)) return &w->runs[i];
    return NULL;
}

int kb__web_run_cancel(kb__web *w, const char *id)
{
    pthread_mutex_lock(&w->mu);
    kb__web_run *r = find(w, id);
    int rc = !r ? 404 : r->state != KB__RUN_RUNNING ? 409 : 200;
    if (rc == 200) {
        r->state = KB__RUN_CANCELLED; /* the reaper keeps it when the signal comes */
        kill(-r->pid, SIGKILL);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static void finish(kb__web *w, kb__web_run *r, int st)
{
    r->t1 = wall_now();
    r->pid = 0;
    w->active--;
    if (WIFEXITED(st)) {
        int c = WEXITSTATUS(st);
        r->code = c;
        if (r->state == KB__RUN_RUNNING)
            r->state = c == 0 ? KB__RUN_DONE : c == 2 ? KB__RUN_USAGE : KB__RUN_FAILED;
    } else {
        r->code = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        if (r->state == KB__RUN_RUNNING) r->state = KB__RUN_CRASHED;
    }
    save_status(w, r);
}

void kb__web_runs_tick(kb__web *w)
{
    pthread_mutex_lock(&w->mu);
    double now = wall_now();
    for (size_t i = 0; i < w->n_runs; i++) {
        kb__web_run *r = &w->runs[i];
        if (!r->pid) continue;
        int st;
        pid_t p = waitpid(r->pid, &st, WNOHANG);
        if (p == r->pid) {
            kill(-r->pid, SIGKILL); /* anything the run left behind in its group */
            finish(w, r, st);
        } else if (r->state == KB__RUN_RUNNING && now - r->t0 > w->cfg.run_wall_s) {
            r->state = KB__RUN_TIMEOUT;
            kill(-r->pid, SIGKILL);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

void kb__web_runs_stop(kb__web *w)
{
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->n_runs; i++) {
        kb__web_run *r = &w->runs[i];
        if (!r->pid) continue;
        r->state = KB__RUN_CANCELLED;
        kill(-r->pid, SIGKILL);
        int st;
        if (waitpid(r->pid, &st, 0) == r->pid) finish(w, r, st);
    }
    for (size_t i = 0; i < w->n_runs; i++)
        json_decref(w->runs[i].argv);
    free(w->runs);
    w->runs = NULL;
    w->n_runs = 0;
    pthread_mutex_unlock(&w->mu);
}

/* ---- history --------------------------------------------------------------------------- */

/* The last `max` bytes of runs/ID/name, or NULL. */
static char *tail_of(kb__web *w, const char *id, const char *name, size_t max)
{
    int dir = openat(w->runs_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = dir < 0 ? -1 : openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (dir >= 0) close(dir);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && (buf = malloc(max + 1))) {
        off_t from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
        ssize_t got = pread(fd, buf, max, from);
        buf[got > 0 ? got : 0] = '\0';
    }
    close(fd);
    return buf;
}

static json_t *load_status(kb__web *w, const char *id)
{
    char *text = tail_of(w, id, "status.json", 1 << 16);
    json_t *s = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return json_is_object(s) ? s : (json_decref(s), NULL);
}

static int newer_first(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "id"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "id"));
    return strcmp(y ? y : "", x ? x : "");
}

json_t *kb__web_runs_list(kb__web *w)
{
    json_t *items[4096];
    size_t n = 0;
    pthread_mutex_lock(&w->mu);
    /* a descriptor of its own: a dup would share (and keep) the offset */
    int fd = openat(w->runs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 4096) {
        if (!kb__web_safe_name(e->d_name)) continue;
        kb__web_run *r = find(w, e->d_name);
        json_t *s = r ? status_json(r) : load_status(w, e->d_name);
        if (s) items[n++] = s;
    }
    if (d)
        closedir(d);
    else if (fd >= 0)
        close(fd);
    pthread_mutex_unlock(&w->mu);
    qsort(items, n, sizeof *items, newer_first);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, items[i]);
    return list;
}

/* The last "progress:" line of text (without its prefix), or NULL. */
static json_t *progress_of(const char *text)
{
    const char *last = NULL;
    for (const char *p = text; p && (p = strstr(p, "progress: ")); p++)
        if (p == text || p[-1] == '\n' || p[-1] == '\r') last = p + 10;
    if (!last) return NULL;
    size_t n = strcspn(last, "\r\n");
    return json_stringn(last, n);
}

json_t *kb__web_run_status(kb__web *w, const char *id)
{
    if (!kb__web_safe_name(id)) return NULL;
    pthread_mutex_lock(&w->mu);
    kb__web_run *r = find(w, id);
    json_t *s = r ? status_json(r) : load_status(w, id);
    pthread_mutex_unlock(&w->mu);
    if (!s) return NULL;
    char *err = tail_of(w, id, "stderr.txt", 4096);
    json_t *prog = err ? progress_of(err) : NULL;
    if (prog) json_object_set_new(s, "progress", prog);
    if (err) json_object_set_new(s, "stderr_tail", json_string(err));
    free(err);
    return s;
}

json_t *kb__web_choices(const kb__web *w)
{
    json_t *benches = json_array(), *cases = json_array(), *models = json_array();
    for (int i = 0; i < kb_bench_count(); i++) {
        const kb_bench *b = kb_bench_at(i);
        json_t *opts = json_array();
        for (int k = 0; k < b->n_opts; k++)
            json_array_append_new(opts,
                                  json_pack("{s:s, s:s, s:s}", "key", b->opts[k].key, "default",
                                            b->opts[k].def, "help", b->opts[k].help));
        json_array_append_new(benches, json_pack("{s:s, s:s, s:o}", "name", b->name, "summary",
                                                 b->summary, "opts", opts));
    }
    for (int i = 0; i < KB__PROBE_CASE_COUNT; i++)
        json_array_append_new(cases, json_pack("{s:s, s:s}", "name", kb__probe_case_name(i), "doc",
                                               kb__probe_case_doc(i)));
    for (size_t k = 0; k < kb__kind_count(); k++)
        if (kb__kind_serves((int)k, KB__ROLE_FABRIC))
            json_array_append_new(models, json_string(kb__kind_get(k)->name));
    return json_pack("{s:o, s:o, s:o, s:{s:i, s:f, s:I}}", "benches", benches, "cases", cases,
                     "models", models, "limits", "max_runs", w->cfg.max_runs, "run_wall_s",
                     w->cfg.run_wall_s, "run_mem_bytes", (json_int_t)w->cfg.run_mem_bytes);
}
