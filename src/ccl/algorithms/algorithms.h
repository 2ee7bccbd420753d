/*
 * ccl/algorithms/algorithms.h — the collective kernels and the registry that
 * maps a ccl.yaml `module` name to one (docs/ccl-author-guide.md).
 *
 * A collective kernel is an ordinary tl_ kernel run with one program per
 * collective rank (ccl/run.c launches it over exactly the buffer PEs, after
 * installing the queues). Its arguments:
 *
 *   0  tensor  this rank's input buffer (its shard)
 *   1  tensor  this rank's output buffer (the input again for in-place
 *              collectives: all_reduce, broadcast, send_recv)
 *   2  i64     the schedule (kb__ccl_sched_of): constants of the call that
 *              every program reads, like constants compiled into a kernel
 *
 * Kernels move data only through tl_load / tl_store on their buffers and
 * tl_send / tl_recv(_async) / tl_wait between ranks, and compute with tl_
 * ops, so their simulated cost is what the PE would pay.
 */
#ifndef KB_CCL_ALGORITHMS_ALGORITHMS_H
#define KB_CCL_ALGORITHMS_ALGORITHMS_H

#include <stddef.h>
#include <stdint.h>

#include "ccl/ccl_config.h"
#include "kernbench/dist.h"
#include "kernbench/tl.h"

#define KB__CCL_WINDOW_MAX 64

/* Constants of one collective call (owned by the runner, read-only during
 * the launch). */
typedef struct kb__ccl_sched {
    uint32_t world;  /* collective ranks p */
    kb_reduce_op op; /* all_reduce, reduce_scatter */
    tl_dtype dtype;  /* of every buffer */
    int64_t elems;   /* elements of one input buffer (N) */
    int64_t piece;   /* largest message, elements (fits the tile budget) */
    int64_t window;  /* ring: pieces of one chunk kept in TCM per round, <= KB__CCL_WINDOW_MAX */
    uint32_t root;   /* broadcast: the rank of the source buffer */
    const uint32_t *index; /* [world]: rank -> index of its buffer in call order */
} kb__ccl_sched;

static inline const kb__ccl_sched *kb__ccl_sched_of(tl_ctx *k)
{
    return (const kb__ccl_sched *)(intptr_t)tl_arg_i64(k, 2);
}

/* One registry entry: a module name, the collective it implements and the
 * queue topology it needs. */
typedef struct kb__ccl_module {
    const char *name;
    kb__ccl_collective collective;
    kb__ccl_topology topology;
    tl_kernel_fn fn;
} kb__ccl_module;

/* The module called name, or NULL. */
const kb__ccl_module *kb__ccl_module_find(const char *name);
/* "a, b, c": the known module names, snprintf-style (returns the length). */
size_t kb__ccl_module_list(char *buf, size_t size);

/* ---- shared by the kernels (algorithms/common.c) -------------------------- */

/* Elements [*lo, *hi) of chunk c when n elements are cut into p chunks
 * (n·c/p rounded down, so sizes differ by at most one). */
void kb__ccl_chunk(int64_t n, int p, int c, int64_t *lo, int64_t *hi);
/* Loads elements [off, off + len) of buffer t (read as a flat array). */
tl_tile kb__ccl_load(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len);
/* Stores tile v (len elements) at elements [off, off + len) of t. */
void kb__ccl_store(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len, tl_tile v);
/* op(a, b) for sum, max, min and avg (avg adds; see kb__ccl_finish). */
tl_tile kb__ccl_combine(tl_ctx *k, kb_reduce_op op, tl_tile a, tl_tile b);
/* The fully reduced value: v / p for avg (tl_div by a scalar p of the
 * buffer dtype, a true division computed and rounded in f32, then tl_cast
 * to the buffer dtype), v else; frees v when it makes a new tile. */
tl_tile kb__ccl_finish(tl_ctx *k, const kb__ccl_sched *s, tl_tile v);

/* ---- the kernels ------------------------------------------------------------ */

void kb__ccl_ring_allreduce(tl_ctx *k);
void kb__ccl_ring_reduce_scatter(tl_ctx *k);
void kb__ccl_ring_all_gather(tl_ctx *k);
void kb__ccl_ring_broadcast(tl_ctx *k);
void kb__ccl_mesh_allreduce(tl_ctx *k);
void kb__ccl_tree_allreduce(tl_ctx *k);
void kb__ccl_hello_send(tl_ctx *k);

#endif
