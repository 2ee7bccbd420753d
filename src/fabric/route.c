/*
 * route.c — routing over the machine graph and the route cache.
 *
 * A node belongs to a region: the host, an IO chiplet (pcie_ep, io_cpu,
 * io_noc of SIP s) or a cube (every other node of SIP s, cube c). A route is
 * a chain of segments joined at gateways (cube: its router, IO chiplet: its
 * io_noc):
 *   - inside a region, or between two adjacent regions (cube <-> IO chiplet
 *     of the attach cube, IO chiplet <-> IO chiplet of a neighbour SIP,
 *     host <-> IO chiplet): the shortest path using only those regions'
 *     nodes, breadth first over out-links in increasing id order;
 *   - between routers of one SIP: dimension order, x first, then y;
 *   - between SIPs: around the ring of IO chiplets in the shorter direction,
 *     ties toward increasing SIP index.
 * Links that are down (faults.down_links) are not in the out-lists, so no
 * search crosses them. When one is on the route the rules above give, the
 * route goes around it (docs/faults.md): between routers, y first then x;
 * failing that, the shortest path over the SIP's routers, breadth first
 * over out-links in increasing id order; between SIPs, the ring the other
 * way. When nothing reaches, the error names both ends. Without down links
 * the first rule always succeeds: the routes are the ones above.
 * The attach cube of SIP s is the cube that has a link into its IO chiplet.
 *
 * Cost: computing a route is linear in the graph size; the cache makes every
 * later lookup O(1). The gateways (routers, io_noc and attach cube of each
 * SIP) are indexed once, in one pass over the nodes and one over the links.
 */
#include <stdlib.h>
#include <string.h>

#include "fabric/internal.h"

enum { REG_HOST = 1, REG_IO = 2, REG_CUBE = 3 };

static uint64_t region(const kb__fab_node_desc *n)
{
    switch (n->role) {
    case KB__FR_HOST:
        return (uint64_t)REG_HOST << 60;
    case KB__FR_PCIE_EP:
    case KB__FR_IO_CPU:
    case KB__FR_IO_NOC:
        return (uint64_t)REG_IO << 60 | n->sip;
    default:
        return (uint64_t)REG_CUBE << 60 | (uint64_t)n->sip << 24 | n->cube;
    }
}

static int is_io(uint64_t reg)
{
    return (reg >> 60) == REG_IO;
}

/* ---- gateway tables -------------------------------------------------- */

int kb__fabric_index_gateways(kb__fabric *fab, kb__err *err)
{
    uint32_t sips = 0, w = 0, h = 0;
    for (uint32_t i = 0; i < fab->n_nodes; i++) {
        const kb__fab_node_desc *n = &fab->nodes[i];
        if (n->role == KB__FR_HOST) continue;
        if (n->sip + 1 > sips) sips = n->sip + 1;
        if (n->role == KB__FR_ROUTER) {
            if (n->x + 1 > w) w = n->x + 1;
            if (n->y + 1 > h) h = n->y + 1;
        }
    }
    fab->n_sips = sips;
    fab->mesh_w = w;
    fab->mesh_h = h;
    size_t nr = (size_t)sips * w * h;
    fab->routers = malloc((nr ? nr : 1) * sizeof *fab->routers);
    fab->io_nocs = malloc((sips ? sips : 1) * sizeof *fab->io_nocs);
    fab->attach = malloc((sips ? sips : 1) * sizeof *fab->attach);
    fab->bfs_prev_link = malloc((fab->n_nodes ? fab->n_nodes : 1) * sizeof(uint32_t));
    fab->bfs_queue = malloc((fab->n_nodes ? fab->n_nodes : 1) * sizeof(uint32_t));
    fab->bfs_seen = calloc(fab->n_nodes ? fab->n_nodes : 1, sizeof(uint32_t));
    fab->n_slots = 64;
    fab->slots = calloc(fab->n_slots, sizeof *fab->slots);
    if (!fab->routers || !fab->io_nocs || !fab->attach || !fab->bfs_prev_link || !fab->bfs_queue ||
        !fab->bfs_seen || !fab->slots)
        return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for the route tables");
    for (size_t i = 0; i < nr; i++)
        fab->routers[i] = KB__NO_NODE;
    for (uint32_t s = 0; s < sips; s++)
        fab->io_nocs[s] = KB__NO_NODE;
    for (uint32_t i = 0; i < fab->n_nodes; i++) {
        const kb__fab_node_desc *n = &fab->nodes[i];
        if (n->role == KB__FR_ROUTER)
            fab->routers[((size_t)n->sip * h + n->y) * w + n->x] = i;
        else if (n->role == KB__FR_IO_NOC && fab->io_nocs[n->sip] == KB__NO_NODE)
            fab->io_nocs[n->sip] = i;
    }
    /* The attach cube of SIP s: the first link, in id order, from a cube of
     * SIP s into its IO chiplet (one pass over the links, not one a route). */
    uint8_t *found = calloc(sips ? sips : 1, 1);
    if (!found) return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for the route tables");
    for (uint32_t s = 0; s < sips; s++)
        fab->attach[s] = KB__NO_NODE;
    for (uint32_t i = 0; i < fab->n_links; i++) {
        const kb__link *l = &fab->links[i];
        const kb__fab_node_desc *a = &fab->nodes[l->from], *b = &fab->nodes[l->to];
        uint64_t rb = region(b);
        if (!is_io(rb) || (region(a) >> 60) != REG_CUBE || a->sip != b->sip || b->sip >= sips ||
            found[b->sip])
            continue;
        found[b->sip] = 1;
        fab->attach[b->sip] = fab->routers[((size_t)a->sip * h + a->y) * w + a->x];
    }
    free(found);
    return 0;
}

