/*
 * plan.c — rank placement, neighbour tables and the install message.
 *
 * Placement follows the order documented in plan.h; the cube cycle makes
 * every consecutive pair of ranks either share a cube or sit in adjacent
 * cubes (one UCIe link), except at SIP boundaries (through the IO chiplets)
 * and, when the world ends part-way through a SIP, at the ring's wrap-around.
 *
 * Cost: O(world size + cubes per SIP); one allocation per array.
 */
#include "ccl/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dir_names[] = {"N", "E", "S", "W"};
static const char *const path_names[] = {"same cube", "cross-cube", "cross-SIP"};

const char *kb__ccl_dir_name(kb__ccl_dir d)
{
    return (unsigned)d < KB__CCL_DIR_COUNT ? dir_names[d] : "?";
}
const char *kb__ccl_path_name(kb__ccl_path p)
{
    return (unsigned)p < KB__CCL_PATH_COUNT ? path_names[p] : "?";
}

/* ---- cube order ------------------------------------------------------------ */

/* Row 0 left to right, rows 1.. snaking over columns 1..C-1, back up
 * column 0: a cycle when rows is even. (y, x) pairs go to order as y*C+x;
 * with transpose set the roles of rows and columns swap. */
static void cycle_order(uint32_t rows, uint32_t cols, int transpose, uint32_t C, uint32_t *order)
{
    size_t k = 0;
#define PUT(y, x)                                                                                  \
    (order[k++] = transpose ? (uint32_t)(x)*C + (uint32_t)(y) : (uint32_t)(y)*C + (uint32_t)(x))
    for (uint32_t x = 0; x < cols; x++)
        PUT(0, x);
    for (uint32_t y = 1; y < rows; y++)
        for (uint32_t i = 0; i + 1 < cols; i++)
            PUT(y, (y % 2) ? cols - 1 - i : 1 + i);
    for (uint32_t y = rows - 1; y >= 1; y--)
        PUT(y, 0);
#undef PUT
}

static void reverse(uint32_t *v, uint32_t lo, uint32_t hi)
{
    while (lo + 1 < hi) {
        uint32_t t = v[lo];
        v[lo++] = v[--hi];
        v[hi] = t;
    }
}

int kb__ccl_cube_order(uint32_t rows, uint32_t cols, uint32_t attach, uint32_t *order)
{
    uint32_t n = rows * cols;
    if (n == 1) {
        order[0] = 0;
        return 1;
    }
    if (rows % 2 == 0 && cols >= 2) {
        cycle_order(rows, cols, 0, cols, order);
    } else if (cols % 2 == 0 && rows >= 2) {
        cycle_order(cols, rows, 1, cols, order);
    } else {
        for (uint32_t y = 0, k = 0; y < rows; y++)
            for (uint32_t i = 0; i < cols; i++)
                order[k++] = y * cols + ((y % 2) ? cols - 1 - i : i);
        return n == 2; /* a 1x2 line is a cycle of two */
    }
    uint32_t at = 0;
    while (at < n && order[at] != attach)
        at++;
    if (at < n && at) { /* rotate left by at: three reversals */
        reverse(order, 0, at);
        reverse(order, at, n);
        reverse(order, 0, n);
    }
    return 1;
}

/* ---- neighbours ------------------------------------------------------------ */

kb__ccl_tree_node kb__ccl_tree_at(uint32_t n, uint32_t r)
{
    uint32_t lo = 0, hi = n, depth = 0;
    int32_t parent = -1;
    while (lo != r) { /* the subtree [lo, hi) holds r: step into the half that does */
        uint32_t mid = lo + 1 + (hi - lo - 1) / 2;
        parent = (int32_t)lo, depth++;
        if (r < mid)
            lo = lo + 1, hi = mid;
        else
            lo = mid;
    }
    uint32_t mid = lo + 1 + (hi - lo - 1) / 2;
    return (kb__ccl_tree_node){parent, mid > lo + 1 ? (int32_t)(lo + 1) : -1,
                               mid < hi ? (int32_t)mid : -1, depth};
}

uint32_t kb__ccl_tree_height(uint32_t n)
{
    uint32_t h = 0;
    for (; n > 1; h++) /* the right half is the larger: ceil((n - 1) / 2) */
        n = n / 2;
    return h;
}

