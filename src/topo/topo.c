/*
 * topo.c — the machine graph built from validated parameters.
 *
 * Node ids follow the fixed layout in topo.h, so lookups by (role, sip,
 * cube, unit) are arithmetic. Links are appended in a fixed order (per
 * SIP: host/IO links, then per cube its xbar, HBM, NOC and TCM links, then
 * the SIP's mesh links; SIP-to-SIP links last), each physical link as two
 * consecutive directed links. Out-links are then gathered into CSR arrays
 * in link-id order.
 */
#include "topo/topo.h"

#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nodes of one cube before its PEs, and per PE, in layout order. */
#define CUBE_FIXED 6 /* router, xbar, noc, m_cpu, m_dma, sram */
#define PE_UNITS   7 /* cpu, dma, mmu, tcm, gemm, math, ipcq */
#define SIP_FIXED  3 /* pcie_ep, io_cpu, io_noc */

static const kb__role pe_roles[PE_UNITS] = {
    KB__ROLE_PE_CPU,  KB__ROLE_PE_DMA,  KB__ROLE_PE_MMU,  KB__ROLE_PE_TCM,
    KB__ROLE_PE_GEMM, KB__ROLE_PE_MATH, KB__ROLE_PE_IPCQ,
};
static const kb__role cube_roles[CUBE_FIXED] = {
    KB__ROLE_ROUTER, KB__ROLE_XBAR, KB__ROLE_NOC, KB__ROLE_M_CPU, KB__ROLE_M_DMA, KB__ROLE_SRAM,
};

#define LINK_NAME(id, name, doc) name,
#define LINK_DOC(id, name, doc)  doc,
static const char *const link_names[KB__LINK_CLASS_COUNT] = {KB__LINK_CLASSES(LINK_NAME)};
static const char *const link_docs[KB__LINK_CLASS_COUNT] = {KB__LINK_CLASSES(LINK_DOC)};

const char *kb__link_class_name(kb__link_class c)
{
    return (unsigned)c < KB__LINK_CLASS_COUNT ? link_names[c] : "?";
}

const char *kb__link_class_doc(kb__link_class c)
{
    return (unsigned)c < KB__LINK_CLASS_COUNT ? link_docs[c] : "?";
}

uint64_t kb__topo_serial_ps(uint64_t bytes, double bw_gbs)
{
    return kb__ps_from_bytes_gbs(bytes, bw_gbs);
}

static uint32_t cube_block(const kb__topo *t)
{
    return CUBE_FIXED + t->slices_per_cube + PE_UNITS * t->pes_per_cube;
}

static uint32_t sip_block(const kb__topo *t)
{
    return SIP_FIXED + t->cubes_per_sip * cube_block(t);
}

static int pe_unit_index(kb__role role)
{
    for (int i = 0; i < PE_UNITS; i++)
        if (pe_roles[i] == role) return i;
    return -1;
}

int32_t kb__topo_node_id(const kb__topo *t, kb__role role, int sip, int cube, int unit)
{
    if (role == KB__ROLE_HOST) return 0;
    if (sip < 0 || (uint32_t)sip >= t->sips) return -1;
    uint32_t base = 1 + (uint32_t)sip * sip_block(t);
    if (role == KB__ROLE_PCIE_EP || role == KB__ROLE_IO_CPU || role == KB__ROLE_IO_NOC)
        return (int32_t)(base + (uint32_t)(role - KB__ROLE_PCIE_EP));
    if (cube < 0 || (uint32_t)cube >= t->cubes_per_sip) return -1;
    base += SIP_FIXED + (uint32_t)cube * cube_block(t);
    for (int i = 0; i < CUBE_FIXED; i++)
        if (cube_roles[i] == role) return (int32_t)(base + (uint32_t)i);
    if (role == KB__ROLE_HBM_CTRL)
        return unit >= 0 && (uint32_t)unit < t->slices_per_cube
                   ? (int32_t)(base + CUBE_FIXED + (uint32_t)unit)
                   : -1;
    int u = pe_unit_index(role);
    if (u < 0 || unit < 0 || (uint32_t)unit >= t->pes_per_cube) return -1;
    return (int32_t)(base + CUBE_FIXED + t->slices_per_cube + PE_UNITS * (uint32_t)unit +
                     (uint32_t)u);
}