/* The attach cube's router of SIP s: the router of the cube with a link into
 * the IO chiplet, or KB__NO_NODE. */
static uint32_t attach_router(const kb__fabric *fab, uint32_t s)
{
    return s < fab->n_sips ? fab->attach[s] : KB__NO_NODE;
}

/* ---- path building ---------------------------------------------------- */

typedef struct path {
    uint32_t *links;
    uint32_t n, cap;
} path;

static int path_push(path *p, uint32_t link)
{
    if (p->n == p->cap) {
        uint32_t cap = p->cap ? 2 * p->cap : 16;
        uint32_t *nl = realloc(p->links, cap * sizeof *nl);
        if (!nl) return KB_ENOMEM;
        p->links = nl;
        p->cap = cap;
    }
    p->links[p->n++] = link;
    return 0;
}

/* Flags on a search's regions: through the routers of one SIP only (the
 * mesh detour); never through the host (the ring: SIP links only, so a
 * message between SIPs does not bounce through the host's PCIe links). */
#define ROUTERS_OF (1ull << 62)
#define NO_HOST    (1ull << 63)

static int allowed(const kb__fabric *fab, uint32_t node, uint64_t ra, uint64_t rb)
{
    if (ra & ROUTERS_OF)
        return fab->nodes[node].role == KB__FR_ROUTER &&
               fab->nodes[node].sip == (uint32_t)(ra & 0xffffffffu);
    int host_ok = !(ra & NO_HOST);
    ra &= ~NO_HOST;
    rb &= ~NO_HOST;
    uint64_t r = region(&fab->nodes[node]);
    if (r == ra || r == rb) return 1;
    return host_ok && fab->nodes[node].role == KB__FR_HOST && (is_io(ra) || is_io(rb));
}

/* Appends the shortest path from -> to using nodes of regions ra/rb only. */
static int bfs(kb__fabric *fab, uint32_t from, uint32_t to, uint64_t ra, uint64_t rb, path *p)
{
    if (from == to) return 0;
    uint32_t *prev = fab->bfs_prev_link, *q = fab->bfs_queue, *seen = fab->bfs_seen;
    if (++fab->bfs_mark == 0) { /* the marks wrapped: clear them */
        memset(seen, 0, fab->n_nodes * sizeof *seen);
        fab->bfs_mark = 1;
    }
    uint32_t mark = fab->bfs_mark, head = 0, tail = 0;
    q[tail++] = from;
    seen[from] = mark;
    prev[from] = KB__NO_NODE;
    while (head < tail && seen[to] != mark) {
        uint32_t u = q[head++];
        for (uint32_t e = fab->out_first[u]; e != KB__NO_NODE; e = fab->out_next[e]) {
            uint32_t v = fab->links[e].to;
            if (seen[v] == mark || !allowed(fab, v, ra, rb)) continue;
            seen[v] = mark;
            prev[v] = e;
            q[tail++] = v;
        }
    }
    if (seen[to] != mark) return KB_ENOTFOUND;
    uint32_t len = 0;
    for (uint32_t v = to; v != from; v = fab->links[prev[v]].from)
        len++;
    for (uint32_t k = 0; k < len; k++)
        if (path_push(p, 0)) return KB_ENOMEM;
    uint32_t k = p->n;
    for (uint32_t v = to; v != from; v = fab->links[prev[v]].from)
        p->links[--k] = prev[v];
    return 0;
}