static uint32_t mesh_dist(const kb__ccl_plan *pl, uint32_t a, uint32_t b)
{
    int ax = (int)(a % pl->mesh_cols), ay = (int)(a / pl->mesh_cols);
    int bx = (int)(b % pl->mesh_cols), by = (int)(b / pl->mesh_cols);
    return (uint32_t)(abs(ax - bx) + abs(ay - by));
}

static void set_port(kb__ccl_plan *pl, uint32_t r, kb__ccl_dir d, int64_t peer, const char *role)
{
    kb__ccl_port *pt = &pl->ports[r][d];
    if (peer < 0 || peer >= pl->world_size || peer == r) return;
    kb__ccl_loc a = pl->loc[r], b = pl->loc[peer];
    pt->peer = (int32_t)peer;
    pt->loc = b;
    pt->role = role;
    if (a.sip != b.sip) {
        pt->path = KB__CCL_PATH_CROSS_SIP;
        pt->ucie_hops =
            mesh_dist(pl, a.cube, pl->attach_cube) + mesh_dist(pl, pl->attach_cube, b.cube);
    } else {
        pt->path = a.cube != b.cube ? KB__CCL_PATH_CROSS_CUBE : KB__CCL_PATH_SAME_CUBE;
        pt->ucie_hops = mesh_dist(pl, a.cube, b.cube);
    }
}

/* hierarchical: ranks per group (a SIP's ranks, consecutive in placement
 * order); KB_ECONFIG when the SIPs used hold different numbers of ranks. */
static int group_size(kb__ccl_plan *pl, kb__err *err)
{
    uint32_t n = pl->world_size, L = 0;
    while (L < n && pl->loc[L].sip == pl->loc[0].sip)
        L++;
    for (uint32_t r = 1; r <= n; r++) {
        int starts = r == n || pl->loc[r].sip != pl->loc[r - 1].sip; /* r ends a SIP's run */
        if (starts == (r % L == 0)) continue;
        return kb__err_set(err, KB_ECONFIG,
                           "ccl plan: %s needs as many ranks on every SIP it uses: sip%u has "
                           "%u, sip%u has %s",
                           kb__ccl_topology_name(KB__CCL_HIER), pl->loc[0].sip, L,
                           pl->loc[r - 1].sip, starts ? "fewer" : "more");
    }
    pl->group = L;
    return 0;
}

static void fill_ports(kb__ccl_plan *pl)
{
    int64_t n = pl->world_size, cols = pl->r.grid_cols, rows = pl->r.grid_rows, L = pl->group;
    for (int64_t r = 0; r < n; r++) {
        for (int d = 0; d < KB__CCL_DIR_COUNT; d++)
            pl->ports[r][d].peer = -1;
        switch (pl->r.algo->topology) {
        case KB__CCL_RING_1D:
            set_port(pl, (uint32_t)r, KB__CCL_W, (r + n - 1) % n, "prev");
            set_port(pl, (uint32_t)r, KB__CCL_E, (r + 1) % n, "next");
            break;
        case KB__CCL_MESH_2D:
            set_port(pl, (uint32_t)r, KB__CCL_N, r / cols > 0 ? r - cols : -1, "north");
            set_port(pl, (uint32_t)r, KB__CCL_S, r / cols < rows - 1 ? r + cols : -1, "south");
            set_port(pl, (uint32_t)r, KB__CCL_W, r % cols > 0 ? r - 1 : -1, "west");
            set_port(pl, (uint32_t)r, KB__CCL_E, r % cols < cols - 1 ? r + 1 : -1, "east");
            break;
        case KB__CCL_HIER:
            set_port(pl, (uint32_t)r, KB__CCL_W, r / L * L + (r % L + L - 1) % L, "prev");
            set_port(pl, (uint32_t)r, KB__CCL_E, r / L * L + (r % L + 1) % L, "next");
            set_port(pl, (uint32_t)r, KB__CCL_N, (r + n - L) % n, "sip_prev");
            set_port(pl, (uint32_t)r, KB__CCL_S, (r + L) % n, "sip_next");
            break;
        default: {
            kb__ccl_tree_node tn = kb__ccl_tree_at((uint32_t)n, (uint32_t)r);
            set_port(pl, (uint32_t)r, KB__CCL_N, tn.parent, "parent");
            set_port(pl, (uint32_t)r, KB__CCL_W, tn.left, "left");
            set_port(pl, (uint32_t)r, KB__CCL_E, tn.right, "right");
            break;
        }
        }
    }
}

