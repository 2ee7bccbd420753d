/*
 * tile_dot.c — tl.dot: out = acc + a @ b on 2-D tiles, or batched on 3-D
 * tiles ([B, M, K] x [B, K, N]: B independent products).
 *
 * Rules (tile_infer.c): a [M, K] and b [K, N] of one dtype; f16, bf16 and
 * f32 inputs accumulate into f32, i8 into i32; acc, if given, has the
 * result's dtype and shape. Numerics:
 *   - f16/bf16 operands are widened exactly to f32 in the workspace and
 *     multiplied with cblas_sgemm, accumulating in IEEE f32 onto acc;
 *   - f32 operands go to cblas_sgemm directly: IEEE f32 products and sums.
 *     Triton's default input_precision="tf32" on NVIDIA GPUs is not
 *     modelled (it would round operands to 10 mantissa bits);
 *   - i8 x i8 accumulates exactly into i32 (modulo 2^32) with a plain loop.
 * The summation order inside sgemm is OpenBLAS's: results match a naive
 * triple loop within the usual K-dependent f32 rounding bound.
 * Cost: O(M*N*K); the f16/bf16 widening is O(M*K + K*N).
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tile_internal.h"

size_t kb__tile_dot_workspace_bytes(const kb__tile_desc *a, const kb__tile_desc *b)
{
    if (kb__tile_desc_check(a, NULL) || kb__tile_desc_check(b, NULL)) return 0;
    if (a->dtype != KB__F16 && a->dtype != KB__BF16) return 0;
    return (size_t)(kb__tile_numel(a) + kb__tile_numel(b)) * sizeof(float);
}

static void dot_i8(int64_t m, int64_t n, int64_t k, const int8_t *a, const int8_t *b,
                   const int32_t *acc, int32_t *out)
{
    /* Unsigned arithmetic: i32 accumulation wraps instead of overflowing. */
    uint32_t *o = (uint32_t *)out;
    if (!acc)
        memset(out, 0, (size_t)(m * n) * sizeof *out);
    else if (acc != out)
        memcpy(out, acc, (size_t)(m * n) * sizeof *out);
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) {
            uint32_t aip = (uint32_t)(int32_t)a[i * k + p];
            for (int64_t j = 0; j < n; j++)
                o[i * n + j] += aip * (uint32_t)(int32_t)b[p * n + j];
        }
}

static void dot_f32(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                    const float *acc, float *out)
{
    float beta = 0.0f;
    if (acc) {
        beta = 1.0f;
        if (acc != out) memcpy(out, acc, (size_t)(m * n) * sizeof *out);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k,
                b, (int)n, beta, out, (int)n);
}

int kb__tile_dot(const kb__tile_desc *out, void *out_data, const kb__tile_desc *a,
                 const void *a_data, const kb__tile_desc *b, const void *b_data,
                 const kb__tile_desc *acc, const void *acc_data, void *workspace,
                 size_t workspace_bytes, kb__err *err)
{
    kb__tile_desc want;
    int rc;
    if ((rc = kb__tile_dot_infer(a, b, acc, &want, err)) ||
        (rc = kb__tile_check_out(KB__OP_DOT, out, &want, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_DOT, "a", a_data, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_DOT, "b", b_data, err)) ||
        (acc && (rc = kb__tile_check_ptr(KB__OP_DOT, "acc", acc_data, err))) ||
        (rc = kb__tile_check_ptr(KB__OP_DOT, "out", out_data, err)))
        return rc;
    int o0 = a->ndim - 2; /* batched: [B, M, K] x [B, K, N], one product per batch */
    int64_t batch = o0 ? a->shape[0] : 1;
    int64_t m = a->shape[o0], k = a->shape[o0 + 1], n = b->shape[o0 + 1];
    size_t as = (size_t)(m * k), bs = (size_t)(k * n), os = (size_t)(m * n);
    if (a->dtype == KB__I8) {
        for (int64_t i = 0; i < batch; i++)
            dot_i8(m, n, k, (const int8_t *)a_data + i * as, (const int8_t *)b_data + i * bs,
                   acc ? (const int32_t *)acc_data + i * os : NULL, (int32_t *)out_data + i * os);
        return 0;
    }
    if (a->dtype == KB__F32) {
        for (int64_t i = 0; i < batch; i++)
            dot_f32(m, n, k, (const float *)a_data + i * as, (const float *)b_data + i * bs,
                    acc ? (const float *)acc_data + i * os : NULL, (float *)out_data + i * os);
        return 0;
    }
    size_t need = kb__tile_dot_workspace_bytes(a, b);
    float *ws = workspace;
    bool owned = !ws || workspace_bytes < need;
    if (owned && !(ws = malloc(need)))
        return kb__err_set(err, KB_ENOMEM,
                           "dot: cannot allocate %zu bytes of f32 workspace for "
                           "a [%lld, %lld] x b [%lld, %lld]",
                           need, (long long)m, (long long)k, (long long)k, (long long)n);
    float *wa = ws, *wb = ws + batch * m * k;
    kb__dtype_convert(KB__F32, wa, a->dtype, a_data, (size_t)batch * as);
    kb__dtype_convert(KB__F32, wb, b->dtype, b_data, (size_t)batch * bs);
    for (int64_t i = 0; i < batch; i++)
        dot_f32(m, n, k, wa + i * as, wb + i * bs, acc ? (const float *)acc_data + i * os : NULL,
                (float *)out_data + i * os);
    if (owned) free(ws);
    return 0;
}
