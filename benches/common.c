/*
 * common.c — helpers shared by the built-in benches (see internal.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "internal.h"

void kb__bench_fill(float *x, size_t n, uint64_t seed, double lo, double hi)
{
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)(lo + (hi - lo) * u);
    }
}

void kb__bench_round(float *x, size_t n, kb_dtype dtype)
{
    for (size_t i = 0; i < n; i++) {
        if (dtype == KB_F16) x[i] = kb__f16_to_f32(kb__f32_to_f16(x[i]));
        if (dtype == KB_BF16) x[i] = kb__bf16_to_f32(kb__f32_to_bf16(x[i]));
    }
}

double kb__bench_max_err(const float *a, const float *b, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return NAN;
        if (d > e) e = d;
    }
    return e;
}

int kb__bench_sips(kb_machine *m)
{
    return kb_get_device(m) < 0 ? 1 : 0;
}

int kb__bench_tensor(kb_machine *m, const char *name, int ndim, const int64_t *shape,
                     kb_dtype dtype, const kb_policy *p, const float *host, kb_tensor *out)
{
    if (!host) return kb_zeros(m, name, ndim, shape, dtype, p, out);
    int rc = kb_empty(m, name, ndim, shape, dtype, p, out);
    size_t n = (size_t)shape[0] * (size_t)(ndim == 2 ? shape[1] : 1);
    if (!rc) rc = kb_copy_from_host(m, *out, host, n * sizeof(float), KB_F32);
    return rc;
}

int kb__bench_read(kb_machine *m, kb_tensor t, float *host, size_t n)
{
    return kb_copy_to_host(m, t, host, n * sizeof(float), KB_F32);
}

int kb__bench_launch(kb_machine *m, const char *name, tl_kernel_fn fn, const kb_arg *args,
                     int n_args)
{
    kb_launch_opts lo = {{0, 0, 0}, kb_get_device(m)};
    kb_launch_id id;
    int rc = kb_launch(m, name, fn, &lo, args, n_args, &id);
    return rc ? rc : kb_wait(m, id);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* acc + A[m0:, :] @ B[:, n0:] for one output tile. */
static tl_tile gemm_tile(tl_ctx *k, tl_tensor *a, tl_tensor *b, int64_t m0, int64_t n0, int64_t bm,
                         int64_t bn, int64_t bk)
{
    int64_t M = tl_tensor_dim(a, 0), K = tl_tensor_dim(a, 1), N = tl_tensor_dim(b, 1);
    const unsigned chk = TL_CHECK(0) | TL_CHECK(1);
    const int order[2] = {1, 0};
    tl_block_ptr pa = tl_make_block_ptr(k, a, 2, (int64_t[]){M, K},
                                        (int64_t[]){tl_tensor_stride(a, 0), tl_tensor_stride(a, 1)},
                                        (int64_t[]){m0, 0}, (int64_t[]){bm, bk}, order);
    tl_block_ptr pb = tl_make_block_ptr(k, b, 2, (int64_t[]){K, N},
                                        (int64_t[]){tl_tensor_stride(b, 0), tl_tensor_stride(b, 1)},
                                        (int64_t[]){0, n0}, (int64_t[]){bk, bn}, order);
    tl_tile acc = tl_zeros(k, 2, (int64_t[]){bm, bn}, TL_F32);
    for (int64_t k0 = 0; k0 < K; k0 += bk) {
        uint64_t s = tl_scope_begin(k);
        tl_tile ta = tl_load_block(k, pa, chk, TL_PAD_ZERO);
        tl_tile tb = tl_load_block(k, pb, chk, TL_PAD_ZERO);
        tl_tile next = tl_dot(k, ta, tb, acc);
        tl_free(k, acc);
        acc = next;
        tl_scope_end(k, s, 1, &acc);
        pa = tl_advance(k, pa, (int64_t[]){0, bk});
        pb = tl_advance(k, pb, (int64_t[]){bk, 0});
    }
    return acc;
}