static int place(kb__ccl_plan *pl, kb__err *err)
{
    uint32_t n_cubes = pl->cubes_per_sip;
    uint32_t *order = malloc(n_cubes * sizeof *order);
    if (!order) return kb__err_set(err, KB_ENOMEM, "out of memory");
    kb__ccl_cube_order(pl->mesh_rows, pl->mesh_cols, pl->attach_cube, order);
    for (uint32_t r = 0; r < pl->world_size; r++) {
        uint32_t per_sip = n_cubes * pl->pes_per_cube;
        uint32_t in_sip = r % per_sip;
        pl->loc[r].sip = r / per_sip;
        pl->loc[r].cube = order[in_sip / pl->pes_per_cube];
        pl->loc[r].pe = in_sip % pl->pes_per_cube;
    }
    free(order);
    return 0;
}

static kb__ccl_plan *plan_new(const kb__topo_params *p, const kb__ccl_resolved *r, uint32_t ws)
{
    kb__ccl_plan *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->r = *r;
    pl->world_size = ws;
    pl->group = ws;
    pl->sips = p->system.sips;
    pl->cubes_per_sip = kb__topo_cubes_per_sip(p);
    pl->pes_per_cube = kb__topo_pes_per_cube(p);
    pl->mesh_rows = p->sip.mesh_rows;
    pl->mesh_cols = p->sip.mesh_cols;
    pl->attach_cube = p->io.attach_cube;
    pl->loc = calloc(ws, sizeof *pl->loc);
    pl->ports = calloc(ws, sizeof *pl->ports);
    if (!pl->loc || !pl->ports) {
        kb__ccl_plan_destroy(pl);
        return NULL;
    }
    return pl;
}

/* A plan whose PEs are placed (rc 0): its groups (hierarchical) and ports,
 * into *out; on failure (rc, or the groups) destroyed. */
static int plan_finish(kb__ccl_plan **out, kb__ccl_plan *pl, const kb__ccl_resolved *r, int rc,
                       kb__err *err)
{
    if (!rc && r->algo->topology == KB__CCL_HIER) rc = group_size(pl, err);
    if (rc) {
        kb__ccl_plan_destroy(pl);
        return rc;
    }
    fill_ports(pl);
    *out = pl;
    return 0;
}

typedef struct keyed_loc {
    uint64_t key; /* position in the full placement order */
    kb__ccl_loc loc;
} keyed_loc;

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const keyed_loc *)a)->key, y = ((const keyed_loc *)b)->key;
    return x < y ? -1 : x > y;
}

int kb__ccl_plan_build_on(kb__ccl_plan **out, const kb__topo_params *p, const kb__ccl_resolved *r,
                          const kb__ccl_loc *set, uint32_t n, kb__err *err)
{
    *out = NULL;
    uint32_t cubes = kb__topo_cubes_per_sip(p), per_cube = kb__topo_pes_per_cube(p);
    if (!r->algo || n < 1 || r->s.world_size != n)
        return kb__err_set(err, KB_EINVAL, "ccl plan: %u PEs given for a world size of %u", n,
                           r->s.world_size);
    uint32_t *order = malloc(cubes * sizeof *order), *pos = malloc(cubes * sizeof *pos);
    keyed_loc *k = malloc((size_t)n * sizeof *k);
    kb__ccl_plan *pl = plan_new(p, r, n);
    int rc = 0;
    if (!order || !pos || !k || !pl) rc = kb__err_set(err, KB_ENOMEM, "ccl plan: out of memory");
    if (!rc) kb__ccl_cube_order(p->sip.mesh_rows, p->sip.mesh_cols, p->io.attach_cube, order);
    for (uint32_t c = 0; !rc && c < cubes; c++)
        pos[order[c]] = c;
    for (uint32_t i = 0; !rc && i < n; i++) {
        kb__ccl_loc l = set[i];
        if (l.sip >= p->system.sips || l.cube >= cubes || l.pe >= per_cube)
            rc = kb__err_set(err, KB_EINVAL, "ccl plan: PE sip%u/cube%u/pe%u is not on the machine",
                             l.sip, l.cube, l.pe);
        else
            k[i] = (keyed_loc){((uint64_t)l.sip * cubes + pos[l.cube]) * per_cube + l.pe, l};
    }
    if (!rc) qsort(k, n, sizeof *k, by_key);
    for (uint32_t i = 0; !rc && i < n; i++) {
        if (i && k[i].key == k[i - 1].key)
            rc = kb__err_set(err, KB_EINVAL, "ccl plan: PE sip%u/cube%u/pe%u is given twice",
                             k[i].loc.sip, k[i].loc.cube, k[i].loc.pe);
        pl->loc[i] = k[i].loc;
    }
    free(order);
    free(pos);
    free(k);
    return plan_finish(out, pl, r, rc, err);
}

