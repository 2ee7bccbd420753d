/*
 * tensor.c — workload tensor_4096: create a 4096×4096 f16 tensor split over
 * every PE of the built-in machine (rows over SIPs, columns over cubes and
 * PEs), copy 32 MiB in from the host, copy it back, check it, free it.
 *
 * n counts bytes moved between host and device (in + out). Extras: rss_mib,
 * the process's peak resident set (getrusage), which includes the
 * workload's own 32 MiB host buffer; sim_ps, the simulated time. Goals:
 * wall_s < 0.5 and device-side memory within 2× the tensor's bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kernbench/kernbench.h"
#include "perf.h"

/* Sum of element × position: a check that catches misplaced elements. */
static uint64_t checksum(const uint16_t *buf, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += buf[i] * (i | 1);
    return c;
}

/* Creates, fills, reads back and frees the tensor; the message goes to err. */
static int round_trip(kb_machine *m, uint16_t *buf, int64_t side, char *err, size_t errn)
{
    size_t bytes = (size_t)(side * side) * 2;
    int64_t shape[2] = {side, side};
    kb_policy all = {KB_ROW_WISE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 0, 0, 0, 0};
    kb_tensor t;
    int rc = kb_empty(m, "x", 2, shape, KB_F16, &all, &t);
    if (!rc) rc = kb_copy_from_host(m, t, buf, bytes, KB_F16);
    if (!rc) {
        memset(buf, 0, bytes);
        rc = kb_copy_to_host(m, t, buf, bytes, KB_F16);
    }
    if (!rc) rc = kb_free(m, t);
    if (rc) snprintf(err, errn, "%s", kb_last_error(m));
    return rc;
}

int kb__perf_tensor(const kb__perf_workload *w, kb__perf_result *r)
{
    int64_t side = (int64_t)w->size;
    size_t n = (size_t)(side * side);
    uint16_t *buf = malloc(n * 2);
    kb_machine *m = NULL;
    int rc = buf ? kb_open(&m, NULL, r->error, sizeof r->error) : KB_ENOMEM;
    if (!buf)
        snprintf(r->error, sizeof r->error, "cannot allocate the %zu-byte host buffer", n * 2);
    if (rc) {
        free(buf);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint16_t)((i * 2654435761u) >> 16) & 0x7bff; /* finite f16 values */
    uint64_t want = checksum(buf, n);
    double t0 = kb__perf_now();
    rc = round_trip(m, buf, side, r->error, sizeof r->error);
    double t1 = kb__perf_now();
    if (!rc && checksum(buf, n) != want) {
        snprintf(r->error, sizeof r->error, "data read back differs from data written");
        rc = KB_EINVAL;
    }
    kb__perf_done(r, 2 * n * 2, t0, t1);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    kb__perf_extra_add(r, "rss_mib", (double)ru.ru_maxrss / 1024.0, "MiB");
    kb__perf_extra_add(r, "sim_ps", (double)kb_now_ps(m), "ps");
    kb_close(m);
    free(buf);
    return rc;
}
