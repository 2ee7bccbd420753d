/*
 * ccl/plan.h — the install plan of a collective: where each rank runs and
 * which ranks its four IPCQ ports talk to.
 *
 * Collective ranks are PEs (not host ranks: see src/dist/spawn.h). Rank r
 * runs on the r-th PE of the placement order:
 *
 *   SIP-major; inside a SIP the cubes follow a cycle through the mesh in
 *   which consecutive cubes share a UCIe link (kb__ccl_cube_order), started
 *   at the IO chiplet's attach cube so the ring leaves and enters each SIP
 *   next to its SIP link; inside a cube the PEs in index order.
 *
 * A smaller world takes the first world_size PEs of that order, so it stays
 * as compact as the machine allows; kb__ccl_plan_build_on numbers a given
 * PE set (the PEs holding a collective's buffers) in the same order. Ports (docs/ccl.md):
 *
 *   ring_1d   W = prev (r-1), E = next (r+1), modulo the world size
 *   mesh_2d   rank r at (r / cols, r % cols) of the grid; N/E/S/W, no wrap
 *   tree      a binary tree of ranges (kb__ccl_tree_at): N = parent,
 *             W = left, E = right child
 *   hierarchical  groups of L ranks, one per SIP used (rank r = g·L + l):
 *             W/E = prev/next in its group's ring (g·L + (l ∓ 1) mod L),
 *             N/S = the same l of the previous/next group (r ∓ L mod world)
 *
 * Each used port records the peer rank, the peer's PE, and the physical
 * path class (same cube, cross-cube, cross-SIP) with the UCIe links an XY
 * route crosses (cross-SIP: to and from the attach cubes).
 *
 * Ownership: kb__ccl_plan_build allocates; kb__ccl_plan_destroy frees.
 * Cost: O(world size) time and memory.
 */
#ifndef KB_CCL_PLAN_H
#define KB_CCL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "ccl/ccl_config.h"
#include "topo/params.h"

typedef enum kb__ccl_dir {
    KB__CCL_N,
    KB__CCL_E,
    KB__CCL_S,
    KB__CCL_W,
    KB__CCL_DIR_COUNT
} kb__ccl_dir;

typedef enum kb__ccl_path {
    KB__CCL_PATH_SAME_CUBE,  /* dma -> cube noc -> dma */
    KB__CCL_PATH_CROSS_CUBE, /* ... -> xbar -> router -> UCIe ... -> router -> xbar -> ... */
    KB__CCL_PATH_CROSS_SIP,  /* ... attach cube -> IO chiplet -> SIP link -> ... */
    KB__CCL_PATH_COUNT
} kb__ccl_path;

typedef struct kb__ccl_loc {
    uint32_t sip, cube, pe; /* cube: index in the SIP's mesh (row-major) */
} kb__ccl_loc;

typedef struct kb__ccl_port {
    int32_t peer;       /* peer rank; -1 when the port is unused */
    kb__ccl_loc loc;    /* the peer's PE */
    const char *role;   /* "prev", "next", "north", ..., "parent", "left", "right" */
    kb__ccl_path path;  /* physical path class to the peer */
    uint32_t ucie_hops; /* mesh UCIe links an XY route crosses (both SIPs) */
} kb__ccl_port;

typedef struct kb__ccl_plan {
    kb__ccl_resolved r;                       /* the resolved algorithm (copied) */
    uint32_t world_size;                      /* == r.s.world_size */
    uint32_t group;                           /* hierarchical: ranks per group (SIP), the
                                                 same for every group; else world_size */
    kb__ccl_loc *loc;                         /* [world_size]: rank -> PE */
    kb__ccl_port (*ports)[KB__CCL_DIR_COUNT]; /* [world_size][N, E, S, W] */
    uint32_t sips, cubes_per_sip, pes_per_cube, mesh_rows, mesh_cols, attach_cube;
} kb__ccl_plan;

/* Header and per-port entry sizes of the install message (bytes). */
#define KB__CCL_INSTALL_HEADER_BYTES 36u
#define KB__CCL_INSTALL_PORT_BYTES   16u
#define KB__CCL_INSTALL_MAGIC        0x5143424bu /* "KBCQ" little-endian */