int32_t kb__topo_link_id(const kb__topo *t, uint32_t from, uint32_t to)
{
    if (from >= t->n_nodes) return -1;
    for (uint32_t i = t->out_first[from]; i < t->out_first[from + 1]; i++)
        if (t->links[t->out_links[i]].to == to) return (int32_t)t->out_links[i];
    return -1;
}

int kb__topo_route(const kb__topo *t, uint32_t from, uint32_t to, const uint32_t **links,
                   uint32_t *n, kb__err *err)
{
    if (!t->router.route)
        return kb__err_set(err, KB_ESTATE,
                           "machine graph: no fabric is built over it, and routes are the "
                           "fabric's (route %s -> %s)",
                           from < t->n_nodes ? t->nodes[from].name : "?",
                           to < t->n_nodes ? t->nodes[to].name : "?");
    return t->router.route(t->router.self, from, to, links, n, err);
}

int32_t kb__topo_find(const kb__topo *t, const char *name)
{
    for (uint32_t i = 0; i < t->n_nodes; i++)
        if (!strcmp(t->nodes[i].name, name)) return (int32_t)i;
    return -1;
}

/* ---- building ------------------------------------------------------------ */

static uint16_t kind_of(const kb__topo_params *p, kb__role r)
{
    switch (r) {
    case KB__ROLE_HOST:
        return p->host.kind;
    case KB__ROLE_PCIE_EP:
        return p->io.pcie_ep_kind;
    case KB__ROLE_IO_CPU:
        return p->io.io_cpu_kind;
    case KB__ROLE_IO_NOC:
        return p->io.noc_kind;
    case KB__ROLE_ROUTER:
        return p->cube.router_kind;
    case KB__ROLE_XBAR:
        return p->cube.xbar_kind;
    case KB__ROLE_NOC:
        return p->cube.noc_kind;
    case KB__ROLE_M_CPU:
        return p->cube.m_cpu_kind;
    case KB__ROLE_M_DMA:
        return p->cube.m_dma_kind;
    case KB__ROLE_SRAM:
        return p->cube.sram_kind;
    case KB__ROLE_HBM_CTRL:
        return p->cube.hbm_kind;
    case KB__ROLE_PE_CPU:
        return p->pe.cpu_kind;
    case KB__ROLE_PE_DMA:
        return p->pe.dma_kind;
    case KB__ROLE_PE_MMU:
        return p->pe.mmu_kind;
    case KB__ROLE_PE_TCM:
        return p->pe.tcm_kind;
    case KB__ROLE_PE_GEMM:
        return p->pe.gemm_kind;
    case KB__ROLE_PE_MATH:
        return p->pe.math_kind;
    case KB__ROLE_PE_IPCQ:
        return p->pe.ipcq_kind;
    case KB__ROLE_FABRIC:
        return p->fabric.model;
    case KB__ROLE_LINK: /* no node: cube.sram.link is read where that link is built */
    case KB__ROLE_COUNT:
        break;
    }
    return 0;
}

static void set_node(kb__topo *t, kb__role role, int sip, int cube, int unit)
{
    int32_t id = kb__topo_node_id(t, role, sip, cube, unit);
    kb__topo_node *n = &t->nodes[id];
    n->id = (uint32_t)id;
    n->role = role;
    n->kind = kind_of(&t->params, role);
    n->sip = sip;
    n->rack = sip < 0 ? -1 : sip / (int)(t->sips / t->params.system.racks);
    n->cube = cube;
    n->unit = unit;
    n->x = cube < 0 ? -1 : cube % (int)t->mesh_cols;
    n->y = cube < 0 ? -1 : cube / (int)t->mesh_cols;
    const char *r = kb__role_name(role);
    if (sip < 0)
        snprintf(n->name, sizeof n->name, "%s", r);
    else if (cube < 0)
        snprintf(n->name, sizeof n->name, "sip%d.%s", sip, r);
    else if (role == KB__ROLE_HBM_CTRL)
        snprintf(n->name, sizeof n->name, "sip%d.cube%d.hbm%d", sip, cube, unit);
    else if (unit >= 0)
        snprintf(n->name, sizeof n->name, "sip%d.cube%d.pe%d.%s", sip, cube, unit,
                 r + 3); /* "pe_dma" -> "dma" */
    else
        snprintf(n->name, sizeof n->name, "sip%d.cube%d.%s", sip, cube, r);
}

