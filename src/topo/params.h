/*
 * topo/params.h — the machine's parameters and the schema that fills them.
 *
 * kb__topo_params is plain data: every field has one schema entry
 * (src/topo/schema.c) giving its YAML path, type and unit, built-in
 * default, range and a one-line description. The built-in machine is the
 * schema's defaults; configs/topology.yaml spells out the same values.
 * Times are in ns, bandwidths in GB/s (= bytes/ns), lengths in mm, sizes
 * in bytes. Kind fields hold indices into the kinds table (kinds.h).
 */
#ifndef KB_TOPO_PARAMS_H
#define KB_TOPO_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "config/config.h"
#include "topo/kinds.h"

typedef struct kb__link_params {
    double bw_gbs;      /* bandwidth of one direction */
    double length_mm;   /* wire length: w = length_mm x fabric.ns_per_mm */
    double overhead_ns; /* per-message first-flit overhead */
} kb__link_params;

/* Cycle costs of the vector unit per element group, by op class. */
typedef struct kb__math_cycles {
    uint32_t add, sub, mul, max, min, cmp, select, cast, div;
    uint32_t exp, log, sqrt, rsqrt, sigmoid, reduce;
} kb__math_cycles;

/* Faults (docs/faults.md): stragglers and broken parts, checked against the
 * machine's shape when loaded (faults.c) and baked into the graph's links
 * and the units' parameters when the machine is built: nothing is looked up
 * while a simulation runs. At most KB__FAULTS_MAX entries per list. */
#define KB__FAULTS_MAX       32
#define KB__FAULT_NAME_MAX   32
#define KB__FAULT_FACTOR_MIN 0.001 /* a thousandth of the speed: the slowest accepted */

typedef struct kb__fault_unit {
    uint32_t sip, cube, unit; /* unit: the PE, or the HBM slice */
    double factor;            /* in [KB__FAULT_FACTOR_MIN, 1]: the fraction of its speed left */
} kb__fault_unit;

typedef struct kb__fault_link {
    char from[KB__FAULT_NAME_MAX], to[KB__FAULT_NAME_MAX]; /* node names, as the graph's */
    double factor; /* in [KB__FAULT_FACTOR_MIN, 1]: of its bandwidth; 0: the link is down */
} kb__fault_link;

typedef struct kb__fault_rank {
    uint32_t rank;   /* host rank of every kb_spawn group */
    double delay_ns; /* it starts this much after its siblings */
} kb__fault_rank;

typedef struct kb__topo_faults {
    uint32_t n_pes, n_hbm, n_links, n_ranks;
    kb__fault_unit pes[KB__FAULTS_MAX];   /* faults.slow_pes */
    kb__fault_unit hbm[KB__FAULTS_MAX];   /* faults.slow_hbm */
    kb__fault_link links[KB__FAULTS_MAX]; /* faults.slow_links, then faults.down_links */
    kb__fault_rank ranks[KB__FAULTS_MAX]; /* faults.late_ranks */
} kb__topo_faults;

