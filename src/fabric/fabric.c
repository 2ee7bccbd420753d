/*
 * fabric.c — building the fabric from the machine graph, link accessors,
 * the closed-form latency of a message alone on a route, and statistics.
 *
 * Cost: construction is linear in nodes + links; statistics walk the links.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/internal.h"

_Static_assert(offsetof(kb__link, pq) == 64, "a reservation's link fields fill the first line");

static int copy_nodes(kb__fabric *fab, const kb__fab_node_desc *nodes, kb__err *err)
{
    fab->nodes = calloc(fab->n_nodes ? fab->n_nodes : 1, sizeof *fab->nodes);
    if (!fab->nodes)
        return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for %u nodes", fab->n_nodes);
    for (uint32_t i = 0; i < fab->n_nodes; i++) {
        fab->nodes[i] = nodes[i];
        fab->nodes[i].name = strdup(nodes[i].name ? nodes[i].name : "?");
        if (!fab->nodes[i].name)
            return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for node names");
    }
    return 0;
}

/* The nodes' serial workers (fab->workers stays NULL when none has one). */
static int copy_workers(kb__fabric *fab, kb__err *err)
{
    uint32_t any = 0;
    for (uint32_t i = 0; i < fab->n_nodes; i++) {
        const kb__kind_worker *w = &fab->nodes[i].worker;
        if (w->bw_gbs < 0 || isnan(w->bw_gbs))
            return kb__err_set(err, KB_EINVAL, "fabric: node %s: worker bandwidth %g GB/s",
                               fab->nodes[i].name, w->bw_gbs);
        any += w->bw_gbs > 0;
    }
    if (!any) return 0;
    fab->workers = calloc(fab->n_nodes, sizeof *fab->workers);
    if (!fab->workers)
        return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for %u workers", any);
    for (uint32_t i = 0; i < fab->n_nodes; i++) {
        const kb__kind_worker *w = &fab->nodes[i].worker;
        if (!(w->bw_gbs > 0)) continue;
        kb__fab_worker *k = &fab->workers[i];
        k->bw_gbs = w->bw_gbs;
        k->o_ps = w->overhead_ps;
        k->pkt_ps = kb__time_add(k->o_ps, kb__topo_serial_ps(fab->packet_bytes, w->bw_gbs));
        k->hdr_ps = kb__time_add(k->o_ps, kb__topo_serial_ps(fab->header_bytes, w->bw_gbs));
    }
    return 0;
}

static int copy_links(kb__fabric *fab, const kb__fab_link_desc *links, kb__err *err)
{
    size_t link_bytes = (fab->n_links ? fab->n_links : 1) * sizeof *fab->links;
    fab->links = aligned_alloc(_Alignof(kb__link), link_bytes); /* a multiple of it */
    if (fab->links) memset(fab->links, 0, link_bytes);
    fab->out_next = calloc(fab->n_links ? fab->n_links : 1, sizeof *fab->out_next);
    fab->out_first = malloc((fab->n_nodes ? fab->n_nodes : 1) * sizeof *fab->out_first);
    if (!fab->links || !fab->out_next || !fab->out_first)
        return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for %u links", fab->n_links);
    for (uint32_t i = 0; i < fab->n_nodes; i++)
        fab->out_first[i] = KB__NO_NODE;
    for (uint32_t i = 0; i < fab->n_links; i++) {
        const kb__fab_link_desc *d = &links[i];
        if (d->from >= fab->n_nodes || d->to >= fab->n_nodes || d->from == d->to)
            return kb__err_set(err, KB_EINVAL, "fabric: link %u joins nodes %u -> %u of %u", i,
                               d->from, d->to, fab->n_nodes);
        if (!(d->bw_gbs > 0))
            return kb__err_set(err, KB_EINVAL, "fabric: link %u (%s -> %s): bandwidth %g GB/s", i,
                               fab->nodes[d->from].name, fab->nodes[d->to].name, d->bw_gbs);
        kb__link *l = &fab->links[i];
        *l = (kb__link){.id = i,
                        .from = d->from,
                        .to = d->to,
                        .cls = d->cls,
                        .bw_gbs = d->bw_gbs,
                        .o_ps = d->overhead_ps,
                        .w_ps = d->wire_ps};
        l->ow_ps = l->o_ps + l->w_ps;
        l->pkt_ps = kb__topo_serial_ps(fab->packet_bytes, l->bw_gbs);
        l->hdr_ps = kb__topo_serial_ps(fab->header_bytes, l->bw_gbs);
        fab->out_next[i] = KB__NO_NODE;
    }
    /* Adjacency in increasing link id order: insert from the back. A link
     * that is down is left out: no route finds it, no arrival counts it. */
    for (uint32_t i = fab->n_links; i-- > 0;) {
        if (links[i].down) {
            fab->n_down++;
            continue;
        }
        fab->out_next[i] = fab->out_first[fab->links[i].from];
        fab->out_first[fab->links[i].from] = i;
    }
    fab->in_deg = calloc(fab->n_nodes ? fab->n_nodes : 1, sizeof *fab->in_deg);
    fab->in_from = calloc(fab->n_nodes ? fab->n_nodes : 1, sizeof *fab->in_from);
    if (!fab->in_deg || !fab->in_from)
        return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for %u nodes", fab->n_nodes);
    for (uint32_t i = 0; i < fab->n_links; i++) {
        if (links[i].down) continue;
        fab->in_deg[fab->links[i].to]++;
        fab->in_from[fab->links[i].to] = fab->links[i].from;
    }
    return 0;
}

