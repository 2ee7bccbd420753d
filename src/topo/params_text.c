/*
 * params_text.c — the resolved machine as text: one "path=value" line per
 * schema entry, in schema order, each value written so that it parses back
 * to the same bits (doubles with 17 significant digits, kinds by name).
 *
 * The text is what the results' configuration hash is computed over, and
 * each line is a valid --set argument: the built-in machine with every
 * line applied is the machine p describes.
 * Faults, when there are any, follow as one "faults.LIST=[...]" line per
 * list (faults.c); a machine without faults has none, so its text (and
 * hash) is what it was before faults existed.
 * Cost: one line per parameter (about 130 lines, a few KiB).
 */
#include "topo/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kb__topo_param_format(const kb__topo_params *p, const kb__param *e, char *buf, size_t size)
{
    const char *base = (const char *)p + e->offset;
    int n = -1;
    switch (e->type) {
    case KB__PT_U32:
        n = snprintf(buf, size, "%u", *(const uint32_t *)(const void *)base);
        break;
    case KB__PT_U64:
    case KB__PT_SIZE:
        n = snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)(const void *)base);
        break;
    case KB__PT_DOUBLE:
    case KB__PT_TIME:
    case KB__PT_BW:
        n = snprintf(buf, size, "%.17g", *(const double *)(const void *)base);
        break;
    case KB__PT_MESH:
        n = snprintf(buf, size, "%ux%u", ((const uint32_t *)(const void *)base)[0],
                     ((const uint32_t *)(const void *)base)[1]);
        break;
    case KB__PT_KIND: {
        const kb__kind *k = kb__kinds_get(p->kinds, *(const uint16_t *)(const void *)base);
        n = k ? snprintf(buf, size, "%s", k->name) : -1;
        break;
    }
    case KB__PT_SWITCH:
        n = snprintf(buf, size, "%s", *(const uint32_t *)(const void *)base ? "on" : "off");
        break;
    default:
        break;
    }
    return n >= 0 && (size_t)n < size ? 0 : KB_EINVAL;
}

int kb__topo_params_text(const kb__topo_params *p, char **out, kb__err *err)
{
    size_t cap = 8192, len = 0;
    char *s = malloc(cap);
    for (size_t i = 0; s && i < kb__topo_schema_count(); i++) {
        const kb__param *e = kb__topo_schema_get(i);
        char value[128];
        if (kb__topo_param_format(p, e, value, sizeof value)) {
            free(s);
            *out = NULL;
            return kb__err_set(err, KB_EINVAL, "parameter %s: its value cannot be written as text",
                               e->path);
        }
        size_t need = strlen(e->path) + strlen(value) + 3;
        if (len + need > cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) free(s);
            s = t;
            if (!s) break;
        }
        len += (size_t)snprintf(s + len, cap - len, "%s=%s\n", e->path, value);
    }
    if (s && kb__topo_faults_text(p, &s, &len, &cap)) {
        free(s);
        s = NULL;
    }
    *out = s;
    return s ? 0 : kb__err_set(err, KB_ENOMEM, "out of memory writing the machine's parameters");
}

int kb__topo_param_text(const kb__topo_params *p, const char *path, char *buf, size_t size)
{
    for (size_t i = 0; i < kb__topo_schema_count(); i++)
        if (!strcmp(kb__topo_schema_get(i)->path, path))
            return kb__topo_param_format(p, kb__topo_schema_get(i), buf, size);
    return KB_ENOTFOUND;
}