typedef struct kb__topo_params {
    struct {
        uint64_t packet_bytes;
        uint64_t header_bytes; /* commands, requests and acks: one packet */
        double ns_per_mm;
        uint16_t model; /* kind index of the fabric model (packet, flow) */
        uint32_t ring_warmup; /* steps a calibrated ring runs message by message (0: all) */
    } fabric;
    struct {
        double first_flit_ns; /* what a message pays leaving a `transit` node */
        double worker_bw_gbs; /* its serial worker's rate */
        double worker_ns;     /* and its overhead per packet */
    } transit;
    struct {
        uint32_t racks, sips; /* sips: in the whole system */
        kb__link_params sip_link;
    } system;
    struct {
        uint16_t kind;
        double dispatch_ns;
        kb__link_params pcie;
    } host;
    struct {
        uint32_t attach_cube;
        kb__link_params noc;
        uint16_t noc_kind, io_cpu_kind, pcie_ep_kind;
        double io_cpu_dispatch_ns;
        double pcie_ep_overhead_ns;
    } io;
    struct {
        uint32_t mesh_rows, mesh_cols;
        kb__link_params ucie; /* overhead_ns is per port: 2 per crossing */
    } sip;
    struct {
        uint16_t router_kind, xbar_kind, hbm_kind, sram_kind, noc_kind, m_cpu_kind, m_dma_kind;
        uint16_t sram_link_kind; /* the link kind of xbar <-> SRAM (role link) */
        double router_overhead_ns;
        double xbar_overhead_ns, xbar_bw_gbs;
        uint64_t hbm_capacity; /* bytes per cube, split evenly over slices */
        uint32_t hbm_slices, hbm_pseudo_channels;
        double hbm_xbar_bw_gbs, hbm_efficiency, hbm_access_latency_ns;
        uint64_t hbm_interleave_bytes;
        uint64_t sram_size;
        double sram_bw_gbs, sram_latency_ns;
        kb__link_params noc;
        double m_cpu_dispatch_ns;
        uint32_t m_cpu_dma_channels;
        uint32_t corners, pe_per_corner;
    } cube;
    struct {
        uint16_t tcm_kind, dma_kind, mmu_kind, gemm_kind, math_kind, cpu_kind, ipcq_kind;
        uint64_t tcm_size, tcm_reserved;
        double tcm_bw_gbs, tcm_latency_ns;
        uint32_t dma_channels;
        double dma_bw_gbs, dma_setup_ns;
        uint64_t mmu_page_size;
        double mmu_translate_ns, mmu_map_ns_per_page;
        uint32_t gemm_rows, gemm_cols;
        double gemm_clock_ghz;
        uint32_t math_lanes;
        double math_clock_ghz;
        kb__math_cycles math_cycles;
        double cpu_dispatch_ns, cpu_scalar_op_ns;
        uint32_t cpu_pipeline; /* 1: a program starts once the previous one issued its last op */
        uint64_t ipcq_credit_bytes, ipcq_vc_chunk_bytes;
        double ipcq_poll_interval_ns, ipcq_wake_ns;
    } pe;
    kb__topo_faults faults; /* not in the schema table: lists (faults.c) */
    /* The kinds the kind indices above refer to (kb__topo_params_load_kinds):
     * the built-in table (NULL) or a registry the caller owns, which must
     * outlive these parameters and every graph and machine built from them. */
    const kb__kind_registry *kinds;
} kb__topo_params;

typedef enum kb__param_type {
    KB__PT_U32,    /* whole number */
    KB__PT_U64,    /* whole number */
    KB__PT_DOUBLE, /* decimal number */
    KB__PT_SIZE,   /* bytes, unit suffix allowed */
    KB__PT_TIME,   /* ns, unit suffix allowed */
    KB__PT_BW,     /* GB/s, unit suffix allowed */
    KB__PT_MESH,   /* "RxC": fills two consecutive uint32_t */
    KB__PT_KIND,   /* component kind name: uint16_t kind index */
    KB__PT_SWITCH, /* on | off: uint32_t 1 | 0 */
} kb__param_type;

typedef struct kb__param {
    const char *path; /* YAML path, "cube.hbm.efficiency" */
    kb__param_type type;
    size_t offset;   /* of the field in kb__topo_params */
    const char *def; /* default, as it would be written in YAML */
    double min, max; /* inclusive range (min_open: min excluded) */
    int min_open;
    int role;         /* KIND: the kb__role the kind must serve */
    const char *unit; /* unit for docs: "ns", "GB/s", "bytes", "" */
    const char *doc;  /* one-line meaning */
} kb__param;

/* The schema: every parameter, in documentation order. */
size_t kb__topo_schema_count(void);
const kb__param *kb__topo_schema_get(size_t i);

/* Fills p with the built-in machine (the schema defaults). */
void kb__topo_params_default(kb__topo_params *p);

/* Fills p from the defaults overlaid with the tree under root, checking
 * every key (unknown ones get a did-you-mean hint), type, unit, range and
 * cross-parameter rule. Errors are KB_ECONFIG with the node's location. */
int kb__topo_params_from_cfg(kb__topo_params *p, const kb__cfg_node *root, kb__err *err);

/* Loads file (NULL: the built-in machine), applies sets[0..n_sets) in
 * order, validates, and fills p. Errors: KB_EIO, KB_ECONFIG, KB_ENOMEM. */