static void make_nodes(kb__topo *t)
{
    set_node(t, KB__ROLE_HOST, -1, -1, -1);
    for (int s = 0; s < (int)t->sips; s++) {
        for (kb__role r = KB__ROLE_PCIE_EP; r <= KB__ROLE_IO_NOC; r++)
            set_node(t, r, s, -1, -1);
        for (int c = 0; c < (int)t->cubes_per_sip; c++) {
            for (int i = 0; i < CUBE_FIXED; i++)
                set_node(t, cube_roles[i], s, c, -1);
            for (int k = 0; k < (int)t->slices_per_cube; k++)
                set_node(t, KB__ROLE_HBM_CTRL, s, c, k);
            for (int p = 0; p < (int)t->pes_per_cube; p++)
                for (int u = 0; u < PE_UNITS; u++)
                    set_node(t, pe_roles[u], s, c, p);
        }
    }
}

typedef struct link_builder {
    kb__topo *t;
    uint32_t next; /* next directed link id */
} link_builder;

/* Appends the physical link a <-> b: ids next (a->b) and next+1 (b->a). */
static void link2(link_builder *lb, uint32_t a, uint32_t b, kb__link_class cls, double bw,
                  double overhead_ns, double length_mm)
{
    const kb__topo_params *p = &lb->t->params;
    for (int dir = 0; dir < 2; dir++) {
        kb__topo_link *l = &lb->t->links[lb->next + (uint32_t)dir];
        l->id = lb->next + (uint32_t)dir;
        l->from = dir ? b : a;
        l->to = dir ? a : b;
        l->reverse = lb->next + (uint32_t)!dir;
        l->cls = cls;
        l->bw_gbs = bw;
        l->overhead_ps = kb__ps_from_ns(overhead_ns);
        l->wire_ps = kb__ps_from_ns(length_mm * p->fabric.ns_per_mm);
        if (cls < KB__LINK_CLASS_COUNT) lb->t->links_by_class[cls]++; /* else a link kind's */
    }
    lb->next += 2;
}

#define NODE(role, s, c, u) ((uint32_t)kb__topo_node_id(t, KB__ROLE_##role, s, c, u))

static void cube_links(link_builder *lb, int s, int c)
{
    kb__topo *t = lb->t;
    const kb__topo_params *p = &t->params;
    uint32_t xbar = NODE(XBAR, s, c, -1);
    double xo = p->cube.xbar_overhead_ns, xb = p->cube.xbar_bw_gbs;
    link2(lb, NODE(ROUTER, s, c, -1), xbar, KB__LINK_XBAR, xb, xo, 0);
    link2(lb, xbar, NODE(NOC, s, c, -1), KB__LINK_XBAR, xb, xo, 0);
    const kb__kind *lk = kb__kinds_get(p->kinds, p->cube.sram_link_kind);
    if (lk && lk->ops && lk->ops->link) { /* a link kind of its own: its timing, its class */
        kb__kind_link kl = lk->ops->link(lk, p);
        link2(lb, xbar, NODE(SRAM, s, c, -1),
              (kb__link_class)kb__topo_kind_class(t, p->cube.sram_link_kind), kl.bw_gbs,
              kl.overhead_ns, kl.length_mm);
    } else {
        link2(lb, xbar, NODE(SRAM, s, c, -1), KB__LINK_XBAR, xb, xo, 0);
    }
    link2(lb, xbar, NODE(M_CPU, s, c, -1), KB__LINK_XBAR, xb, xo, 0);
    link2(lb, xbar, NODE(M_DMA, s, c, -1), KB__LINK_XBAR, xb, xo, 0);
    for (int k = 0; k < (int)t->slices_per_cube; k++)
        link2(lb, xbar, NODE(HBM_CTRL, s, c, k), KB__LINK_HBM,
              p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency, 0, 0);
    const kb__link_params *noc = &p->cube.noc;
    for (int pe = 0; pe < (int)t->pes_per_cube; pe++) {
        uint32_t dma = NODE(PE_DMA, s, c, pe);
        link2(lb, NODE(NOC, s, c, -1), dma, KB__LINK_NOC, noc->bw_gbs, noc->overhead_ns,
              noc->length_mm);
        link2(lb, dma, NODE(PE_TCM, s, c, pe), KB__LINK_TCM, p->pe.tcm_bw_gbs, 0, 0);
    }
}