static uint32_t router_at(const kb__fabric *fab, uint32_t s, uint32_t x, uint32_t y)
{
    return fab->routers[((size_t)s * fab->mesh_h + y) * fab->mesh_w + x];
}

/* Appends the dimension-order route between two routers of SIP s: x first
 * (XY), or y first (YX) when y_first. */
static int mesh_dim(kb__fabric *fab, uint32_t s, uint32_t from, uint32_t to, int y_first, path *p)
{
    uint32_t x = fab->nodes[from].x, y = fab->nodes[from].y;
    uint32_t tx = fab->nodes[to].x, ty = fab->nodes[to].y;
    uint32_t cur = from;
    while (cur != to) {
        if (x != tx && (!y_first || y == ty))
            x = x < tx ? x + 1 : x - 1;
        else
            y = y < ty ? y + 1 : y - 1;
        uint32_t next = router_at(fab, s, x, y);
        if (next == KB__NO_NODE) return KB_ENOTFOUND;
        int rc = bfs(fab, cur, next, region(&fab->nodes[cur]), region(&fab->nodes[next]), p);
        if (rc) return rc;
        cur = next;
    }
    return 0;
}

/* Appends the route between two routers of SIP s: XY; with links down, YX
 * or the shortest path over the SIP's routers when XY crosses one. */
static int mesh_xy(kb__fabric *fab, uint32_t s, uint32_t from, uint32_t to, path *p)
{
    uint32_t n0 = p->n;
    int rc = mesh_dim(fab, s, from, to, 0, p);
    if (rc != KB_ENOTFOUND || !fab->n_down) return rc;
    p->n = n0;
    rc = mesh_dim(fab, s, from, to, 1, p);
    if (rc != KB_ENOTFOUND) return rc;
    p->n = n0;
    return bfs(fab, from, to, ROUTERS_OF | s, ROUTERS_OF | s, p);
}

/* Appends the ring route between the IO chiplets of SIPs s and t going in
 * direction step (+1: increasing SIP index). */
static int ring_dir(kb__fabric *fab, uint32_t s, uint32_t t, int step, path *p)
{
    uint32_t n = fab->n_sips;
    while (s != t) {
        uint32_t next = (uint32_t)((s + n + (uint32_t)step) % n);
        uint32_t a = fab->io_nocs[s], b = fab->io_nocs[next];
        if (a == KB__NO_NODE || b == KB__NO_NODE) return KB_ENOTFOUND;
        int rc = bfs(fab, a, b, region(&fab->nodes[a]) | NO_HOST, region(&fab->nodes[b]), p);
        if (rc) return rc;
        s = next;
    }
    return 0;
}

/* Appends the ring route between the IO chiplets of SIPs s and t: the
 * shorter direction (ties: increasing index); the other when a link on it
 * is down. */
static int ring(kb__fabric *fab, uint32_t s, uint32_t t, path *p)
{
    uint32_t n = fab->n_sips, n0 = p->n;
    uint32_t fwd = (t + n - s) % n, bwd = (s + n - t) % n;
    int step = fwd <= bwd ? 1 : -1;
    int rc = ring_dir(fab, s, t, step, p);
    if (rc != KB_ENOTFOUND || !fab->n_down) return rc;
    p->n = n0;
    return ring_dir(fab, s, t, -step, p);
}

static int leave_to_io(kb__fabric *fab, uint32_t from, uint32_t s, path *p)
{
    uint64_t rf = region(&fab->nodes[from]), io = (uint64_t)REG_IO << 60 | s;
    uint32_t noc = s < fab->n_sips ? fab->io_nocs[s] : KB__NO_NODE;
    if (noc == KB__NO_NODE) return KB_ENOTFOUND;
    if ((rf >> 60) != REG_CUBE) return bfs(fab, from, noc, rf, io, p);
    const kb__fab_node_desc *n = &fab->nodes[from];
    uint32_t r1 = router_at(fab, s, n->x, n->y), ra = attach_router(fab, s);
    if (r1 == KB__NO_NODE || ra == KB__NO_NODE) return KB_ENOTFOUND;
    int rc = bfs(fab, from, r1, rf, rf, p);
    if (!rc) rc = mesh_xy(fab, s, r1, ra, p);
    if (!rc) rc = bfs(fab, ra, noc, region(&fab->nodes[ra]), io, p);
    return rc;
}