int kb__ccl_plan_build_ranked(kb__ccl_plan **out, const kb__topo_params *p,
                              const kb__ccl_resolved *r, const kb__ccl_loc *rank_to_pe, uint32_t n,
                              kb__err *err)
{
    *out = NULL;
    uint32_t cubes = kb__topo_cubes_per_sip(p), per_cube = kb__topo_pes_per_cube(p);
    uint64_t pes = kb__topo_pe_total(p);
    if (!r->algo || n < 1 || r->s.world_size != n)
        return kb__err_set(err, KB_EINVAL,
                           "ccl plan: rank_to_pe has %u entries for a world size of %u", n,
                           r->s.world_size);
    int32_t *seen = malloc(pes * sizeof *seen); /* global PE -> rank placed there, or -1 */
    kb__ccl_plan *pl = plan_new(p, r, n);
    int rc = 0;
    if (!seen || !pl) rc = kb__err_set(err, KB_ENOMEM, "ccl plan: out of memory");
    for (uint64_t i = 0; !rc && i < pes; i++)
        seen[i] = -1;
    for (uint32_t i = 0; !rc && i < n; i++) {
        kb__ccl_loc l = rank_to_pe[i];
        if (l.sip >= p->system.sips || l.cube >= cubes || l.pe >= per_cube) {
            rc = kb__err_set(err, KB_EINVAL,
                             "ccl plan: rank_to_pe[%u] = sip%u/cube%u/pe%u is not a PE of the "
                             "machine (%u SIPs x %u cubes x %u PEs: sip 0..%u, cube 0..%u, pe "
                             "0..%u)",
                             i, l.sip, l.cube, l.pe, p->system.sips, cubes, per_cube,
                             p->system.sips - 1, cubes - 1, per_cube - 1);
            break;
        }
        uint64_t g = ((uint64_t)l.sip * cubes + l.cube) * per_cube + l.pe;
        if (seen[g] >= 0) {
            rc = kb__err_set(err, KB_EINVAL,
                             "ccl plan: rank_to_pe[%d] and rank_to_pe[%u] are both "
                             "sip%u/cube%u/pe%u (one rank per PE)",
                             seen[g], i, l.sip, l.cube, l.pe);
            break;
        }
        seen[g] = (int32_t)i;
        pl->loc[i] = l;
    }
    free(seen);
    return plan_finish(out, pl, r, rc, err);
}

int kb__ccl_plan_build(kb__ccl_plan **out, const kb__topo_params *p, const kb__ccl_resolved *r,
                       kb__err *err)
{
    *out = NULL;
    uint64_t pes = kb__topo_pe_total(p);
    uint32_t ws = r->s.world_size;
    if (!r->algo || ws < 1 || ws > pes)
        return kb__err_set(err, KB_EINVAL, "ccl plan: world size %u does not fit %llu PEs", ws,
                           (unsigned long long)pes);
    kb__ccl_plan *pl = plan_new(p, r, ws);
    if (!pl || place(pl, err)) {
        kb__ccl_plan_destroy(pl);
        return kb__err_set(err, KB_ENOMEM, "out of memory");
    }
    int rc = r->algo->topology == KB__CCL_HIER ? group_size(pl, err) : 0;
    if (rc) {
        kb__ccl_plan_destroy(pl);
        return rc;
    }
    fill_ports(pl);
    *out = pl;
    return 0;
}

void kb__ccl_plan_destroy(kb__ccl_plan *plan)
{
    if (!plan) return;
    free(plan->loc);
    free(plan->ports);
    free(plan);
}

int32_t kb__ccl_plan_rank_at(const kb__ccl_plan *plan, kb__ccl_loc loc)
{
    for (uint32_t r = 0; r < plan->world_size; r++)
        if (plan->loc[r].sip == loc.sip && plan->loc[r].cube == loc.cube &&
            plan->loc[r].pe == loc.pe)
            return (int32_t)r;
    return -1;
}

/* ---- printing -------------------------------------------------------------- */