int kb__fabric_create(kb__fabric **out, kb__sim *sim, const kb__fab_node_desc *nodes,
                      uint32_t n_nodes, const kb__fab_link_desc *links, uint32_t n_links,
                      uint32_t packet_bytes, uint32_t header_bytes, kb__err *err)
{
    *out = NULL;
    if (!packet_bytes || !header_bytes)
        return kb__err_set(err, KB_EINVAL,
                           "fabric: packet_bytes %u and header_bytes %u must be >= 1", packet_bytes,
                           header_bytes);
    kb__fabric *fab = calloc(1, sizeof *fab);
    if (!fab) return kb__err_set(err, KB_ENOMEM, "fabric: out of memory");
    fab->sim = sim;
    fab->packet_bytes = packet_bytes;
    fab->header_bytes = header_bytes;
    fab->n_nodes = n_nodes;
    fab->n_links = n_links;
    fab->model = &kb__fab_packet_model;
    int rc = copy_nodes(fab, nodes, err);
    if (!rc) rc = copy_workers(fab, err);
    if (!rc) rc = copy_links(fab, links, err);
    if (!rc) rc = kb__fabric_index_gateways(fab, err);
    if (rc) {
        kb__fabric_destroy(fab);
        return rc;
    }
    *out = fab;
    return 0;
}

void kb__fabric_destroy(kb__fabric *fab)
{
    if (!fab) return;
    fab->model->fini(fab);
    for (size_t i = 0; i < fab->n_slots; i++) {
        kb__route *r = fab->slots[i].route;
        if (r) {
            free(r->nodes);
            free(r->flow.res);
            free(r);
        }
    }
    free(fab->slots);
    if (fab->nodes)
        for (uint32_t i = 0; i < fab->n_nodes; i++)
            free((char *)fab->nodes[i].name);
    free(fab->nodes);
    kb__fabric_util_drop(fab); /* unreported: its sink may be gone */
    for (uint32_t i = 0; fab->links && i < fab->n_links; i++)
        free(fab->links[i].pq);
    free(fab->links);
    free(fab->workers);
    free(fab->out_first);
    free(fab->out_next);
    free(fab->routers);
    free(fab->io_nocs);
    free(fab->attach);
    free(fab->bfs_prev_link);
    free(fab->bfs_queue);
    free(fab->bfs_seen);
    free(fab->in_order);
    free(fab->in_deg);
    free(fab->in_from);
    free(fab);
}

int kb__fabric_set_in_order(kb__fabric *fab, uint32_t node, kb__err *err)
{
    uint32_t in = node < fab->n_nodes ? fab->in_deg[node] : 0;
    if (in != 1)
        return kb__err_set(err, KB_EINVAL,
                           "fabric: node %s has %u incoming links; arrivals are in order only "
                           "through exactly one",
                           node < fab->n_nodes ? fab->nodes[node].name : "?", in);
    if (!fab->in_order && !(fab->in_order = calloc(fab->n_nodes, 1)))
        return kb__err_set(err, KB_ENOMEM, "fabric: out of memory");
    fab->in_order[node] = 1;
    for (size_t i = 0; i < fab->n_slots; i++)
        if (fab->slots[i].route && fab->slots[i].route->to == node)
            fab->slots[i].route->ends_in_order = 1;
    return 0;
}

uint32_t kb__fabric_packet_bytes(const kb__fabric *fab)
{
    return fab->packet_bytes;
}
uint32_t kb__fabric_header_bytes(const kb__fabric *fab)
{
    return fab->header_bytes;
}
uint32_t kb__fabric_node_count(const kb__fabric *fab)
{
    return fab->n_nodes;
}
uint32_t kb__fabric_link_count(const kb__fabric *fab)
{
    return fab->n_links;
}
uint32_t kb__fabric_down_count(const kb__fabric *fab)
{
    return fab->n_down;
}