int kb__topo_params_load(kb__topo_params *p, const char *file, const char *const *sets,
                         size_t n_sets, kb__err *err);

/* kb__topo_params_load with the kinds of registry kinds (NULL: the built-in
 * table) for the `kind:` keys: a kind the registry adds may be named like a
 * built-in one. p->kinds is kinds afterwards. */
int kb__topo_params_load_kinds(kb__topo_params *p, const kb__kind_registry *kinds, const char *file,
                               const char *const *sets, size_t n_sets, kb__err *err);

/* Same from a YAML buffer named name (used by tests and the fuzz target). */
int kb__topo_params_load_string(kb__topo_params *p, const char *name, const char *text, size_t len,
                                const char *const *sets, size_t n_sets, kb__err *err);

/* Entry e's value in p as text that parses back to the same value
 * (params_text.c). 0, or KB_EINVAL when buf is too small. */
int kb__topo_param_format(const kb__topo_params *p, const kb__param *e, char *buf, size_t size);
/* The value of the parameter at path ("fabric.model") as text; KB_ENOTFOUND
 * when the schema has no such parameter. */
int kb__topo_param_text(const kb__topo_params *p, const char *path, char *buf, size_t size);
/* Every parameter of p as "path=value" lines in schema order (*out: the
 * caller frees). Errors: KB_ENOMEM, KB_EINVAL. */
int kb__topo_params_text(const kb__topo_params *p, char **out, kb__err *err);

/* fabric.packet_bytes: the size of a data packet. The one reader of the
 * field: every layer asks here (or the fabric, kb__fabric_packet_bytes,
 * which is given this value when it is built from the machine graph). */
uint32_t kb__topo_packet_bytes(const kb__topo_params *p);
/* fabric.header_bytes: the size of a one-packet message (command, request,
 * ack). The one reader of the field, like kb__topo_packet_bytes (the fabric
 * and the device are given this value when they are built). */
uint32_t kb__topo_header_bytes(const kb__topo_params *p);

/* ---- faults (faults.c) ---------------------------------------------------- */

/* Parses and checks the `faults` section (node; NULL or null: none) into
 * p->faults, against the shape p already holds: every sip, cube, PE, slice
 * and link must exist (the error names the key, the value and what exists),
 * no part listed twice. Errors: KB_ECONFIG, KB_ENOMEM. */
int kb__topo_faults_from_cfg(kb__topo_params *p, const kb__cfg_node *node, kb__err *err);

/* 1 when p lists any fault. */
int kb__topo_faults_any(const kb__topo_params *p);

/* Appends the faults as "faults.LIST=[{...}]" lines (valid --set arguments,
 * nothing when there are none) to the text s of length *len and capacity
 * *cap (realloc'd). 0 or KB_ENOMEM. */
int kb__topo_faults_text(const kb__topo_params *p, char **s, size_t *len, size_t *cap);

/* The faults in words for run headers ("slow PE sip0.cube3.pe5 x0.5; down
 * link ...", "none"), cut to size. */
void kb__topo_faults_describe(const kb__topo_params *p, char *buf, size_t size);

/* The speed factor of a PE's units and of an HBM slice (1 when healthy),
 * and a host rank's start delay in ns (0 when on time): read when the
 * machine is built, never while it runs. */
double kb__topo_fault_pe_factor(const kb__topo_params *p, uint32_t sip, uint32_t cube, uint32_t pe);
double kb__topo_fault_hbm_factor(const kb__topo_params *p, uint32_t sip, uint32_t cube,
                                 uint32_t slice);
double kb__topo_fault_rank_delay_ns(const kb__topo_params *p, uint32_t rank);

/* PEs per cube (corners x pe_per_corner), cubes per SIP, total PEs. */
uint32_t kb__topo_pes_per_cube(const kb__topo_params *p);
uint32_t kb__topo_cubes_per_sip(const kb__topo_params *p);
uint64_t kb__topo_pe_total(const kb__topo_params *p);

/* Largest machine accepted (PEs in the system). */
#define KB__TOPO_MAX_PES 65536

#endif
