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
 *
 * and tl_ccl_sched(k) gives the call's constants (kernbench/dist.h), like
 * constants compiled into a kernel. Users register kernels of their own
 * with kb_ccl_register; those live in the machine's collective state.
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

/* Largest kb_ccl_sched.window. */
#define KB__CCL_WINDOW_MAX 64

/* Receives a ring stream's rank may still wait for while it sends
 * (algorithms/ring.c, round_run), in a round of m pieces with the ring
 * window `window` (kb_ccl_sched.window): the scratch (2 windows of pieces,
 * ccl/predict.c) holds the held pieces, lag + 1 receives with their
 * own-data loads, lag + 1 own pieces and one result. The α-β model of the
 * all-gather (ccl/alphabeta.c) follows the same lag. */
#define KB__CCL_RING_LAG_MAX 8

static inline int64_t kb__ccl_ring_lag(int64_t m, int64_t window)
{
    int64_t d = m - 1, room = (window - 4) / 3;
    if (d > room) d = room;
    if (d > KB__CCL_RING_LAG_MAX) d = KB__CCL_RING_LAG_MAX;
    return d > 0 ? d : 0;
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
/* A kernel's own host array of `bytes`, owned by its program: freed by
 * kb__ccl_scratch_put, or at the program's end when a kernel error unwinds
 * past that call. Raises KB_ENOMEM when the host has no memory. */
void *kb__ccl_scratch(tl_ctx *k, size_t bytes);
void kb__ccl_scratch_put(tl_ctx *k, void *p);
/* Loads elements [off, off + len) of buffer t (read as a flat array). */
tl_tile kb__ccl_load(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len);
/* Stores tile v (len elements) at elements [off, off + len) of t. */
void kb__ccl_store(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len, tl_tile v);
/* Blocks the program until every op it issued has finished, so its stores
 * have landed: a load issued after it sees them. Nothing else orders a
 * store before a later load of the same bytes (both are DMA ops that may
 * run on different channels; a read samples memory when it is served). */
void kb__ccl_fence(tl_ctx *k);
/* op(a, b) for sum, max, min and avg (avg adds; see kb__ccl_finish). */
tl_tile kb__ccl_combine(tl_ctx *k, kb_reduce_op op, tl_tile a, tl_tile b);
/* The fully reduced value: v / p for avg (tl_div by a scalar p of the
 * buffer dtype, a true division computed and rounded in f32, then tl_cast
 * to the buffer dtype), v else; frees v when it makes a new tile. */
tl_tile kb__ccl_finish(tl_ctx *k, const kb_ccl_sched *s, tl_tile v);

/* ---- the kernels ------------------------------------------------------------ */

void kb__ccl_ring_allreduce(tl_ctx *k);
void kb__ccl_ring_reduce_scatter(tl_ctx *k);
void kb__ccl_ring_all_gather(tl_ctx *k);
void kb__ccl_ring_broadcast(tl_ctx *k);
void kb__ccl_ring_all_to_all(tl_ctx *k);
void kb__ccl_ring_reduce(tl_ctx *k);
void kb__ccl_mesh_allreduce(tl_ctx *k);
void kb__ccl_tree_allreduce(tl_ctx *k);
void kb__ccl_hier_allreduce(tl_ctx *k);
void kb__ccl_hier_all_gather(tl_ctx *k);
void kb__ccl_hier_reduce_scatter(tl_ctx *k);
void kb__ccl_hello_send(tl_ctx *k);
/* Not a module: the kernel of point-to-point transfers (common.c). */
void kb__ccl_pair_send(tl_ctx *k);

#endif