/* Mesh links of SIP s: for each cube in id order, east then south. */
static void mesh_links(link_builder *lb, int s)
{
    kb__topo *t = lb->t;
    const kb__link_params *u = &t->params.sip.ucie;
    int rows = (int)t->mesh_rows, cols = (int)t->mesh_cols;
    for (int c = 0; c < rows * cols; c++) {
        int x = c % cols, y = c / cols;
        if (x + 1 < cols)
            link2(lb, NODE(ROUTER, s, c, -1), NODE(ROUTER, s, c + 1, -1), KB__LINK_UCIE, u->bw_gbs,
                  2 * u->overhead_ns, u->length_mm);
        if (y + 1 < rows)
            link2(lb, NODE(ROUTER, s, c, -1), NODE(ROUTER, s, c + cols, -1), KB__LINK_UCIE,
                  u->bw_gbs, 2 * u->overhead_ns, u->length_mm);
    }
}

static void sip_links(link_builder *lb, int s)
{
    kb__topo *t = lb->t;
    const kb__topo_params *p = &t->params;
    uint32_t ep = NODE(PCIE_EP, s, -1, -1), io_noc = NODE(IO_NOC, s, -1, -1);
    const kb__link_params *pcie = &p->host.pcie, *noc = &p->io.noc, *u = &p->sip.ucie;
    link2(lb, 0, ep, KB__LINK_PCIE, pcie->bw_gbs, pcie->overhead_ns, pcie->length_mm);
    link2(lb, ep, io_noc, KB__LINK_IO_NOC, noc->bw_gbs,
          noc->overhead_ns + p->io.pcie_ep_overhead_ns, noc->length_mm);
    link2(lb, NODE(IO_CPU, s, -1, -1), io_noc, KB__LINK_IO_NOC, noc->bw_gbs, noc->overhead_ns,
          noc->length_mm);
    link2(lb, io_noc, NODE(ROUTER, s, (int)p->io.attach_cube, -1), KB__LINK_IO_UCIE, u->bw_gbs,
          2 * u->overhead_ns, u->length_mm);
    for (int c = 0; c < (int)t->cubes_per_sip; c++)
        cube_links(lb, s, c);
    mesh_links(lb, s);
}

/* Physical SIP-to-SIP links: a ring, one link for two SIPs, none for one. */
static uint32_t sip_ring_links(uint32_t sips)
{
    return sips < 2 ? 0 : sips == 2 ? 1 : sips;
}

static uint32_t physical_links(const kb__topo *t)
{
    uint32_t r = t->mesh_rows, c = t->mesh_cols, cubes = t->cubes_per_sip;
    uint32_t per_cube = 5 + t->slices_per_cube + 2 * t->pes_per_cube;
    uint32_t per_sip = 4 + cubes * per_cube + (2 * r * c - r - c);
    return t->sips * per_sip + sip_ring_links(t->sips);
}

/* Gathers out-links per node, in link-id order (counting sort). */
static void make_adjacency(kb__topo *t)
{
    for (uint32_t i = 0; i < t->n_links; i++)
        t->out_first[t->links[i].from + 1]++;
    for (uint32_t v = 0; v < t->n_nodes; v++)
        t->out_first[v + 1] += t->out_first[v];
    uint32_t *fill = t->out_first; /* reuse: shift back afterwards */
    for (uint32_t i = 0; i < t->n_links; i++)
        t->out_links[fill[t->links[i].from]++] = i;
    for (uint32_t v = t->n_nodes; v > 0; v--)
        t->out_first[v] = t->out_first[v - 1];
    t->out_first[0] = 0;
}

/* Walks the nodes and binds each to its kind's ops: what the kind adds to
 * the messages leaving the node goes on each of its out-links. A row whose
 * ops are of another table version is refused (KB_ECONFIG). */
/* A kind's ops must be of this build's table version (checked before any
 * slot is read). */
static int check_ops(const kb__kind *k, const char *where, kb__err *err)
{
    if (!k || !k->ops || k->ops->version == KB__KIND_OPS_VERSION) return 0;
    return kb__err_set(err, KB_ECONFIG,
                       "kind '%s' (%s): its ops table is version %d, this build reads version %d",
                       k->name, where, k->ops->version, KB__KIND_OPS_VERSION);
}