const kb__link *kb__fabric_link(const kb__fabric *fab, uint32_t id)
{
    return id < fab->n_links ? &fab->links[id] : NULL;
}

void kb__fabric_link_count_more(kb__fabric *fab, uint32_t id, uint64_t bytes, uint64_t packets,
                                kb__time busy_ps, kb__time from, kb__time to)
{
    if (id >= fab->n_links) return;
    kb__link *l = &fab->links[id];
    l->bytes += bytes;
    l->packets += packets;
    l->busy_ps = kb__time_add(l->busy_ps, busy_ps);
    if (fab->util) kb__fab_util_spread(fab, l, from, to, busy_ps);
}

const kb__fab_node_desc *kb__fabric_node(const kb__fabric *fab, uint32_t id)
{
    return id < fab->n_nodes ? &fab->nodes[id] : NULL;
}

kb__time kb__link_service_ps(const kb__fabric *fab, const kb__link *l, uint32_t bytes)
{
    return kb__link_svc(fab, l, bytes);
}

static kb__fab_role role_of(kb__role r)
{
    switch (r) {
    case KB__ROLE_HOST:
        return KB__FR_HOST;
    case KB__ROLE_PCIE_EP:
        return KB__FR_PCIE_EP;
    case KB__ROLE_IO_CPU:
        return KB__FR_IO_CPU;
    case KB__ROLE_IO_NOC:
        return KB__FR_IO_NOC;
    case KB__ROLE_ROUTER:
        return KB__FR_ROUTER;
    case KB__ROLE_XBAR:
        return KB__FR_XBAR;
    case KB__ROLE_NOC:
        return KB__FR_NOC;
    case KB__ROLE_M_CPU:
    case KB__ROLE_M_DMA:
        return KB__FR_M_CPU;
    case KB__ROLE_SRAM:
        return KB__FR_SRAM;
    case KB__ROLE_HBM_CTRL:
        return KB__FR_HBM;
    default:
        return KB__FR_PE;
    }
}

int kb__fabric_create_topo(kb__fabric **out, kb__sim *sim, const kb__topo *t, uint32_t header_bytes,
                           kb__err *err)
{
    *out = NULL;
    kb__fab_node_desc *nodes = calloc(t->n_nodes ? t->n_nodes : 1, sizeof *nodes);
    kb__fab_link_desc *links = calloc(t->n_links ? t->n_links : 1, sizeof *links);
    int rc = KB_ENOMEM;
    if (!nodes || !links) {
        kb__err_set(err, rc, "fabric: out of memory for %u nodes", t->n_nodes);
        goto out;
    }
    for (uint32_t i = 0; i < t->n_nodes; i++) {
        const kb__topo_node *n = &t->nodes[i];
        nodes[i] = (kb__fab_node_desc){.name = n->name,
                                       .role = role_of(n->role),
                                       .sip = n->sip < 0 ? 0 : (uint32_t)n->sip,
                                       .cube = n->cube < 0 ? 0 : (uint32_t)n->cube,
                                       .x = n->x < 0 ? 0 : (uint32_t)n->x,
                                       .y = n->y < 0 ? 0 : (uint32_t)n->y,
                                       .worker = n->worker};
    }
    /* What a node's kind adds to the messages leaving it (a router's
     * traversal, topo/kinds.h) is paid with the link's o. */
    for (uint32_t i = 0; i < t->n_links; i++) {
        const kb__topo_link *l = &t->links[i];
        links[i] = (kb__fab_link_desc){.from = l->from,
                                       .to = l->to,
                                       .cls = l->cls,
                                       .bw_gbs = l->bw_gbs,
                                       .overhead_ps = l->overhead_ps + l->node_ps,
                                       .wire_ps = l->wire_ps,
                                       .down = l->down};
    }
    rc = kb__fabric_create(out, sim, nodes, t->n_nodes, links, t->n_links,
                           kb__topo_packet_bytes(&t->params), header_bytes, err);
    const kb__kind *k = kb__kinds_get(t->params.kinds, t->params.fabric.model);
    const kb__fabric_model *model = kb__fabric_model_find(k ? k->name : NULL);
    if (!rc && !model)
        rc = kb__err_set(err, KB_ECONFIG, "fabric.model: unknown model '%s'; models: %s",
                         k ? k->name : "?", kb__fabric_model_list());
    if (!rc && t->params.fabric.ring_warmup == 1)
        rc = kb__err_set(err, KB_ECONFIG,
                         "fabric.ring_warmup: 1 step cannot measure a pace; expected 0 (every "
                         "step message by message) or at least 2");
    if (!rc) rc = kb__fabric_set_model(*out, model, err);
    if (!rc) (*out)->ring_warmup = t->params.fabric.ring_warmup;
    if (rc) {
        kb__fabric_destroy(*out);
        *out = NULL;
    }
out:
    free(nodes);
    free(links);
    return rc;
}

