/*
 * registry.c — the built-in benches, in the order `kernbench list` shows
 * them. The first is the default of a bare `kernbench run`.
 */
#include <string.h>

#include "internal.h"

static const kb_bench *const builtin[] = {
    &kb__bench_qkv_gemm,
    &kb__bench_qkv_gemm_multi_pe,
    &kb__bench_va_offset,
    &kb__bench_vector_add,
    &kb__bench_softmax,
    &kb__bench_matmul,
    &kb__bench_layernorm,
    &kb__bench_ccl_allreduce,
    &kb__bench_ccl_reduce_scatter,
    &kb__bench_ccl_all_gather,
    &kb__bench_ccl_broadcast,
    &kb__bench_ccl_reduce,
    &kb__bench_ccl_all_to_all,
    &kb__bench_hello_send,
    &kb__bench_tp_mlp,
    &kb__bench_transformer,
};

#define N_BUILTIN ((int)(sizeof builtin / sizeof builtin[0]))

int kb_bench_count(void)
{
    return N_BUILTIN;
}

const kb_bench *kb_bench_at(int i)
{
    return i >= 0 && i < N_BUILTIN ? builtin[i] : NULL;
}

const kb_bench *kb_bench_find(const char *name)
{
    for (int i = 0; name && i < N_BUILTIN; i++)
        if (!strcmp(builtin[i]->name, name)) return builtin[i];
    return NULL;
}

const kb_bench *kb_bench_default(void)
{
    return builtin[0];
}
