/*
 * ccl_text.c — a resolved ccl configuration as text: "path=value" lines,
 * the defaults first, then each algorithm in file order with every setting
 * (its own or inherited), so two configurations that run the same
 * collectives the same way give the same text whatever file they came from.
 *
 * The results' configuration hash is computed over this text.
 * Cost: a few lines per algorithm.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ccl/ccl_config.h"

typedef struct text {
    char *s;
    size_t len, cap;
    int failed;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(text *t, const char *fmt, ...)
{
    for (int tries = 0; !t->failed && tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = t->s ? vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = 2 * (t->cap + (n > 0 ? (size_t)n : 0)) + 256;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

static void settings(text *t, const char *prefix, const kb__ccl_settings *s)
{
    add(t, "%s.buffer_kind=%s\n", prefix, kb__ccl_buffer_name(s->buffer_kind));
    add(t, "%s.n_slots=%u\n", prefix, s->n_slots);
    add(t, "%s.slot_size=%llu\n", prefix, (unsigned long long)s->slot_size);
    add(t, "%s.backpressure=%s\n", prefix, kb__ccl_backpressure_name(s->backpressure));
    add(t, "%s.vc_chunk_size=%llu\n", prefix, (unsigned long long)s->vc_chunk_size);
    add(t, "%s.credit_size=%llu\n", prefix, (unsigned long long)s->credit_size);
    add(t, "%s.world_size=%u\n", prefix, s->world_size);
}

int kb__ccl_config_text(const kb__ccl_config *c, char **out, kb__err *err)
{
    text t = {0};
    settings(&t, "defaults", &c->defaults);
    for (int col = 0; col < KB__CCL_COLLECTIVE_COUNT; col++)
        if (c->default_algo[col] >= 0)
            add(&t, "defaults.algorithm.%s=%s\n", kb__ccl_collective_name((kb__ccl_collective)col),
                c->algos[c->default_algo[col]].name);
    for (size_t i = 0; i < c->n_algos; i++) {
        const kb__ccl_algo *a = &c->algos[i];
        char prefix[KB__CCL_NAME_MAX + 16];
        snprintf(prefix, sizeof prefix, "algorithms.%s", a->name);
        add(&t, "%s.module=%s\n%s.collective=%s\n%s.topology=%s\n", prefix, a->module, prefix,
            kb__ccl_collective_name(a->collective), prefix, kb__ccl_topology_name(a->topology));
        settings(&t, prefix, &a->s);
    }
    if (t.failed || !t.s) {
        free(t.s);
        *out = NULL;
        return kb__err_set(err, KB_ENOMEM, "out of memory writing the ccl configuration");
    }
    *out = t.s;
    return 0;
}
