/*
 * server.c — the HTTP side of `kernbench web` (web.h): libmicrohttpd with
 * its own polling thread, the checks every request passes (Host, Origin,
 * body size), the API (/api/...), the embedded pages and the files of the
 * results directory. Cost: one thread; a request is answered from memory or
 * from one file.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "web/internal.h"

extern const char kb__asset_web_html[], kb__asset_web_js[], kb__asset_web_css[];
extern const unsigned long kb__asset_web_html_len, kb__asset_web_js_len, kb__asset_web_css_len;

/* A request's body as it arrives (POST), capped at max_body. */
typedef struct body {
    char *data;
    size_t n;
    int too_big;
} body;

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned status, const char *type,
                                const void *data, size_t n, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)data, mode);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "SAMEORIGIN");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self' 'unsafe-inline'; img-src 'self' data:");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *v)
{
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!text) return send_buf(c, 500, "text/plain", "out of memory\n", 14, MHD_RESPMEM_PERSISTENT);
    return send_buf(c, status, "application/json", text, strlen(text), MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return send_json(c, status, json_pack("{s:s}", "error", msg));
}

/* Host must be one of the served names, and Origin (when sent) the same
 * with "http://": what a page of another site cannot make a browser send
 * (DNS rebinding, cross-site requests). */
static int allowed(const kb__web *w, struct MHD_Connection *c)
{
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    int ok = 0;
    for (int i = 0; i < 2 && host; i++)
        if (w->host_ok[i][0] && !strcmp(host, w->host_ok[i])) ok = 1;
    if (!ok) return 0;
    if (!origin) return 1;
    return !strncmp(origin, "http://", 7) && !strcmp(origin + 7, host);
}

/* runs/ID/FILE from the results directory: both names safe, no symlink
 * followed, a regular file. */