#define OUT(...)                                                                                   \
    do {                                                                                           \
        int k_ = snprintf(size ? buf + (len < size ? len : size) : NULL,                           \
                          len < size ? size - len : 0, __VA_ARGS__);                               \
        if (k_ > 0) len += (size_t)k_;                                                             \
    } while (0)

size_t kb__ccl_plan_format(const kb__ccl_plan *plan, char *buf, size_t size)
{
    size_t len = 0;
    const kb__ccl_resolved *r = &plan->r;
    if (size) buf[0] = '\0';
    OUT("ccl plan: %s (module %s, %s, %u ranks", r->algo->name, r->algo->module,
        kb__ccl_topology_name(r->algo->topology), plan->world_size);
    if (r->algo->topology == KB__CCL_MESH_2D) OUT(" as %ux%u", r->grid_rows, r->grid_cols);
    if (r->algo->topology == KB__CCL_HIER)
        OUT(" as %u groups of %u", plan->world_size / plan->group, plan->group);
    OUT("), queues in %s: %u slots x %llu B per port, %s backpressure\n",
        kb__ccl_buffer_name(r->s.buffer_kind), r->s.n_slots, (unsigned long long)r->s.slot_size,
        kb__ccl_backpressure_name(r->s.backpressure));
    for (uint32_t k = 0; k < plan->world_size; k++) {
        kb__ccl_loc a = plan->loc[k];
        OUT("rank %4u  sip%u.cube%u.pe%u", k, a.sip, a.cube, a.pe);
        for (int d = 0; d < KB__CCL_DIR_COUNT; d++) {
            const kb__ccl_port *pt = &plan->ports[k][d];
            if (pt->peer < 0) continue;
            OUT("  %s=%s:%d(sip%u.cube%u.pe%u, %s)", dir_names[d], pt->role, pt->peer, pt->loc.sip,
                pt->loc.cube, pt->loc.pe, path_names[pt->path]);
        }
        OUT("\n");
    }
    return len;
}

/* ---- install message ------------------------------------------------------- */

static uint32_t used_ports(const kb__ccl_plan *plan, uint32_t rank)
{
    uint32_t n = 0;
    for (int d = 0; d < KB__CCL_DIR_COUNT; d++)
        n += plan->ports[rank][d].peer >= 0;
    return n;
}

size_t kb__ccl_install_bytes(const kb__ccl_plan *plan, uint32_t rank)
{
    if (rank >= plan->world_size) return 0;
    return KB__CCL_INSTALL_HEADER_BYTES + used_ports(plan, rank) * KB__CCL_INSTALL_PORT_BYTES;
}

uint64_t kb__ccl_install_total_bytes(const kb__ccl_plan *plan)
{
    uint64_t sum = 0;
    for (uint32_t r = 0; r < plan->world_size; r++)
        sum += kb__ccl_install_bytes(plan, r);
    return sum;
}

static uint8_t *put(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

size_t kb__ccl_install_encode(const kb__ccl_plan *plan, uint32_t rank, uint8_t *buf, size_t size)
{
    size_t need = kb__ccl_install_bytes(plan, rank);
    if (!need || size < need) return 0;
    const kb__ccl_settings *s = &plan->r.s;
    uint8_t *p = buf;
    p = put(p, KB__CCL_INSTALL_MAGIC, 4);
    p = put(p, 1, 2); /* version */
    p = put(p, (uint64_t)plan->r.algo->topology, 1);
    p = put(p, (uint64_t)s->buffer_kind, 1);
    p = put(p, rank, 4);
    p = put(p, plan->world_size, 4);
    p = put(p, s->n_slots, 4);
    p = put(p, s->slot_size, 4);
    p = put(p, s->vc_chunk_size, 4);
    p = put(p, s->credit_size, 4);
    p = put(p, (uint64_t)s->backpressure, 1);
    p = put(p, used_ports(plan, rank), 1);
    p = put(p, 0, 2);
    for (int d = 0; d < KB__CCL_DIR_COUNT; d++) {
        const kb__ccl_port *pt = &plan->ports[rank][d];
        if (pt->peer < 0) continue;
        p = put(p, (uint64_t)d, 1);
        p = put(p, (uint64_t)pt->path, 1);
        p = put(p, pt->ucie_hops, 2);
        p = put(p, (uint64_t)pt->peer, 4);
        p = put(p, pt->loc.sip, 2);
        p = put(p, pt->loc.cube, 2);
        p = put(p, pt->loc.pe, 2);
        p = put(p, 0, 2);
    }
    return (size_t)(p - buf);
}
