/*
 * base/budget.c — the budget's refusal message and its default limit
 * (see budget.h). Cost: the default reads /proc/meminfo once per kb_open.
 */
#include "base/budget.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void kb__budget_init(kb__budget *b)
{
    memset(b, 0, sizeof *b);
    b->limit = UINT64_MAX;
}

const char *kb__mem_kind_name(kb__mem_kind k)
{
    static const char *const names[KB__MEM_KINDS] = {"tensor data", "event queue",
                                                     "messages in flight"};
    return (unsigned)k < KB__MEM_KINDS ? names[k] : "?";
}

const char *kb__budget_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " bytes", bytes);
        return buf;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 3)
        v /= 1024, u++;
    snprintf(buf, size, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
    return buf;
}

int kb__budget_refuse(kb__budget *b, kb__mem_kind k, uint64_t bytes)
{
    char req[32], used[32], lim[32], by[KB__MEM_KINDS][32];
    for (int i = 0; i < KB__MEM_KINDS; i++)
        kb__budget_bytes(by[i], sizeof by[i], b->by[i]);
    snprintf(b->msg, sizeof b->msg,
             "host memory budget exceeded: %s needs %s more while the simulation holds %s "
             "(tensor data %s, event queue %s, messages in flight %s) of a budget of %s; "
             "raise it with --max-memory SIZE (kb_open_options.max_memory)",
             kb__mem_kind_name(k), kb__budget_bytes(req, sizeof req, bytes),
             kb__budget_bytes(used, sizeof used, b->used), by[KB__MEM_DATA], by[KB__MEM_EVENTS],
             by[KB__MEM_MESSAGES], kb__budget_bytes(lim, sizeof lim, b->limit));
    b->refused = 1;
    return KB_EBUDGET;
}

uint64_t kb__budget_default(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    uint64_t kib = 0;
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1) break;
        fclose(f);
    }
    if (kib && kib < UINT64_MAX / 1024) return kib * 1024 / 4 * 3;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (uint64_t)pages < UINT64_MAX / (uint64_t)page)
        return (uint64_t)pages * (uint64_t)page / 4 * 3;
    return UINT64_MAX;
}
