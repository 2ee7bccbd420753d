/*
 * reach.c — maximum flow and minimum cut over the machine graph, and the
 * reachable peak figures of `kernbench topo` (reach.h).
 *
 * The network is the graph's directed links (capacity bw_gbs) plus a
 * super-source S with an edge to every source node and a super-sink T
 * with an edge from every sink node (the ends' capacities). Dinic's
 * algorithm: BFS levels over residual capacities, then blocking flows by
 * DFS with per-node edge cursors. The minimum cut is read from the last
 * BFS: edges from the nodes S still reaches to the nodes it does not.
 *
 * Invariants: edge e and e ^ 1 are each other's residual; residual
 * capacities stay >= 0; the flow found equals the cut's capacity (up to
 * EPS per edge). Deterministic: edges are added in link-id order, ends in
 * the caller's order.
 */
#include "topo/reach.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS        1e-9 /* GB/s below which a residual capacity is spent */
#define UNBOUNDED  1e18 /* capacity of an end without a bound */
#define NO_LINK    UINT32_MAX
#define MAX_GROUPS 8

typedef struct net {
    uint32_t n, m;     /* nodes (graph + S + T), edges used */
    uint32_t *head;    /* [n] first edge out of each node, NO_LINK for none */
    uint32_t *next;    /* [m] next edge out of the same node */
    uint32_t *to;      /* [m] */
    double *cap;       /* [m] residual capacity */
    double *orig;      /* [m] capacity before any flow */
    uint32_t *link;    /* [m] graph link id, or NO_LINK for an end or a residual */
    const char **what; /* [m] an end's name, or NULL */
    int32_t *level;    /* [n] BFS level, -1 unreached */
    uint32_t *cursor;  /* [n] DFS edge cursor */
    uint32_t *queue;   /* [n] */
} net;

static void net_free(net *g)
{
    free(g->head), free(g->next), free(g->to), free(g->cap), free(g->orig), free(g->link);
    free(g->what), free(g->level), free(g->cursor), free(g->queue);
}

static int net_alloc(net *g, uint32_t n, uint32_t m_max)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->head = malloc(n * sizeof *g->head);
    g->level = malloc(n * sizeof *g->level);
    g->cursor = malloc(n * sizeof *g->cursor);
    g->queue = malloc(n * sizeof *g->queue);
    g->next = malloc(m_max * sizeof *g->next);
    g->to = malloc(m_max * sizeof *g->to);
    g->cap = malloc(m_max * sizeof *g->cap);
    g->orig = malloc(m_max * sizeof *g->orig);
    g->link = malloc(m_max * sizeof *g->link);
    g->what = malloc(m_max * sizeof *g->what);
    if (!g->head || !g->level || !g->cursor || !g->queue || !g->next || !g->to || !g->cap ||
        !g->orig || !g->link || !g->what)
        return -1;
    for (uint32_t v = 0; v < n; v++)
        g->head[v] = NO_LINK;
    return 0;
}

static void add_half(net *g, uint32_t u, uint32_t v, double cap, uint32_t link, const char *what)
{
    uint32_t e = g->m++;
    g->to[e] = v;
    g->cap[e] = g->orig[e] = cap;
    g->link[e] = link;
    g->what[e] = what;
    g->next[e] = g->head[u];
    g->head[u] = e;
}

/* Edge u -> v and its residual v -> u (ids e, e ^ 1). */
static void add_edge(net *g, uint32_t u, uint32_t v, double cap, uint32_t link, const char *what)
{
    add_half(g, u, v, cap, link, what);
    add_half(g, v, u, 0, NO_LINK, NULL);
}

/* Levels from s over residual capacity; 1 when t is reached. */
static int bfs(net *g, uint32_t s, uint32_t t)
{
    for (uint32_t v = 0; v < g->n; v++)
        g->level[v] = -1;
    uint32_t qh = 0, qt = 0;
    g->level[s] = 0;
    g->queue[qt++] = s;
    while (qh < qt) {
        uint32_t u = g->queue[qh++];
        for (uint32_t e = g->head[u]; e != NO_LINK; e = g->next[e])
            if (g->cap[e] > EPS && g->level[g->to[e]] < 0) {
                g->level[g->to[e]] = g->level[u] + 1;
                g->queue[qt++] = g->to[e];
            }
    }
    return g->level[t] >= 0;
}

/* Pushes up to f from u toward t along increasing levels; returns what went. */
static double dfs(net *g, uint32_t u, uint32_t t, double f)
{
    if (u == t) return f;
    for (; g->cursor[u] != NO_LINK; g->cursor[u] = g->next[g->cursor[u]]) {
        uint32_t e = g->cursor[u], v = g->to[e];
        if (g->cap[e] <= EPS || g->level[v] != g->level[u] + 1) continue;
        double got = dfs(g, v, t, f < g->cap[e] ? f : g->cap[e]);
        if (got > EPS) {
            g->cap[e] -= got;
            g->cap[e ^ 1] += got;
            return got;
        }
    }
    return 0;
}