/* The per-packet recursion for a message alone on the route, starting at 0:
 * the reference for messages whose last packet is shorter. */
static kb__time recursion_alone(const kb__fabric *fab, const kb__route *r, uint64_t bytes,
                                uint32_t p)
{
    uint64_t n = (bytes + p - 1) / p;
    kb__time *free_at = calloc(2 * (size_t)r->n, sizeof *free_at); /* links, then workers */
    kb__time last = 0;
    if (!free_at) return 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t size = (i + 1 < n) ? p : (uint32_t)(bytes - (n - 1) * (uint64_t)p);
        kb__time t = 0;
        for (uint32_t h = 0; h < r->n; h++) {
            const kb__fab_worker *wk = kb__fab_worker_at(fab, r, h);
            if (wk) { /* the node's serial worker, between the two links */
                kb__time ws = t > free_at[r->n + h] ? t : free_at[r->n + h];
                t = free_at[r->n + h] = ws + kb__fab_worker_svc(fab, wk, size);
            }
            const kb__link *l = &fab->links[r->links[h]];
            kb__time start = t > free_at[h] ? t : free_at[h];
            free_at[h] = start + kb__link_service_ps(fab, l, size);
            t = free_at[h] + l->ow_ps;
        }
        last = t;
    }
    free(free_at);
    return last;
}

void kb__fabric_closed_form(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p,
                            kb__fab_closed *out)
{
    kb__time o = 0, w = 0, first = 0, worst = 0;
    uint64_t n = (bytes + p - 1) / p;
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__link *l = &fab->links[r->links[h]];
        const kb__fab_worker *wk = kb__fab_worker_at(fab, r, h);
        kb__time s = kb__link_service_ps(fab, l, p), sw = wk ? kb__fab_worker_svc(fab, wk, p) : 0;
        o += l->o_ps;
        w += l->w_ps;
        first += s + sw;
        if (s > worst) worst = s;
        if (sw > worst) worst = sw;
    }
    out->overhead = o;
    out->wire = w;
    if (bytes % p == 0 || n == 1) {
        if (n == 1 && bytes % p) {
            first = 0;
            for (uint32_t h = 0; h < r->n; h++) {
                const kb__fab_worker *wk = kb__fab_worker_at(fab, r, h);
                first += kb__link_service_ps(fab, &fab->links[r->links[h]], (uint32_t)bytes) +
                         (wk ? kb__fab_worker_svc(fab, wk, (uint32_t)bytes) : 0);
            }
        }
        out->drain = first + (n - 1) * worst;
        out->total = o + w + out->drain;
        return;
    }
    out->total = recursion_alone(fab, r, bytes, p);
    out->drain = out->total - o - w;
}

void kb__fabric_class_stats(const kb__fabric *fab, kb__link_class_stats out[KB__LINK_CLASS_COUNT])
{
    memset(out, 0, KB__LINK_CLASS_COUNT * sizeof *out);
    for (uint32_t i = 0; i < fab->n_links; i++) {
        const kb__link *l = &fab->links[i];
        if (l->cls >= KB__LINK_CLASS_COUNT)
            continue; /* a link kind's class (kb__topo_class_count) */
        kb__link_class_stats *s = &out[l->cls];
        s->bytes += l->bytes;
        s->packets += l->packets;
        s->busy_ps += l->busy_ps;
        s->links++;
    }
}

void kb__fabric_reset(kb__fabric *fab)
{
    for (uint32_t i = 0; i < fab->n_links; i++) {
        kb__link *l = &fab->links[i];
        l->free_at = l->last_arrival = 0;
        l->pq_head = l->pq_n = 0;
        l->bytes = l->packets = 0;
        l->busy_ps = 0;
    }
    for (uint32_t i = 0; fab->workers && i < fab->n_nodes; i++) {
        kb__fab_worker *w = &fab->workers[i];
        w->free_at = w->busy_ps = 0;
        w->packets = 0;
    }
    fab->packet_hops = 0;
    fab->model->reset(fab);
}

uint64_t kb__fabric_packet_hops(const kb__fabric *fab)
{
    return fab->packet_hops;
}