static enum MHD_Result send_result_file(kb__web *w, struct MHD_Connection *c, const char *rest)
{
    char id[160], file[160];
    const char *slash = strchr(rest, '/');
    if (!slash || (size_t)(slash - rest) >= sizeof id || strlen(slash + 1) >= sizeof file)
        return send_error(c, 404, "no such file");
    memcpy(id, rest, (size_t)(slash - rest));
    id[slash - rest] = '\0';
    snprintf(file, sizeof file, "%s", slash + 1);
    if (!kb__web_safe_name(id) || !kb__web_safe_name(file))
        return send_error(c, 403, "only files directly in a run's folder are served");
    int dir = openat(w->runs_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = dir < 0 ? -1 : openat(dir, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (dir >= 0) close(dir);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        return send_error(c, errno == ELOOP ? 403 : 404, "no such file");
    }
    const char *dot = strrchr(file, '.');
    const char *type = !dot                    ? "text/plain; charset=utf-8"
                       : !strcmp(dot, ".html") ? "text/html; charset=utf-8"
                       : !strcmp(dot, ".json") ? "application/json"
                       : !strcmp(dot, ".csv")  ? "text/csv; charset=utf-8"
                                               : "text/plain; charset=utf-8";
    struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!r) return close(fd), MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result api_get(kb__web *w, struct MHD_Connection *c, const char *path)
{
    if (!strcmp(path, "choices")) return send_json(c, 200, kb__web_choices(w));
    if (!strcmp(path, "runs")) return send_json(c, 200, kb__web_runs_list(w));
    if (!strncmp(path, "runs/", 5)) {
        json_t *s = kb__web_run_status(w, path + 5);
        return s ? send_json(c, 200, s) : send_error(c, 404, "no such run");
    }
    return send_error(c, 404, "no such resource");
}

static enum MHD_Result api_post(kb__web *w, struct MHD_Connection *c, const char *path, body *b)
{
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (!strcmp(path, "runs")) {
        /* JSON only: a plain HTML form of another site cannot send it */
        if (!type || strncmp(type, "application/json", 16))
            return send_error(c, 415, "a run request is a JSON object (application/json)");
        json_error_t je;
        json_t *req = json_loadb(b->data ? b->data : "", b->n, 0, &je);
        if (!req) return send_error(c, 400, je.text);
        char id[64] = "", msg[1024] = "";
        int status = kb__web_run_start(w, req, id, sizeof id, msg, sizeof msg);
        json_decref(req);
        if (status != 202) return send_error(c, (unsigned)status, msg);
        return send_json(c, 202, json_pack("{s:s}", "id", id));
    }
    size_t n = strlen(path);
    if (!strncmp(path, "runs/", 5) && n > 12 && !strcmp(path + n - 7, "/cancel")) {
        char id[128];
        snprintf(id, sizeof id, "%.*s", (int)(n - 12), path + 5);
        int st = kb__web_run_cancel(w, id);
        return st == 200 ? send_json(c, 200, json_pack("{s:s}", "id", id))
                         : send_error(c, (unsigned)st, st == 404 ? "no such run" : "not running");
    }
    return send_error(c, 404, "no such resource");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    kb__web *w = cls;
    int post = !strcmp(method, "POST");
    if (!*state) { /* the first call: headers only */
        body *b = calloc(1, sizeof *b);
        if (!b) return MHD_NO;
        *state = b;
        if (!allowed(w, c))
            return send_error(c, 403, "Host or Origin is not this server's address");
        const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (len && strtoull(len, NULL, 10) > w->cfg.max_body) {
            /* a client that waits for "100 Continue" sends no body: answer now; one that
               sends it anyway gets the answer once it is read (discarded, chunk by chunk),
               since closing a socket with unread bytes resets it and loses the answer */
            const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
            if (expect && !strcasecmp(expect, "100-continue"))
                return send_error(c, 413, "request body too large");
            b->too_big = 1;
        }
        if (post || b->too_big) return MHD_YES;
    }
    body *b = *state;
    if (*upload_size) {
        if (b->n + *upload_size > w->cfg.max_body) b->too_big = 1;
        if (!b->too_big) {
            char *d = realloc(b->data, b->n + *upload_size + 1);
            if (!d) return MHD_NO;
            memcpy(d + b->n, upload, *upload_size);
            b->data = d;
            b->n += *upload_size;
            d[b->n] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (b->too_big) return send_error(c, 413, "request body too large");
    if (post)
        return !strncmp(url, "/api/", 5) ? api_post(w, c, url + 5, b)
                                         : send_error(c, 404, "no such resource");
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return send_error(c, 405, "GET or POST");
    if (!strcmp(url, "/") || !strcmp(url, "/index.html"))
        return send_buf(c, 200, "text/html; charset=utf-8", kb__asset_web_html,
                        kb__asset_web_html_len, MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/web.js"))
        return send_buf(c, 200, "text/javascript; charset=utf-8", kb__asset_web_js,
                        kb__asset_web_js_len, MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/web.css"))
        return send_buf(c, 200, "text/css; charset=utf-8", kb__asset_web_css, kb__asset_web_css_len,
                        MHD_RESPMEM_PERSISTENT);
    if (!strncmp(url, "/api/", 5)) return api_get(w, c, url + 5);
    if (!strncmp(url, "/results/", 9)) return send_result_file(w, c, url + 9);
    return send_error(c, 404, "no such resource");
}

static void on_done(void *cls, struct MHD_Connection *c, void **state,
                    enum MHD_RequestTerminationCode code)
{
    body *b = *state;
    if (b) free(b->data);
    free(b);
    *state = NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

static int open_results(kb__web *w)
{
    const char *dir = w->cfg.results;
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "kernbench web: --results %s: cannot create: %s\n", dir, strerror(errno));
        return 1;
    }
    char runs[PATH_MAX];
    snprintf(runs, sizeof runs, "%s/runs", dir);
    if (mkdir(runs, 0755) && errno != EEXIST) {
        fprintf(stderr, "kernbench web: %s: cannot create: %s\n", runs, strerror(errno));
        return 1;
    }
    if (!realpath(runs, w->runs_path) ||
        (w->runs_fd = open(w->runs_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "kernbench web: %s: cannot open: %s\n", runs, strerror(errno));
        return 1;
    }
    return 0;
}

static struct MHD_Daemon *listen_on(kb__web *w, struct sockaddr_in *sa, int *port)
{
    for (int i = 0; i < w->cfg.port_tries; i++) {
        *port = w->cfg.port + i;
        if (*port > 65535) break;
        sa->sin_port = htons((uint16_t)*port);
        struct MHD_Daemon *d = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)*port, NULL, NULL,
            on_request, w, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)sa, MHD_OPTION_NOTIFY_COMPLETED,
            on_done, w, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
            MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
        if (d) return d;
    }
    return NULL;
}

int kb__web_serve(const kb__web_config *cfg)
{
    kb__web w = {.cfg = *cfg, .runs_fd = -1};
    const char *addr = cfg->listen ? cfg->listen : "127.0.0.1";
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "kernbench web: --listen %s: expected an IPv4 address\n", addr);
        return 1;
    }
    if (cfg->exe)
        snprintf(w.exe, sizeof w.exe, "%s", cfg->exe);
    else if (!realpath("/proc/self/exe", w.exe)) {
        fprintf(stderr, "kernbench web: cannot find this program: %s\n", strerror(errno));
        return 1;
    }
    if (open_results(&w)) return 1;
    pthread_mutex_init(&w.mu, NULL);
    /* SIGINT and SIGTERM are waited for below, in this thread only (the
     * server's thread inherits the mask) */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    int port = 0;
    struct MHD_Daemon *d = listen_on(&w, &sa, &port);
    if (!d) {
        fprintf(stderr, "kernbench web: no free port from %d to %d on %s\n", cfg->port,
                cfg->port + cfg->port_tries - 1, addr);
        close(w.runs_fd);
        return 1;
    }
    snprintf(w.host_ok[0], sizeof w.host_ok[0], "%s:%d", addr, port);
    if (!strcmp(addr, "127.0.0.1"))
        snprintf(w.host_ok[1], sizeof w.host_ok[1], "localhost:%d", port);
    printf("kernbench web: serving http://%s:%d/ (results in %s; Ctrl-C stops)\n", addr, port,
           w.runs_path);
    fflush(stdout);
    for (;;) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&stop, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) break;
        kb__web_runs_tick(&w);
    }
    MHD_stop_daemon(d);
    kb__web_runs_stop(&w);
    close(w.runs_fd);
    pthread_mutex_destroy(&w.mu);
    printf("kernbench web: stopped\n");
    return 0;
}
