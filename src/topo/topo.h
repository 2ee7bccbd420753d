/*
 * topo/topo.h — the machine graph: nodes, directed links, lookups.
 *
 * Built from validated parameters (params.h); immutable afterwards, so any
 * number of readers may share it. Ids are dense and deterministic:
 *
 *   node 0                 host
 *   per SIP s (in order)   pcie_ep, io_cpu, io_noc, then per cube c:
 *                          router, xbar, noc, m_cpu, m_dma, sram,
 *                          hbm0 .. hbm{K-1}, then per PE p:
 *                          cpu, dma, mmu, tcm, gemm, math, ipcq
 *
 * Links come in pairs: a physical link is ids 2k (built direction) and
 * 2k+1 (reverse), each with its own bandwidth B, overhead o and wire delay
 * w (docs/topology.md says which parameter feeds which class); the faults
 * of params.faults are baked in (a slow link's or HBM slice's B scaled, a
 * down link marked), so nobody looks them up later. Out-links
 * per node are in CSR form for the router of the fabric layer.
 *
 * Cost: build is O(nodes + links), one allocation per array; the default
 * machine (2,247 nodes) builds in well under a millisecond.
 */
#ifndef KB_TOPO_TOPO_H
#define KB_TOPO_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "topo/kinds.h"
#include "topo/params.h"

/* The link classes, one row each: enumerator, name (upper case, as `topo`,
 * `probe` and the records print it), what it joins. The first nine are
 * the public kb_link_class values (include/kernbench/kernbench.h, checked
 * in runtime/machine.c); a class appended here is counted by the public
 * accessors (kb_link_class_count, kb_stats_link_bytes) without changing
 * any public struct. */
#define KB__LINK_CLASSES(X)                                                                        \
    X(PCIE, "PCIE", "host <-> pcie_ep")                                                            \
    X(IO_NOC, "IO_NOC", "pcie_ep <-> io_noc, io_cpu <-> io_noc")                                   \
    X(IO_UCIE, "IO_UCIE", "io_noc <-> router of io_chiplet.attach_cube")                           \
    X(UCIE, "UCIE", "router <-> neighbouring router in the cube mesh")                             \
    X(XBAR, "XBAR", "xbar <-> router, noc, sram, m_cpu, m_dma")                                    \
    X(HBM, "HBM", "xbar <-> hbm slice")                                                            \
    X(NOC, "NOC", "cube noc <-> pe dma")                                                           \
    X(TCM, "TCM", "pe dma <-> pe tcm")                                                             \
    X(SIP_LINK, "SIP_LINK", "io_noc of SIP s <-> io_noc of SIP s+1 (ring)")

typedef enum kb__link_class {
#define KB__LINK_ENUM(id, name, doc) KB__LINK_##id,
    KB__LINK_CLASSES(KB__LINK_ENUM)
#undef KB__LINK_ENUM
        KB__LINK_CLASS_COUNT
} kb__link_class;

#define KB__TOPO_NAME_MAX 64

typedef struct kb__topo_node {
    uint32_t id;
    kb__role role;
    uint16_t kind;                /* index into the kinds table (kinds.h) */
    int32_t rack;                 /* -1 for the host */
    int32_t sip;                  /* -1 for the host */
    int32_t cube;                 /* -1 when not inside a cube */
    int32_t unit;                 /* PE index in the cube, or HBM slice; -1 otherwise */
    int32_t x, y;                 /* cube mesh column and row; -1 outside cubes */
    kb__kind_worker worker;       /* its kind's serial worker (kb__kind_ops.worker); bw 0: none */
    char name[KB__TOPO_NAME_MAX]; /* "sip0.cube3.pe1.dma" */
} kb__topo_node;

typedef struct kb__topo_link {
    uint32_t id;
    uint32_t from, to; /* node ids */
    uint32_t reverse;  /* id of the opposite direction */
    kb__link_class cls;
    double bw_gbs;        /* B, GB/s = bytes/ns */
    uint64_t overhead_ps; /* o, ceil to ps */
    uint64_t wire_ps;     /* w = length_mm x ns_per_mm, ceil to ps */
    uint64_t node_ps;     /* what the from node's kind adds to every message leaving it
                             (kb__kind_ops.leave_ps: a router's traversal), paid like o */
    int down;             /* faults.down_links: in the graph, but no route may use it */
} kb__topo_link;

/* Who routes messages over a graph: the fabric built over it binds itself
 * (kb__fabric_route_graph), so every layer that needs a route (the
 * alpha-beta model of ccl) asks the one route computation, the fabric's
 * (fabric/route.c). route() gives the directed links from -> to in travel
 * order, owned by the router and valid while it lives. */