int kb__topo_kind_class(const kb__topo *t, int kind)
{
    const kb__kind_registry *reg = t->params.kinds;
    if (kind < (int)kb__kind_count() || !reg) return -1;
    int cls = KB__LINK_CLASS_COUNT;
    for (size_t i = 0; i < reg->n; i++) {
        const kb__kind *k = &reg->rows[i];
        if (!(k->roles & KB__ROLE_BIT(KB__ROLE_LINK)) || !k->ops || !k->ops->link) continue;
        if ((int)(kb__kind_count() + i) == kind) return cls;
        cls++;
    }
    return -1;
}

int kb__topo_class_count(const kb__topo *t)
{
    const kb__kind_registry *reg = t->params.kinds;
    int n = KB__LINK_CLASS_COUNT;
    for (size_t i = 0; reg && i < reg->n; i++) {
        const kb__kind *k = &reg->rows[i];
        n += (k->roles & KB__ROLE_BIT(KB__ROLE_LINK)) && k->ops && k->ops->link;
    }
    return n;
}

const char *kb__topo_class_name(const kb__topo *t, int cls)
{
    if (cls < KB__LINK_CLASS_COUNT) return kb__link_class_name((kb__link_class)cls);
    const kb__kind_registry *reg = t->params.kinds;
    for (size_t i = 0; reg && i < reg->n; i++)
        if (kb__topo_kind_class(t, (int)(kb__kind_count() + i)) == cls) return reg->rows[i].name;
    return "?";
}

static int bind_kinds(kb__topo *t, kb__err *err)
{
    int rc = 0;
    for (uint32_t v = 0; v < t->n_nodes; v++) {
        const kb__kind *k = kb__kinds_get(t->params.kinds, t->nodes[v].kind);
        const kb__kind_ops *ops = k ? k->ops : NULL;
        if (!ops) continue;
        if ((rc = check_ops(k, t->nodes[v].name, err))) return rc;
        uint64_t ps = ops->leave_ps ? ops->leave_ps(&t->params) : 0;
        if (ops->worker) t->nodes[v].worker = ops->worker(&t->params);
        for (uint32_t i = t->out_first[v]; i < t->out_first[v + 1]; i++)
            t->links[t->out_links[i]].node_ps = ps;
    }
    return 0;
}

/* Scales the bandwidth of both directions of the physical link `id`
 * belongs to (the fabric derives its service times from it). */
static void scale_link(kb__topo *t, uint32_t id, double factor)
{
    t->links[id].bw_gbs *= factor;
    t->links[t->links[id].reverse].bw_gbs *= factor;
}

/* Bakes params.faults into the links: slow HBM slices and links get their
 * bandwidth scaled, down links are marked. The faults were checked against
 * this shape when loaded; one naming a part the graph lacks is refused. */
static int apply_faults(kb__topo *t, kb__err *err)
{
    const kb__topo_faults *f = &t->params.faults;
    for (uint32_t i = 0; i < f->n_hbm; i++) {
        const kb__fault_unit *u = &f->hbm[i];
        int32_t x = kb__topo_node_id(t, KB__ROLE_XBAR, (int)u->sip, (int)u->cube, -1);
        int32_t h = kb__topo_node_id(t, KB__ROLE_HBM_CTRL, (int)u->sip, (int)u->cube, (int)u->unit);
        int32_t id = x < 0 || h < 0 ? -1 : kb__topo_link_id(t, (uint32_t)x, (uint32_t)h);
        if (id < 0)
            return kb__err_set(err, KB_ECONFIG, "faults.slow_hbm: no slice sip%u.cube%u.hbm%u",
                               u->sip, u->cube, u->unit);
        scale_link(t, (uint32_t)id, u->factor);
    }
    for (uint32_t i = 0; i < f->n_links; i++) {
        const kb__fault_link *fl = &f->links[i];
        int32_t a = kb__topo_find(t, fl->from), b = kb__topo_find(t, fl->to);
        int32_t id = a < 0 || b < 0 ? -1 : kb__topo_link_id(t, (uint32_t)a, (uint32_t)b);
        if (id < 0)
            return kb__err_set(err, KB_ECONFIG, "faults: no link between %s and %s", fl->from,
                               fl->to);
        if (fl->factor > 0)
            scale_link(t, (uint32_t)id, fl->factor);
        else
            t->links[id].down = t->links[t->links[id].reverse].down = 1;
    }
    return 0;
}