void kb__bench_local_gemm(tl_ctx *k, tl_tensor *a, tl_tensor *b, tl_tensor *c, int64_t bm,
                          int64_t bn, int64_t bk)
{
    int64_t M = tl_tensor_dim(a, 0), K = tl_tensor_dim(a, 1), N = tl_tensor_dim(b, 1);
    bm = min64(bm, M);
    bn = min64(bn, N);
    bk = min64(bk, K);
    for (int64_t m0 = 0; m0 < M; m0 += bm) {
        for (int64_t n0 = 0; n0 < N; n0 += bn) {
            uint64_t s = tl_scope_begin(k);
            tl_tile acc = gemm_tile(k, a, b, m0, n0, bm, bn, bk);
            tl_block_ptr pc =
                tl_make_block_ptr(k, c, 2, (int64_t[]){M, N},
                                  (int64_t[]){tl_tensor_stride(c, 0), tl_tensor_stride(c, 1)},
                                  (int64_t[]){m0, n0}, (int64_t[]){bm, bn}, (int[]){1, 0});
            tl_store_block(k, pc, acc, TL_CHECK(0) | TL_CHECK(1));
            tl_scope_end(k, s, 0, NULL);
        }
    }
}

typedef float ref_v4 __attribute__((vector_size(16)));

static ref_v4 v4_load(const float *p)
{
    ref_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void v4_store(float *p, ref_v4 v)
{
    memcpy(p, &v, sizeof v);
}

/* Rows i0 .. i0+nr-1 (nr <= 4) of c = a b into acc (4 rows of N). Each
 * element starts at 0 and adds a[i][p] * b[p][j] for p = 0, 1, ... one
 * product at a time, so the blocking (4 rows x 8 columns held in
 * registers over the whole of K) changes no result bit. */
static void ref_gemm_rows(const float *a, const float *b, float *acc, int64_t i0, int nr, int64_t K,
                          int64_t N)
{
    const float *ar[4];
    for (int q = 0; q < 4; q++)
        ar[q] = a + (i0 + (q < nr ? q : 0)) * K;
    int64_t n8 = N - N % 8;
    for (int64_t j = 0; j < n8; j += 8) {
        ref_v4 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0},
               c31 = {0};
        for (int64_t p = 0; p < K; p++) {
            ref_v4 b0 = v4_load(b + p * N + j), b1 = v4_load(b + p * N + j + 4);
            float a0 = ar[0][p], a1 = ar[1][p], a2 = ar[2][p], a3 = ar[3][p];
            c00 += a0 * b0;
            c01 += a0 * b1;
            c10 += a1 * b0;
            c11 += a1 * b1;
            c20 += a2 * b0;
            c21 += a2 * b1;
            c30 += a3 * b0;
            c31 += a3 * b1;
        }
        ref_v4 c[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
        for (int q = 0; q < 4; q++) {
            v4_store(acc + q * N + j, c[2 * q]);
            v4_store(acc + q * N + j + 4, c[2 * q + 1]);
        }
    }
    for (int64_t j = n8; j < N; j++)
        for (int q = 0; q < 4; q++) {
            float c = 0.0f;
            for (int64_t p = 0; p < K; p++)
                c += ar[q][p] * b[p * N + j];
            acc[q * N + j] = c;
        }
}

int kb__bench_ref_gemm(const float *a, const float *b, float *c, int64_t M, int64_t K, int64_t N)
{
    float *acc = malloc((size_t)(4 * N) * sizeof *acc);
    if (!acc) return KB_ENOMEM;
    for (int64_t i = 0; i < M; i += 4) {
        int nr = M - i < 4 ? (int)(M - i) : 4;
        ref_gemm_rows(a, b, acc, i, nr, K, N);
        memcpy(c + i * N, acc, (size_t)((int64_t)nr * N) * sizeof *c);
    }
    free(acc);
    return 0;
}

int kb__bench_alloc(size_t n, float **p0, ...)
{
    float **ps[9];
    int np = 0;
    va_list ap;
    va_start(ap, p0);
    for (float **p = p0; p && np < 9; p = va_arg(ap, float **))
        ps[np++] = p;
    va_end(ap);
    int ok = 1;
    for (int i = 0; i < np; i++)
        ok &= (*ps[i] = calloc(n ? n : 1, sizeof(float))) != NULL;
    if (ok) return 0;
    for (int i = 0; i < np; i++) {
        free(*ps[i]);
        *ps[i] = NULL;
    }
    return KB_ENOMEM;
}

void kb__bench_free(float *p0, ...)
{
    va_list ap;
    va_start(ap, p0);
    for (float *p = p0; p; p = va_arg(ap, float *))
        free(p);
    va_end(ap);
}