/* Builds the plan of r on machine p (r from kb__ccl_resolve on the same p).
 * *out is NULL on failure (KB_ENOMEM, KB_EINVAL for a world size that
 * does not fit p). */
int kb__ccl_plan_build(kb__ccl_plan **out, const kb__topo_params *p, const kb__ccl_resolved *r,
                       kb__err *err);
/* The plan of r over exactly the PEs set[0..n) (n == r->s.world_size):
 * ranks are numbered in the placement order above restricted to that set,
 * ports follow the same rules. KB_EINVAL for a PE outside p or given twice,
 * KB_ECONFIG for a hierarchical plan over SIPs that hold different numbers
 * of the set's PEs, KB_ENOMEM. */
int kb__ccl_plan_build_on(kb__ccl_plan **out, const kb__topo_params *p, const kb__ccl_resolved *r,
                          const kb__ccl_loc *set, uint32_t n, kb__err *err);
/* The plan of r with rank i on rank_to_pe[i] exactly (no reordering), n ==
 * r->s.world_size; ports follow the same rules over that numbering
 * (hierarchical: groups are runs of equal length of consecutive ranks on
 * one SIP, as group_size checks). KB_EINVAL naming the entry for a count
 * that is not the world size, a PE outside p or a PE given twice;
 * KB_ECONFIG for a hierarchical numbering whose SIP runs differ in length;
 * KB_ENOMEM. */
int kb__ccl_plan_build_ranked(kb__ccl_plan **out, const kb__topo_params *p,
                              const kb__ccl_resolved *r, const kb__ccl_loc *rank_to_pe, uint32_t n,
                              kb__err *err);
void kb__ccl_plan_destroy(kb__ccl_plan *plan);

/* The cube visiting order of one SIP (a Hamiltonian cycle of the mesh when
 * one exists: rows or columns even; else a boustrophedon path), rotated to
 * start at `attach` when it is a cycle. order has rows x cols entries.
 * Returns 1 when consecutive entries, last to first included, are adjacent. */
int kb__ccl_cube_order(uint32_t rows, uint32_t cols, uint32_t attach, uint32_t *order);

/* The tree topology's shape: the subtree of the ranks [lo, hi) has root lo,
 * its left subtree the ranks [lo + 1, mid), its right [mid, hi), mid = lo +
 * 1 + (hi - lo - 1) / 2. Every subtree is a range of consecutive ranks, so
 * (ranks being in placement order) a subtree stays inside a cube, a SIP,
 * as far as its size allows, and one edge crosses each boundary a range
 * straddles: on the default machine one tree edge crosses the SIP link
 * (a binary heap, parent (r - 1) / 2, had 64). */
typedef struct kb__ccl_tree_node {
    int32_t parent, left, right; /* ranks, -1 for none */
    uint32_t depth;              /* edges from the root (rank 0) */
} kb__ccl_tree_node;

/* Rank r's place in the tree of n ranks. O(log n). */
kb__ccl_tree_node kb__ccl_tree_at(uint32_t n, uint32_t r);
/* The deepest rank's depth in the tree of n ranks. O(log n). */
uint32_t kb__ccl_tree_height(uint32_t n);

/* Rank running on loc, or -1. O(world size). */
int32_t kb__ccl_plan_rank_at(const kb__ccl_plan *plan, kb__ccl_loc loc);

/* Human-readable plan, one line per rank, snprintf-style: writes at most
 * size bytes (NUL-terminated when size > 0) and returns the full length. */
size_t kb__ccl_plan_format(const kb__ccl_plan *plan, char *buf, size_t size);

/* Size of the install message sent to rank's PE: header + one entry per
 * used port. */
size_t kb__ccl_install_bytes(const kb__ccl_plan *plan, uint32_t rank);

/* Encodes rank's install message (little-endian, layout in docs/ccl.md)
 * into buf; returns its size, or 0 when size is too small or rank is out
 * of range. */
size_t kb__ccl_install_encode(const kb__ccl_plan *plan, uint32_t rank, uint8_t *buf, size_t size);

/* Sum of kb__ccl_install_bytes over all ranks. */
uint64_t kb__ccl_install_total_bytes(const kb__ccl_plan *plan);

const char *kb__ccl_dir_name(kb__ccl_dir d);
const char *kb__ccl_path_name(kb__ccl_path p);

#endif
