/*
 * html.c — writes the self-contained HTML report (html.h): the page's
 * skeleton, its embedded style and scripts, and one JSON object the script
 * draws from.
 */
#include "report/html.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/kernbench.h"
#include "mem/memctl.h"
#include "report/report.h"
#include "topo/topo.h"

extern const char kb__asset_report_js[], kb__asset_report_css[];
extern const char kb__asset_uplot_js[], kb__asset_uplot_css[], kb__asset_uplot_LICENSE[];

/* s as a JSON string that is also safe inside an HTML script element:
 * quotes, backslashes, control bytes and '<' escaped. */
static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&')
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Copies JSON text with every '<' written as \u003c (it only occurs
 * inside strings in JSON, where the escape means the same). */
static void embed_json(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '<')
            fputs("\\u003c", f);
        else
            fputc(s[i], f);
}

static void u64_array(FILE *f, const uint64_t *v, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
    fputc(']', f);
}

static void write_machine(FILE *f, const kb__topo *t)
{
    fprintf(f,
            "{\"sips\": %u, \"cubes\": %u, \"pes\": %u, \"slices\": %u, \"rows\": %u, "
            "\"cols\": %u,\n \"nodes\": [",
            t->sips, t->cubes_per_sip, t->pes_per_cube, t->slices_per_cube, t->mesh_rows,
            t->mesh_cols);
    for (uint32_t i = 0; i < t->n_nodes; i++) {
        const kb__topo_node *n = &t->nodes[i];
        fputs(i ? ",\n" : "", f);
        fputc('[', f);
        jstr(f, n->name);
        fprintf(f, ",\"%s\",%d,%d,%d,%d,%d]", kb__role_name(n->role), n->sip, n->cube, n->unit,
                n->x, n->y);
    }
    fputs("],\n \"links\": [", f);
    for (uint32_t i = 0; i < t->n_links; i++) {
        const kb__topo_link *l = &t->links[i];
        fprintf(f, "%s[%u,%u,\"%s\",%.6g]", i ? ",\n" : "", l->from, l->to,
                kb__link_class_name(l->cls), l->bw_gbs);
    }
    fputs("]}", f);
}

/* [[name, node, space, channels, bytes, busy_ps], ...] */
static void write_mems(FILE *f, const kb__html_in *in)
{
    static const char *const space[KB__SPACE_COUNT] = {"hbm", "sram", "tcm"};
    fputc('[', f);
    for (uint32_t i = 0; i < in->n_mems; i++) {
        const kb__memctl *mc = &in->mems[i];
        fputs(i ? ",\n[" : "[", f);
        jstr(f, mc->name);
        fprintf(f, ",%u,\"%s\",%u,%llu,%llu]", mc->node, space[mc->space], mc->channels,
                (unsigned long long)in->mem_bytes[i], (unsigned long long)in->mem_busy_ps[i]);
    }
    fputc(']', f);
}

/* The machine's counters over the span: links, PE units, memories, the
 * timeline. */
static void write_counters(FILE *f, const kb__html_in *in)
{
    fprintf(f, ",\n\"span_ps\": %llu, \"dma_channels\": %u", (unsigned long long)in->span_ps,
            in->dma_channels);
    fputs(",\n\"link_bytes\": ", f);
    if (in->link_bytes)
        u64_array(f, in->link_bytes, in->topo->n_links);
    else
        fputs("null", f);
    fputs(",\n\"link_busy_ps\": ", f);
    if (in->link_busy_ps)
        u64_array(f, in->link_busy_ps, in->topo->n_links);
    else
        fputs("null", f);
    fputs(",\n\"unit_busy_ps\": ", f);
    size_t units = (size_t)in->topo->sips * in->topo->cubes_per_sip * in->topo->pes_per_cube * 3;
    if (in->unit_busy_ps)
        u64_array(f, in->unit_busy_ps, units);
    else
        fputs("null", f);
    fputs(",\n\"memories\": ", f);
    if (in->mems && in->mem_bytes && in->mem_busy_ps)
        write_mems(f, in);
    else
        fputs("null", f);
    fputs(",\n\"timeline\": ", f);
    if (in->timeline)
        kb__tl_write_json(in->timeline, f);
    else
        fputs("null", f);
}

static void write_data(FILE *f, const kb__html_in *in)
{
    fputs("{\"kind\": ", f);
    jstr(f, in->kind);
    fputs(", \"title\": ", f);
    jstr(f, in->title);
    fputs(",\n\"sweep\": ", f);
    if (in->sweep)
        embed_json(f, in->sweep, strlen(in->sweep));
    else
        fputs("null", f);
    fputs(",\n\"machine\": ", f);
    if (!in->topo) {
        fputs("null", f);
    } else {
        write_machine(f, in->topo);
        write_counters(f, in);
    }
    fputs(",\n\"result\": ", f);
    if (in->record && in->record_len)
        embed_json(f, in->record, in->record_len);
    else
        fputs("null", f);
    fputs("}\n", f);
}

static void write_page(FILE *f, const kb__html_in *in)
{
    fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"generator\" content=\"kernbench\">\n<title>",
          f);
    for (const char *p = in->title; *p; p++)
        if (*p == '<' || *p == '&')
            fprintf(f, "&#%d;", *p);
        else
            fputc(*p, f);
    fprintf(f,
            "</title>\n<style>%s</style>\n<style>%s</style>\n</head><body>\n"
            "<div id=\"app\"></div>\n<script type=\"application/json\" id=\"kb-data\">",
            kb__asset_uplot_css, kb__asset_report_css);
    write_data(f, in);
    fprintf(f,
            "</script>\n<script>/* uPlot, https://github.com/leeoniya/uPlot\n%s*/\n%s</script>\n"
            "<script>%s</script>\n</body></html>\n",
            kb__asset_uplot_LICENSE, kb__asset_uplot_js, kb__asset_report_js);
}

int kb__html_write(const char *path, const kb__html_in *in, kb__err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return kb__err_set(err, KB_ENOMEM, "%s: out of host memory for the report", path);
    write_page(f, in);
    int bad = ferror(f);
    if (fclose(f) || bad || !text) {
        free(text);
        return kb__err_set(err, KB_ENOMEM, "%s: out of host memory for the report", path);
    }
    int rc = kb__report_write_text(path, text, err);
    free(text);
    return rc;
}
