/*
 * common.c — the module registry and the helpers every collective kernel
 * shares (flat loads and stores of a buffer, chunk bounds, the reduction
 * op), plus hello_send and pair_send.
 *
 * Adding a kernel: write it with the tl_ API, declare it in algorithms.h,
 * add one line to `modules` below, name it in ccl.yaml.
 */
#include "ccl/algorithms/algorithms.h"

#include <stdio.h>
#include <string.h>

#include "kernel/tl_internal.h"

static const kb__ccl_module modules[] = {
    {"ring_allreduce", KB__CCL_ALL_REDUCE, KB__CCL_RING_1D, kb__ccl_ring_allreduce},
    {"mesh_allreduce", KB__CCL_ALL_REDUCE, KB__CCL_MESH_2D, kb__ccl_mesh_allreduce},
    {"tree_allreduce", KB__CCL_ALL_REDUCE, KB__CCL_TREE, kb__ccl_tree_allreduce},
    {"ring_reduce_scatter", KB__CCL_REDUCE_SCATTER, KB__CCL_RING_1D, kb__ccl_ring_reduce_scatter},
    {"ring_all_gather", KB__CCL_ALL_GATHER, KB__CCL_RING_1D, kb__ccl_ring_all_gather},
    {"ring_broadcast", KB__CCL_BROADCAST, KB__CCL_RING_1D, kb__ccl_ring_broadcast},
    {"ring_all_to_all", KB__CCL_ALL_TO_ALL, KB__CCL_RING_1D, kb__ccl_ring_all_to_all},
    {"ring_reduce", KB__CCL_REDUCE, KB__CCL_RING_1D, kb__ccl_ring_reduce},
    {"ring_all_to_all_v", KB__CCL_ALL_TO_ALL_V, KB__CCL_RING_1D, kb__ccl_ring_all_to_all},
    {"hier_allreduce", KB__CCL_ALL_REDUCE, KB__CCL_HIER, kb__ccl_hier_allreduce},
    {"hier_all_gather", KB__CCL_ALL_GATHER, KB__CCL_HIER, kb__ccl_hier_all_gather},
    {"hier_reduce_scatter", KB__CCL_REDUCE_SCATTER, KB__CCL_HIER, kb__ccl_hier_reduce_scatter},
    {"hello_send", KB__CCL_SEND_RECV, KB__CCL_RING_1D, kb__ccl_hello_send},
};

void *kb__ccl_scratch(tl_ctx *k, size_t bytes)
{
    return kb__tl_scratch_get(k, bytes);
}

void kb__ccl_scratch_put(tl_ctx *k, void *p)
{
    kb__tl_scratch_put(k, p);
}

const kb__ccl_module *kb__ccl_module_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof modules / sizeof modules[0]; i++)
        if (!strcmp(modules[i].name, name)) return &modules[i];
    return NULL;
}

size_t kb__ccl_module_list(char *buf, size_t size)
{
    size_t len = 0;
    if (size) buf[0] = '\0';
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++) {
        int n = snprintf(buf + (len < size ? len : size), len < size ? size - len : 0, "%s%s",
                         i ? ", " : "", modules[i].name);
        if (n > 0) len += (size_t)n;
    }
    return len;
}

void kb__ccl_chunk(int64_t n, int p, int c, int64_t *lo, int64_t *hi)
{
    *lo = n * c / p;
    *hi = n * (c + 1) / p;
}

static int64_t flat_size(const tl_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < tl_tensor_ndim(t); d++)
        n *= tl_tensor_dim(t, d);
    return n;
}

static tl_block_ptr flat_block(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len)
{
    int64_t shape = flat_size(t), stride = 1;
    return tl_make_block_ptr(k, t, 1, &shape, &stride, &off, &len, NULL);
}

tl_tile kb__ccl_load(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len)
{
    return tl_load_block(k, flat_block(k, t, off, len), 0, TL_PAD_ZERO);
}

void kb__ccl_store(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len, tl_tile v)
{
    tl_store_block(k, flat_block(k, t, off, len), v, 0);
}

tl_tile kb__ccl_combine(tl_ctx *k, kb_reduce_op op, tl_tile a, tl_tile b)
{
    switch (op) {
    case KB_MAX:
        return tl_maximum(k, a, b);
    case KB_MIN:
        return tl_minimum(k, a, b);
    default:
        return tl_add(k, a, b);
    }
}

void kb__ccl_fence(tl_ctx *k)
{
    kb__pe_wait_all(&k->prog);
}

tl_tile kb__ccl_finish(tl_ctx *k, const kb_ccl_sched *s, tl_tile v)
{
    if (s->op != KB_AVG) return v;
    tl_tile p = tl_scalar(k, (double)s->world, s->dtype);
    tl_tile q = tl_div(k, v, p); /* true division: f32 for f16/bf16/f32 inputs */
    tl_free(k, p);
    tl_free(k, v);
    if (tl_dtype_of(k, q) == s->dtype) return q;
    tl_tile c = tl_cast(k, q, s->dtype);
    tl_free(k, q);
    return c;
}

/* hello_send: every rank sends its buffer to NEXT, piece by piece, and
 * receives PREV's; a receive is posted before each send so rings of any
 * size drain. The buffers are not changed. */
void kb__ccl_hello_send(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    if (s->world < 2) return;
    for (int64_t off = 0; off < s->elems; off += s->piece) {
        int64_t len = s->elems - off < s->piece ? s->elems - off : s->piece;
        uint64_t scope = tl_scope_begin(k);
        tl_recv_handle h = tl_recv_async(k, TL_DIR_PREV, 1, &len, s->dtype);
        tl_send(k, TL_DIR_NEXT, kb__ccl_load(k, buf, off, len));
        tl_wait(k, h);
        tl_scope_end(k, scope, 0, NULL);
    }
}

/* pair_send: point-to-point over pairs (ccl/run.c, kb__coll_req.pairwise):
 * one launch runs every pair, each pair a world of two on queues of its
 * own, so a program's rank is its place in its pair. Its role comes from
 * its buffer: the buffers are numbered sender, receiver, sender, ... and
 * s->index is indexed by the program (its PE in the launch). The sender
 * sends its buffer to NEXT piece by piece, the receiver stores what comes
 * from PREV: the steps of ring_broadcast over two ranks. */
void kb__ccl_pair_send(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int sender = s->index[tl_program_id(k, 0)] % 2 == 0;
    for (int64_t off = 0; off < s->elems; off += s->piece) {
        int64_t len = s->elems - off < s->piece ? s->elems - off : s->piece;
        if (sender) {
            tl_tile v = kb__ccl_load(k, buf, off, len);
            tl_send(k, TL_DIR_NEXT, v);
            tl_free(k, v);
        } else {
            tl_tile v = tl_recv(k, TL_DIR_PREV, 1, &len, s->dtype);
            kb__ccl_store(k, buf, off, len, v);
            tl_free(k, v);
        }
    }
}
