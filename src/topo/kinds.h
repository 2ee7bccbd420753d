/*
 * topo/kinds.h — component roles and the table of component kinds.
 *
 * A role is the place a node takes in the machine (router, hbm_ctrl,
 * pe_dma ...). A kind is an implementation name the YAML may choose with
 * `kind: NAME`; one kind can serve several roles (`transit` forwards
 * messages and can stand for a router, xbar, NOC, IO NOC or PCIe
 * endpoint). The table is constant data; the machine graph records each
 * node's kind index and the layers that implement components bind their
 * operations (and state size) to kinds by that index, so this layer stays
 * free of any higher layer's types. A kind's own effect on the graph (a
 * forwarding component's traversal cost) is its row's kb__kind_ops, bound
 * to each of its nodes when the graph is built.
 */
#ifndef KB_TOPO_KINDS_H
#define KB_TOPO_KINDS_H

#include <stddef.h>
#include <stdint.h>

typedef enum kb__role {
    KB__ROLE_HOST,
    KB__ROLE_PCIE_EP,
    KB__ROLE_IO_CPU,
    KB__ROLE_IO_NOC,
    KB__ROLE_ROUTER,
    KB__ROLE_XBAR,
    KB__ROLE_NOC,
    KB__ROLE_M_CPU,
    KB__ROLE_M_DMA,
    KB__ROLE_SRAM,
    KB__ROLE_HBM_CTRL,
    KB__ROLE_PE_CPU,
    KB__ROLE_PE_DMA,
    KB__ROLE_PE_MMU,
    KB__ROLE_PE_TCM,
    KB__ROLE_PE_GEMM,
    KB__ROLE_PE_MATH,
    KB__ROLE_PE_IPCQ,
    KB__ROLE_FABRIC, /* no node: the machine-wide fabric model (fabric.model) */
    KB__ROLE_LINK,   /* no node: the timing of a section's links (cube.sram.link) */
    KB__ROLE_COUNT
} kb__role;

#define KB__ROLE_BIT(r) (1u << (r))

struct kb__topo_params;

/* The table's version of kb__kind_ops: a row's ops with another version is
 * refused when the machine graph is built (it would read slots the row
 * does not have). The table grows by appending slots and raising it. */
#define KB__KIND_OPS_VERSION 3

/* A node's serial worker (kb__kind_ops.worker): every packet crossing the
 * node (in on one link, out on another) is forwarded by it, one packet at a
 * time in arrival order, for overhead_ps + size / bw_gbs. bw_gbs 0: none. */
typedef struct kb__kind_worker {
    double bw_gbs;
    uint64_t overhead_ps;
} kb__kind_worker;

/* A memory kind's controller (kb__kind_ops.memory): c channels sharing
 * bw_gbs, access latency L (docs/timing-model.md, "Memories"). */
typedef struct kb__kind_memory {
    uint32_t channels;
    double bw_gbs;
    double latency_ns;
} kb__kind_memory;

/* A link kind's timing (kb__kind_ops.link): B, o and the wire length. */
typedef struct kb__kind_link {
    double bw_gbs;
    double overhead_ns;
    double length_mm;
} kb__kind_link;

struct kb__kind;

/* What a kind does to the machine graph, bound to every node of the kind
 * when the graph is built (topo.c walks the nodes). A slot left NULL adds
 * nothing. */
typedef struct kb__kind_ops {
    int version; /* KB__KIND_OPS_VERSION */
    /* Picoseconds every message leaving a node of this kind pays once, on
     * each link out of it: its first flit pays it and the others pipeline
     * behind (the link's o; docs/timing-model.md). A forwarding
     * component's traversal cost. */
    uint64_t (*leave_ps)(const struct kb__topo_params *p);
    /* Version 2. The node's serial worker (kb__kind_worker): a forwarding
     * component that handles one packet at a time, across all its links.
     * NULL: the node serialises nothing beyond its links. */
    kb__kind_worker (*worker)(const struct kb__topo_params *p);
    /* Version 3. A memory kind: its controller's timing, in place of the
     * parameters of the role it serves (host/device.c). The memory keeps
     * its role's address space, size and node. */
    kb__kind_memory (*memory)(const struct kb__kind *k, const struct kb__topo_params *p);
    /* Version 3. A link kind (role link): the timing of the links a section
     * builds with it (topo.c), which are counted as a link class of its
     * own (kb__topo_class_count). */
    kb__kind_link (*link)(const struct kb__kind *k, const struct kb__topo_params *p);
} kb__kind_ops;

typedef struct kb__kind {
    const char *name;        /* the name the YAML uses */
    uint32_t roles;          /* KB__ROLE_BIT()s of the roles it can serve */
    const char *doc;         /* one line for docs and error hints */
    const kb__kind_ops *ops; /* NULL: nothing beyond the links' own costs */
    const void *data;        /* the row's own parameters, read by its ops (NULL: none) */
} kb__kind;

/* A registry of kinds: the built-in table, then `rows` (kinds a caller adds,
 * such as a test's), indexed on from kb__kind_count(). It is a value the
 * caller owns and passes in (kb__topo_params_load_kinds; the parameters
 * keep a pointer to it, so it must outlive them and every machine built
 * from them); NULL stands for the built-in table alone. Nothing here is a
 * mutable global: two machines may be opened with different registries. */
typedef struct kb__kind_registry {
    const kb__kind *rows;
    size_t n;
} kb__kind_registry;

/* The lookups below through a registry (NULL: the built-in table). */
size_t kb__kinds_count(const kb__kind_registry *reg);
const kb__kind *kb__kinds_get(const kb__kind_registry *reg, size_t i);
int kb__kinds_find(const kb__kind_registry *reg, const char *name);
int kb__kinds_serves(const kb__kind_registry *reg, int k, kb__role role);

/* Ops of the forwarding kinds (forward.c). */
extern const kb__kind_ops kb__router_ops, kb__transit_ops;

/* The role's name as used in node names ("router", "hbm_ctrl", "pe_dma"). */
const char *kb__role_name(kb__role role);

/* Number of kinds and the kind at index i (i < count). */
size_t kb__kind_count(void);
const kb__kind *kb__kind_get(size_t i);

/* Index of the kind called name, or -1. */
int kb__kind_find(const char *name);

/* Index of the standard kind for a role (its default in the YAML). */
int kb__kind_default(kb__role role);

/* 1 when kind index k can serve role. */
int kb__kind_serves(int k, kb__role role);

#endif