typedef struct group {
    char label[64];
    uint32_t count;
    int is_link;
} group;

static void count_in(group *gs, int *ng, const char *label, int is_link)
{
    for (int i = 0; i < *ng; i++)
        if (gs[i].is_link == is_link && !strcmp(gs[i].label, label)) {
            gs[i].count++;
            return;
        }
    if (*ng == MAX_GROUPS) return;
    snprintf(gs[*ng].label, sizeof gs[*ng].label, "%s", label);
    gs[*ng].count = 1;
    gs[*ng].is_link = is_link;
    (*ng)++;
}

/* Names the cut after the last BFS (which did not reach T): edges from
 * reached to unreached nodes, grouped by kind in edge order (links by id,
 * then the sources' and the sinks' ends). */
static void name_cut(const net *g, const kb__topo *t, kb__topo_reach *out)
{
    group gs[MAX_GROUPS];
    int ng = 0;
    out->cut_edges = 0;
    for (uint32_t e = 0; e < g->m; e += 2) {
        uint32_t u = g->to[e ^ 1], v = g->to[e];
        if (g->level[u] < 0 || g->level[v] >= 0 || g->orig[e] <= 0) continue;
        out->cut_edges++;
        char label[64];
        if (g->link[e] != NO_LINK) {
            const kb__topo_link *l = &t->links[g->link[e]];
            snprintf(label, sizeof label, "%s<->%s", kb__role_name(t->nodes[l->from].role),
                     kb__role_name(t->nodes[l->to].role));
        } else {
            snprintf(label, sizeof label, "%s", g->what[e] ? g->what[e] : "end");
        }
        count_in(gs, &ng, label, g->link[e] != NO_LINK);
    }
    size_t used = 0;
    out->bound[0] = '\0';
    for (int i = 0; i < ng && used < sizeof out->bound; i++) {
        int w = snprintf(out->bound + used, sizeof out->bound - used, "%s%u %s%s%s", i ? " + " : "",
                         gs[i].count, gs[i].label, gs[i].is_link ? " link" : "",
                         gs[i].count > 1 ? "s" : "");
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* 1 when node v is the host or in a SIP that sip_in admits. */
static int in_sips(const kb__topo *t, const unsigned char *sip_in, uint32_t v)
{
    return t->nodes[v].sip < 0 || sip_in[t->nodes[v].sip];
}

static int check_ends(const kb__topo *t, const kb__flow_end *e, size_t n, const char *side,
                      kb__err *err)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].node >= t->n_nodes)
            return kb__err_set(err, KB_EINVAL, "max flow: %s %zu: node %u out of range (%u nodes)",
                               side, i, e[i].node, t->n_nodes);
    return 0;
}

int kb__topo_max_flow(const kb__topo *t, const kb__flow_end *src, size_t nsrc,
                      const kb__flow_end *dst, size_t ndst, const unsigned char *sip_in,
                      kb__topo_reach *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    int rc = check_ends(t, src, nsrc, "source", err);
    if (!rc) rc = check_ends(t, dst, ndst, "sink", err);
    if (rc) return rc;
    net g;
    uint32_t s = t->n_nodes, sink = t->n_nodes + 1;
    uint32_t m_max = 2 * (t->n_links + (uint32_t)nsrc + (uint32_t)ndst);
    if (net_alloc(&g, t->n_nodes + 2, m_max ? m_max : 1)) {
        net_free(&g);
        return kb__err_set(err, KB_ENOMEM, "max flow: out of host memory");
    }
    int host_src = 0, host_dst = 0;
    for (size_t i = 0; i < nsrc; i++)
        host_src |= src[i].node == 0;
    for (size_t i = 0; i < ndst; i++)
        host_dst |= dst[i].node == 0;
    for (uint32_t i = 0; i < t->n_links; i++) {
        const kb__topo_link *l = &t->links[i];
        /* the host forwards nothing: its links carry flow from or to it only */
        if ((l->from == 0 && !host_src) || (l->to == 0 && !host_dst)) continue;
        if (sip_in && (!in_sips(t, sip_in, l->from) || !in_sips(t, sip_in, l->to))) continue;
        add_edge(&g, l->from, l->to, l->bw_gbs, i, NULL);
    }
    for (size_t i = 0; i < nsrc; i++)
        add_edge(&g, s, src[i].node, src[i].cap_gbs > 0 ? src[i].cap_gbs : UNBOUNDED, NO_LINK,
                 src[i].what);
    for (size_t i = 0; i < ndst; i++)
        add_edge(&g, dst[i].node, sink, dst[i].cap_gbs > 0 ? dst[i].cap_gbs : UNBOUNDED, NO_LINK,
                 dst[i].what);
    while (bfs(&g, s, sink)) {
        for (uint32_t v = 0; v < g.n; v++)
            g.cursor[v] = g.head[v];
        for (double f; (f = dfs(&g, s, sink, UNBOUNDED)) > EPS;)
            out->gbs += f;
    }
    if (out->gbs > EPS)
        name_cut(&g, t, out);
    else
        snprintf(out->bound, sizeof out->bound, "no path");
    net_free(&g);
    return 0;
}