typedef struct kb__topo_router {
    void *self;
    int (*route)(void *self, uint32_t from, uint32_t to, const uint32_t **links, uint32_t *n,
                 kb__err *err);
} kb__topo_router;

typedef struct kb__topo {
    kb__topo_params params; /* the validated parameters it was built from */
    uint32_t n_nodes, n_links;
    kb__topo_node *nodes;                          /* [n_nodes], nodes[i].id == i */
    kb__topo_link *links;                          /* [n_links], links[i].id == i */
    uint32_t *out_first;                           /* [n_nodes + 1]: out-links of node v are */
    uint32_t *out_links;                           /* out_links[out_first[v] .. out_first[v+1]) */
    uint32_t links_by_class[KB__LINK_CLASS_COUNT]; /* directed links per class */
    /* shape, copied from params for quick use */
    uint32_t sips, cubes_per_sip, pes_per_cube, slices_per_cube, mesh_rows, mesh_cols;
    kb__topo_router router; /* set once, by the fabric built over the graph, before any
                               reader routes; the graph itself is not changed by routing */
} kb__topo;

/* Builds the graph of p (which must have passed validation). *out is NULL
 * on failure (KB_ENOMEM). */
int kb__topo_build(kb__topo **out, const kb__topo_params *p, kb__err *err);
void kb__topo_destroy(kb__topo *t);

/* Node id of role at (sip, cube, unit) — unit is the PE index for pe_*
 * roles and the slice for hbm_ctrl; pass -1 where n/a. -1 when no such
 * node. O(1). */
int32_t kb__topo_node_id(const kb__topo *t, kb__role role, int sip, int cube, int unit);

/* The route from -> to as the graph's router computes it (kb__topo_router):
 * *links, *n. KB_ESTATE when no fabric was built over t, else the
 * router's errors (KB_ENOTFOUND, KB_EINVAL, KB_ENOMEM). */
int kb__topo_route(const kb__topo *t, uint32_t from, uint32_t to, const uint32_t **links,
                   uint32_t *n, kb__err *err);

/* Id of the directed link from -> to, or -1. O(out-degree of from). */
int32_t kb__topo_link_id(const kb__topo *t, uint32_t from, uint32_t to);

/* The node with this name ("sip1.cube2.hbm3"), or -1. O(nodes). */
int32_t kb__topo_find(const kb__topo *t, const char *name);

/* A link's serialisation time: the ps a link of bandwidth bw_gbs (GB/s =
 * bytes/ns) is busy sending `bytes`, rounded up (kb__ps_from_bytes_gbs).
 * The one rule: the fabric precomputes it per link for a full and a header
 * packet (fabric.c), the alpha-beta model charges it per link of a route. */
uint64_t kb__topo_serial_ps(uint64_t bytes, double bw_gbs);

/* Link classes of graph t: the built-in ones (KB__LINK_CLASSES), then one
 * per link kind of its registry (kb__kind_ops.link), in the registry's
 * order: how many, the class of link kind `kind` (-1 for a built-in kind:
 * its links keep their section's class) and a class's name (a link kind's
 * name; "?" out of range). */
int kb__topo_class_count(const kb__topo *t);
int kb__topo_kind_class(const kb__topo *t, int kind);
const char *kb__topo_class_name(const kb__topo *t, int cls);

/* Short upper-case name of a link class ("UCIE"), "?" out of range; what
 * it joins. */
const char *kb__link_class_name(kb__link_class c);
const char *kb__link_class_doc(kb__link_class c);

/* Derived figures `kernbench topo` prints (all from the parameters). */
typedef struct kb__topo_figures {
    uint64_t pes, cubes, hbm_slices;
    double hbm_slice_bytes, hbm_cube_bytes, hbm_system_bytes;
    double sram_cube_bytes, tcm_bytes, tcm_usable_bytes;
    double pe_peak_flops, system_peak_flops;            /* f16: 2 x rows x cols x clock */
    double hbm_slice_gbs, hbm_cube_gbs, hbm_system_gbs; /* bw x efficiency */
    uint32_t bisection_links;                           /* UCIe links across the mesh middle cut */
    double bisection_gbs_per_dir;                       /* links x ucie bw, one direction */
    double pcie_gbs;                                    /* per direction */
    double sip_link_gbs;                                /* per direction */
} kb__topo_figures;

void kb__topo_figures_get(const kb__topo *t, kb__topo_figures *f);

#endif