static int enter_from_io(kb__fabric *fab, uint32_t s, uint32_t to, path *p)
{
    uint64_t rt = region(&fab->nodes[to]), io = (uint64_t)REG_IO << 60 | s;
    uint32_t noc = fab->io_nocs[s];
    if ((rt >> 60) != REG_CUBE) return bfs(fab, noc, to, io, rt, p);
    const kb__fab_node_desc *n = &fab->nodes[to];
    uint32_t ra = attach_router(fab, s), r2 = router_at(fab, s, n->x, n->y);
    if (r2 == KB__NO_NODE || ra == KB__NO_NODE) return KB_ENOTFOUND;
    int rc = bfs(fab, noc, ra, io, region(&fab->nodes[ra]), p);
    if (!rc) rc = mesh_xy(fab, s, ra, r2, p);
    if (!rc) rc = bfs(fab, r2, to, rt, rt, p);
    return rc;
}

/* Appends the route from -> to (from != to). */
static int compose(kb__fabric *fab, uint32_t from, uint32_t to, path *p)
{
    const kb__fab_node_desc *a = &fab->nodes[from], *b = &fab->nodes[to];
    uint64_t rf = region(a), rt = region(b);
    int host_a = a->role == KB__FR_HOST, host_b = b->role == KB__FR_HOST;
    if (host_a && host_b) return KB_ENOTFOUND;
    if (rf == rt) return bfs(fab, from, to, rf, rt, p);
    if ((host_a && is_io(rt)) || (host_b && is_io(rf))) return bfs(fab, from, to, rf, rt, p);
    uint32_t sf = host_a ? b->sip : a->sip, st = host_b ? a->sip : b->sip;
    if ((rf >> 60) == REG_CUBE && (rt >> 60) == REG_CUBE && sf == st) {
        uint32_t r1 = router_at(fab, sf, a->x, a->y), r2 = router_at(fab, st, b->x, b->y);
        if (r1 == KB__NO_NODE || r2 == KB__NO_NODE) return KB_ENOTFOUND;
        int rc = bfs(fab, from, r1, rf, rf, p);
        if (!rc) rc = mesh_xy(fab, sf, r1, r2, p);
        if (!rc) rc = bfs(fab, r2, to, rt, rt, p);
        return rc;
    }
    if (sf >= fab->n_sips || st >= fab->n_sips) return KB_ENOTFOUND;
    int rc = leave_to_io(fab, from, sf, p);
    if (!rc) rc = ring(fab, sf, st, p);
    if (!rc) rc = enter_from_io(fab, st, to, p);
    return rc;
}

/* ---- the cache ---------------------------------------------------------- */

static uint64_t hash3(uint64_t a, uint32_t via)
{
    uint64_t h = a * 0x9E3779B97F4A7C15ull ^ ((uint64_t)via * 0xC2B2AE3D27D4EB4Full);
    h ^= h >> 29;
    return h * 0xBF58476D1CE4E5B9ull;
}

static kb__route_slot *find_slot(kb__route_slot *slots, size_t n, uint64_t a, uint32_t via)
{
    size_t i = hash3(a, via) & (n - 1);
    while (slots[i].route && (slots[i].key_a != a || slots[i].key_via != via))
        i = (i + 1) & (n - 1);
    return &slots[i];
}

static int cache_grow(kb__fabric *fab)
{
    size_t n = fab->n_slots * 2;
    kb__route_slot *ns = calloc(n, sizeof *ns);
    if (!ns) return KB_ENOMEM;
    for (size_t i = 0; i < fab->n_slots; i++)
        if (fab->slots[i].route)
            *find_slot(ns, n, fab->slots[i].key_a, fab->slots[i].key_via) = fab->slots[i];
    free(fab->slots);
    fab->slots = ns;
    fab->n_slots = n;
    return 0;
}

