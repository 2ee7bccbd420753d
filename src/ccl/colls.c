/*
 * colls.c — the table of collectives (ccl/colls.h) and its output-size
 * rule. Rows in kb__ccl_collective order (checked at compile time by the
 * array's size).
 */
#include "ccl/colls.h"

#include <stdio.h>

/* clang-format off */
static const kb__ccl_coll_desc colls[] = {
    /*                          name             call                 outputs (size)       root   reduces divides */
    [KB__CCL_ALL_REDUCE]     = {"all_reduce",     "kb_all_reduce",     KB__CCL_OUT_NONE,    NULL,  1,      0},
    [KB__CCL_REDUCE_SCATTER] = {"reduce_scatter", "kb_reduce_scatter", KB__CCL_OUT_DIV_P,   NULL,  1,      1},
    [KB__CCL_ALL_GATHER]     = {"all_gather",     "kb_all_gather",     KB__CCL_OUT_TIMES_P, NULL,  0,      0},
    [KB__CCL_BROADCAST]      = {"broadcast",      "kb_broadcast",      KB__CCL_OUT_NONE,    "src", 0,      0},
    [KB__CCL_ALL_TO_ALL]     = {"all_to_all",     "kb_all_to_all",     KB__CCL_OUT_SAME,    NULL,  0,      1},
    [KB__CCL_REDUCE]         = {"reduce",         "kb_reduce",         KB__CCL_OUT_NONE,    "dst", 1,      0},
    [KB__CCL_ALL_TO_ALL_V]   = {"all_to_all_v",   "kb_all_to_all_v",   KB__CCL_OUT_COUNTS,  NULL,  0,      0},
    [KB__CCL_SEND_RECV]      = {"send_recv",      NULL,                KB__CCL_OUT_NONE,    NULL,  0,      0},
};
/* clang-format on */
_Static_assert(sizeof colls / sizeof colls[0] == KB__CCL_COLLECTIVE_COUNT,
               "one row per kb__ccl_collective");

const kb__ccl_coll_desc *kb__ccl_coll(int k)
{
    return (unsigned)k < KB__CCL_COLLECTIVE_COUNT ? &colls[k] : NULL;
}

void kb__ccl_coll_names(const char *names[KB__CCL_COLLECTIVE_COUNT])
{
    for (int k = 0; k < KB__CCL_COLLECTIVE_COUNT; k++)
        names[k] = colls[k].name;
}

int64_t kb__ccl_out_elems(int k, int64_t n, int64_t p)
{
    const kb__ccl_coll_desc *d = kb__ccl_coll(k);
    switch (d ? d->out : KB__CCL_OUT_NONE) {
    case KB__CCL_OUT_SAME:
        return n;
    case KB__CCL_OUT_DIV_P:
        return p ? n / p : -1;
    case KB__CCL_OUT_TIMES_P:
        return n * p;
    default:
        return -1;
    }
}

void kb__ccl_out_rule_text(int k, int64_t n, int64_t p, char *buf, size_t size)
{
    const kb__ccl_coll_desc *d = kb__ccl_coll(k);
    switch (d ? d->out : KB__CCL_OUT_NONE) {
    case KB__CCL_OUT_SAME:
        snprintf(buf, size, "N: as many as the input");
        break;
    case KB__CCL_OUT_DIV_P:
        snprintf(buf, size, "N/p: %lld input elements / %lld buffers", (long long)n, (long long)p);
        break;
    case KB__CCL_OUT_TIMES_P:
        snprintf(buf, size, "p*N: %lld buffers x %lld input elements", (long long)p, (long long)n);
        break;
    default:
        if (size) buf[0] = '\0';
    }
}