int kb__topo_build(kb__topo **out, const kb__topo_params *p, kb__err *err)
{
    *out = NULL;
    kb__topo *t = calloc(1, sizeof *t);
    if (!t) return kb__err_set(err, KB_ENOMEM, "machine graph: out of memory");
    t->params = *p;
    t->sips = p->system.sips;
    t->mesh_rows = p->sip.mesh_rows;
    t->mesh_cols = p->sip.mesh_cols;
    t->cubes_per_sip = kb__topo_cubes_per_sip(p);
    t->pes_per_cube = kb__topo_pes_per_cube(p);
    t->slices_per_cube = p->cube.hbm_slices;
    t->n_nodes = 1 + t->sips * sip_block(t);
    t->n_links = 2 * physical_links(t);
    t->nodes = calloc(t->n_nodes, sizeof *t->nodes);
    t->links = calloc(t->n_links ? t->n_links : 1, sizeof *t->links);
    t->out_first = calloc(t->n_nodes + 1, sizeof *t->out_first);
    t->out_links = calloc(t->n_links ? t->n_links : 1, sizeof *t->out_links);
    if (!t->nodes || !t->links || !t->out_first || !t->out_links) {
        uint32_t n = t->n_nodes;
        kb__topo_destroy(t);
        return kb__err_set(err, KB_ENOMEM, "machine graph: out of memory (%u nodes)", n);
    }
    make_nodes(t);
    /* the link kinds' ops are read while the links are built */
    int rc = check_ops(kb__kinds_get(p->kinds, p->cube.sram_link_kind), "cube.sram.link", err);
    if (rc) {
        kb__topo_destroy(t);
        return rc;
    }
    link_builder lb = {.t = t};
    for (int s = 0; s < (int)t->sips; s++)
        sip_links(&lb, s);
    const kb__link_params *sl = &p->system.sip_link;
    for (uint32_t s = 0; s < sip_ring_links(t->sips); s++)
        link2(&lb, NODE(IO_NOC, (int)s, -1, -1), NODE(IO_NOC, (int)((s + 1) % t->sips), -1, -1),
              KB__LINK_SIP_LINK, sl->bw_gbs, sl->overhead_ns, sl->length_mm);
    make_adjacency(t);
    rc = bind_kinds(t, err);
    if (!rc) rc = apply_faults(t, err);
    if (rc) {
        kb__topo_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

void kb__topo_destroy(kb__topo *t)
{
    if (!t) return;
    free(t->nodes);
    free(t->links);
    free(t->out_first);
    free(t->out_links);
    free(t);
}

void kb__topo_figures_get(const kb__topo *t, kb__topo_figures *f)
{
    const kb__topo_params *p = &t->params;
    memset(f, 0, sizeof *f);
    f->cubes = (uint64_t)t->sips * t->cubes_per_sip;
    f->pes = f->cubes * t->pes_per_cube;
    f->hbm_slices = f->cubes * t->slices_per_cube;
    f->hbm_cube_bytes = (double)p->cube.hbm_capacity;
    f->hbm_slice_bytes = f->hbm_cube_bytes / t->slices_per_cube;
    f->hbm_system_bytes = f->hbm_cube_bytes * (double)f->cubes;
    f->sram_cube_bytes = (double)p->cube.sram_size;
    f->tcm_bytes = (double)p->pe.tcm_size;
    f->tcm_usable_bytes = (double)(p->pe.tcm_size - p->pe.tcm_reserved);
    f->pe_peak_flops = 2.0 * p->pe.gemm_rows * p->pe.gemm_cols * p->pe.gemm_clock_ghz * 1e9;
    f->system_peak_flops = f->pe_peak_flops * (double)f->pes;
    f->hbm_slice_gbs = p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency;
    f->hbm_cube_gbs = f->hbm_slice_gbs * t->slices_per_cube;
    f->hbm_system_gbs = f->hbm_cube_gbs * (double)f->cubes;
    /* The middle cut splits the longer dimension (columns on a tie). */
    if (t->mesh_cols >= t->mesh_rows)
        f->bisection_links = t->mesh_cols >= 2 ? t->mesh_rows : 0;
    else
        f->bisection_links = t->mesh_cols;
    f->bisection_gbs_per_dir = f->bisection_links * p->sip.ucie.bw_gbs;
    f->pcie_gbs = p->host.pcie.bw_gbs;
    f->sip_link_gbs = t->sips > 1 ? p->system.sip_link.bw_gbs : 0;
}