static int finish_route(kb__fabric *fab, path *p, uint32_t from, uint32_t via, uint32_t to,
                        kb__route **out)
{
    kb__route *r = malloc(sizeof *r + p->n * sizeof r->links[0]);
    uint32_t *nodes = malloc((p->n + 1) * sizeof *nodes);
    if (!r || !nodes) {
        free(r);
        free(nodes);
        return KB_ENOMEM;
    }
    *r = (kb__route){.from = from, .via = via, .to = to, .n = p->n, .nodes = nodes};
    memcpy(r->links, p->links, p->n * sizeof r->links[0]);
    nodes[0] = from;
    r->ends_in_order = fab->in_order && fab->in_order[to];
    /* from's only neighbour is the first link's end: one link out, and no
     * link in but from that neighbour. */
    uint32_t first = p->links[0], next = fab->links[first].to;
    r->starts_at_leaf =
        fab->out_first[from] == first && fab->out_next[first] == KB__NO_NODE &&
        (fab->in_deg[from] == 0 || (fab->in_deg[from] == 1 && fab->in_from[from] == next));
    r->bottleneck = p->links[0];
    for (uint32_t i = 0; i < p->n; i++) {
        const kb__link *l = &fab->links[p->links[i]];
        nodes[i + 1] = l->to;
        if (l->pkt_ps > fab->links[r->bottleneck].pkt_ps) r->bottleneck = l->id;
        if (i + 1 < p->n && fab->workers && fab->workers[l->to].bw_gbs > 0) {
            r->workers++;
            r->worker_last = i + 2 == p->n;
        }
    }
    *out = r;
    return 0;
}

int kb__fabric_route(kb__fabric *fab, uint32_t from, uint32_t via, uint32_t to,
                     const kb__route **out, kb__err *err)
{
    *out = NULL;
    if (from >= fab->n_nodes || to >= fab->n_nodes || (via != KB__NO_NODE && via >= fab->n_nodes))
        return kb__err_set(err, KB_EINVAL, "fabric: route %u -> %u: no such node (%u nodes)", from,
                           to, fab->n_nodes);
    uint64_t a = (uint64_t)from << 32 | to;
    kb__route_slot *slot = find_slot(fab->slots, fab->n_slots, a, via);
    if (slot->route) {
        *out = slot->route;
        return 0;
    }
    path p = {0};
    int rc = 0;
    if (from == to && via == KB__NO_NODE)
        rc = KB_ENOTFOUND;
    else if (via == KB__NO_NODE)
        rc = compose(fab, from, to, &p);
    else {
        rc = from == via ? 0 : compose(fab, from, via, &p);
        if (!rc && via != to) rc = compose(fab, via, to, &p);
    }
    if (!rc && p.n == 0) rc = KB_ENOTFOUND;
    kb__route *r = NULL;
    if (!rc) rc = finish_route(fab, &p, from, via, to, &r);
    free(p.links);
    if (rc)
        return kb__err_set(err, rc, "fabric: no route from %s to %s%s%s%s", fab->nodes[from].name,
                           fab->nodes[to].name, via == KB__NO_NODE ? "" : " via ",
                           via == KB__NO_NODE ? "" : fab->nodes[via].name,
                           fab->n_down && rc == KB_ENOTFOUND
                               ? ": the links that are down (faults.down_links) cut every path "
                                 "the routing allows (docs/faults.md)"
                               : "");
    if (2 * (fab->n_routes + 1) > fab->n_slots && cache_grow(fab)) {
        free(r->nodes);
        free(r->flow.res);
        free(r);
        return kb__err_set(err, KB_ENOMEM, "fabric: out of memory for the route cache");
    }
    *find_slot(fab->slots, fab->n_slots, a, via) = (kb__route_slot){a, via, r};
    fab->n_routes++;
    *out = r;
    return 0;
}

static int graph_route(void *self, uint32_t from, uint32_t to, const uint32_t **links, uint32_t *n,
                       kb__err *err)
{
    const kb__route *r;
    int rc = kb__fabric_route(self, from, KB__NO_NODE, to, &r, err);
    if (rc) return rc;
    *links = r->links;
    *n = r->n;
    return 0;
}

void kb__fabric_route_graph(kb__fabric *fab, kb__topo *t)
{
    t->router = (kb__topo_router){fab, graph_route};
}

int kb__fabric_route_memo(kb__fabric *fab, kb__route_memo *memo, uint32_t from, uint32_t via,
                          uint32_t to, const kb__route **out, kb__err *err)
{
    for (uint32_t i = 0; i < KB__ROUTE_MEMO; i++)
        if (memo->e[i].r && memo->e[i].from == from && memo->e[i].via == via &&
            memo->e[i].to == to) {
            *out = memo->e[i].r;
            return 0;
        }
    int rc = kb__fabric_route(fab, from, via, to, out, err);
    if (rc) return rc;
    uint32_t k = memo->next++ % KB__ROUTE_MEMO;
    memo->e[k].from = from;
    memo->e[k].via = via;
    memo->e[k].to = to;
    memo->e[k].r = *out;
    return 0;
}