/* Appends the ends of one cube: its HBM slices (what = "HBM slice") or
 * its PE DMA engines. */
static size_t cube_ends(const kb__topo *t, int sip, int cube, int slices, kb__flow_end *e)
{
    const kb__topo_params *p = &t->params;
    size_t n = 0;
    uint32_t units = slices ? t->slices_per_cube : t->pes_per_cube;
    for (uint32_t u = 0; u < units; u++) {
        kb__flow_end *x = &e[n++];
        x->node = (uint32_t)kb__topo_node_id(t, slices ? KB__ROLE_HBM_CTRL : KB__ROLE_PE_DMA, sip,
                                             cube, (int)u);
        x->cap_gbs = slices ? p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency
                            : p->pe.dma_channels * p->pe.dma_bw_gbs;
        x->what = slices ? "HBM slice" : "PE DMA engine";
    }
    return n;
}

/* 1 when cube c of a SIP lies beyond the middle cut (kb__topo_figures). */
static int beyond_cut(const kb__topo *t, uint32_t c)
{
    uint32_t x = c % t->mesh_cols, y = c / t->mesh_cols;
    return t->mesh_cols >= t->mesh_rows ? x >= t->mesh_cols / 2 : y >= t->mesh_rows / 2;
}

/* Ends of SIP sip's cubes: all, or those beyond (side 1) or before (side
 * 0) the middle cut. */
static size_t sip_ends(const kb__topo *t, int sip, int side, int slices, kb__flow_end *e)
{
    size_t n = 0;
    for (uint32_t c = 0; c < t->cubes_per_sip; c++)
        if (side < 0 || beyond_cut(t, c) == side) n += cube_ends(t, sip, (int)c, slices, e + n);
    return n;
}

int kb__topo_reach_get(const kb__topo *t, kb__topo_reach_figures *r, kb__err *err)
{
    memset(r, 0, sizeof *r);
    size_t per_sip = (size_t)t->cubes_per_sip * (t->slices_per_cube + t->pes_per_cube);
    kb__flow_end *a = calloc((size_t)t->sips * per_sip + 1, sizeof *a);
    kb__flow_end *b = calloc((size_t)t->sips * per_sip + 1, sizeof *b);
    int rc = a && b ? 0 : kb__err_set(err, KB_ENOMEM, "reachable figures: out of host memory");
    size_t na, nb;
    if (!rc) {
        nb = cube_ends(t, 0, 0, 0, b);
        rc = kb__topo_max_flow(t, a, cube_ends(t, 0, 0, 1, a) ? 1 : 0, b, nb, NULL, &r->hbm_slice,
                               err);
    }
    if (!rc) rc = kb__topo_max_flow(t, a, cube_ends(t, 0, 0, 1, a), b, nb, NULL, &r->hbm_cube, err);
    if (!rc) {
        na = nb = 0;
        for (uint32_t s = 0; s < t->sips; s++) {
            na += sip_ends(t, (int)s, -1, 1, a + na);
            nb += sip_ends(t, (int)s, -1, 0, b + nb);
        }
        rc = kb__topo_max_flow(t, a, na, b, nb, NULL, &r->hbm_system, err);
    }
    r->has_bisection = t->mesh_cols >= 2 || t->mesh_rows >= 2;
    if (!rc && r->has_bisection)
        rc = kb__topo_max_flow(t, a, sip_ends(t, 0, 1, 1, a), b, sip_ends(t, 0, 0, 0, b), NULL,
                               &r->bisection, err);
    if (!rc) {
        kb__flow_end host = {0, 0, NULL};
        na = 0;
        for (uint32_t s = 0; s < t->sips; s++)
            na += sip_ends(t, (int)s, -1, 1, a + na);
        for (size_t i = 0; i < na; i++)
            a[i].cap_gbs = 0, a[i].what = NULL;
        rc = kb__topo_max_flow(t, &host, 1, a, na, NULL, &r->pcie, err);
        r->pcie.gbs /= t->sips; /* the SIPs are alike: each gets its share */
    }
    r->has_sip_link = t->sips > 1;
    if (!rc && r->has_sip_link) {
        /* SIPs 0 and 1 alone: the way round the rest of the ring is not this link's */
        unsigned char *in = calloc(t->sips, 1);
        if (!in) rc = kb__err_set(err, KB_ENOMEM, "reachable figures: out of host memory");
        if (!rc) {
            in[0] = in[1] = 1;
            rc = kb__topo_max_flow(t, a, sip_ends(t, 0, -1, 1, a), b, sip_ends(t, 1, -1, 0, b), in,
                                   &r->sip_link, err);
        }
        free(in);
    }
    free(a);
    free(b);
    return rc;
}
