/*
 * runtime/shard.h — where the pieces of a sharded tensor live (pure math).
 *
 * A policy names, for each of the three levels sip, cube and pe, whether the
 * parent's part is replicated on every owner or split into contiguous
 * blocks along rows (dim 0) or columns (dim 1), and over how many owners.
 * A split that does not divide its part gives balanced blocks: the first
 * (part mod n) blocks hold one more row (column) than the rest, so 1823
 * rows over 256 PEs are 31 shards of 8 rows then 225 of 7; every owner must
 * get at least one.
 * Levels nest: the tensor over SIPs, each SIP's part over that SIP's cubes,
 * each cube's part over that cube's PEs (docs/sharding.md has pictures).
 * A 1-D tensor [n] is one row, [1, n], as in the original tool: column_wise
 * splits its n elements, row_wise over more than one owner is an error.
 * A 3-D tensor [B, R, C] is B rows of R x C elements: row_wise splits
 * dimension 0 (B), column_wise the last dimension (C); dimension 1 is never
 * split (every shard holds all R), so a shard is the box [b, R, c], stored
 * row-major.
 *
 * Output: one shard per owning PE, ordered by (sip, cube, pe). Shards that
 * hold the same data share a region index; regions are numbered row-major
 * over the grid of blocks (region = block_row * col_blocks + block_col).
 *
 * Invariants of a plan: every element of the tensor lies in exactly one
 * region; each region is held by exactly `copies` shards, replica 0..copies-1.
 * Cost: O(number of shards). No allocation except the shard array.
 */
#ifndef KB_RUNTIME_SHARD_H
#define KB_RUNTIME_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* kb_split (replicate, row_wise, column_wise) is the public type. */
#include "kernbench/kernbench.h"

typedef struct kb__shard_policy {
    kb_split sip, cube, pe;
    int num_sips, num_cubes, num_pes; /* owners at each level; 0 = all from the first */
    int first_cube, first_pe;         /* first owner at the cube and PE levels */
} kb__shard_policy;

typedef struct kb__shard_geom {
    int sips;          /* SIPs in the system */
    int cubes_per_sip; /* cubes per SIP */
    int pes_per_cube;  /* PEs per cube */
} kb__shard_geom;

/* What to place. */
typedef struct kb__shard_req {
    const char *name;     /* tensor name, for messages */
    int ndim;             /* 1, 2 or 3 (4 and more: KB_EUNSUPPORTED) */
    const int64_t *shape; /* ndim positive extents */
    size_t elem_size;     /* bytes per element, >= 1 */
    kb__shard_policy policy;
    kb__shard_geom geom;
    int device_sip; /* set_device scope, or -1 for none */
} kb__shard_req;

typedef struct kb__shard {
    int sip, cube, pe;  /* owner (global SIP index) */
    int64_t row0, col0; /* global offset of the local block (dimension 0, last dimension) */
    int64_t rows, cols; /* local extents along them (rows == 1 for a 1-D tensor) */
    uint64_t bytes;     /* rows * plan.mid * cols * elem_size */
    int region;         /* which distinct block of data this shard holds */
    int replica;        /* which copy of that block, 0..copies-1 */
} kb__shard;

typedef struct kb__shard_plan {
    int ndim;
    int64_t rows, cols; /* global extents of dimension 0 and the last ([1, n] for 1-D) */
    int64_t mid;        /* a 3-D tensor's dimension 1, whole in every shard; 1 otherwise */
    size_t elem_size;
    kb_split mode[3];   /* sip, cube, pe */
    int count[3];       /* effective owners per level */
    int base[3];        /* first owner per level: the SIP (device_sip when scoped,
                           else 0), first_cube, first_pe */
    int row_blocks;     /* product of row_wise counts */
    int col_blocks;     /* product of column_wise counts */
    int n_regions;      /* row_blocks * col_blocks */
    int copies;         /* product of replicate counts */
    int n_shards;       /* count[0] * count[1] * count[2] */
    uint64_t max_bytes; /* the largest shard */
    bool even;          /* every shard has the same size */
    kb__shard *shards;  /* n_shards, ordered by (sip, cube, pe) */
} kb__shard_plan;

/* Places req. On success *plan owns its shard array (kb__shard_plan_fini).
 * Errors: KB_EUNSUPPORTED for 4-D and more; KB_EINVAL for a bad shape,
 * element size, mode, count (naming the level and the maximum), device_sip,
 * a split over more owners than its part has rows or columns (naming level,
 * dimension and value) or a byte size that overflows; KB_ENOMEM. *plan is zeroed on failure. */
int kb__shard_plan_make(kb__shard_plan *plan, const kb__shard_req *req, kb__err *err);
/* Frees the shard array; safe on a zeroed plan. */
void kb__shard_plan_fini(kb__shard_plan *plan);
/* Region holding global element (i, j) (j = element index, i = 0 for a 1-D
 * tensor) and its local coordinates there. KB_ERANGE if outside the shape. */
int kb__shard_locate(const kb__shard_plan *plan, int64_t i, int64_t j, int *region, int64_t *li,
                     int64_t *lj, kb__err *err);
/* Index in plan->shards of the given copy of a region, or -1 if none. */
int kb__shard_find(const kb__shard_plan *plan, int region, int replica);
/* "replicate", "row_wise", "column_wise" (or "?" for other values). */
const char *kb__split_name(kb_split s);

#endif
