/*
 * tile_scan.c — inclusive scans (cumsum, cumprod) and counter-based random
 * numbers (rand, randn, randint) over tiles.
 *
 * Scans follow triton.language.standard's cumsum / cumprod: the input is
 * converted to the result dtype (bf16 -> f32; cumsum widens integers
 * narrower than 32 bits), then each group along the axis is combined in
 * index order (reverse: from the last element back), every partial rounded
 * to the result dtype, integers wrapping. A GPU's associative_scan combines
 * in a tree, so f16/f32 results may differ from it in the last bits.
 *
 * Random numbers are Triton's (triton/language/random.py) bit for bit:
 * Philox4x32 with 10 rounds of counter (offset, 0, 0, 0) and key (seed low
 * word, seed high word); rand is uint_to_uniform_float of the first word,
 * randn the Box-Muller transform of the first two (computed with the C
 * library's logf, sqrtf and cosf, so within an ulp of a GPU's), randint the
 * first word. The same seed and offset give the same number on every PE
 * and in every run. Cost: O(numel), no allocation.
 */
#include <math.h>
#include <string.h>

#include "kernel/tile_internal.h"

/* One combining step of the scan in the result dtype t; the store-and-load
 * round trip rounds a float partial (f16) or wraps an integer one. */
static void scan_group(kb__tile_op op, kb__dtype t, char *base, int64_t len, int64_t stride,
                       bool reverse)
{
    size_t es = kb__dtype_size(t);
    bool flt = kb__dtype_is_float(t);
    float facc = 0.0f;
    int64_t iacc = 0;
    for (int64_t j = 0; j < len; j++) {
        int64_t i = reverse ? len - 1 - j : j;
        char *p = base + (size_t)(i * stride) * es;
        if (flt) {
            float v;
            kb__dtype_load_f32(t, p, &v, 1);
            facc = j == 0 ? v : op == KB__OP_CUMSUM ? facc + v : facc * v;
            kb__dtype_store_f32(t, p, &facc, 1);
            kb__dtype_load_f32(t, p, &facc, 1);
        } else {
            int64_t v;
            kb__dtype_load_i64(t, p, &v, 1);
            iacc = j == 0                ? v
                   : op == KB__OP_CUMSUM ? (int64_t)((uint64_t)iacc + (uint64_t)v)
                                         : (int64_t)((uint64_t)iacc * (uint64_t)v);
            kb__dtype_store_i64(t, p, &iacc, 1);
            kb__dtype_load_i64(t, p, &iacc, 1);
        }
    }
}

int kb__tile_scan(kb__tile_op op, int axis, bool reverse, const kb__tile_desc *out, void *out_data,
                  const kb__tile_desc *x, const void *x_data, kb__err *err)
{
    kb__tile_desc want;
    int rc, ax = 0;
    if ((rc = kb__tile_scan_infer(op, x, axis, &want, err)) ||
        (rc = kb__tile_check_out(op, out, &want, err)) ||
        (rc = kb__tile_check_ptr(op, "x", x_data, err)) ||
        (rc = kb__tile_check_ptr(op, "out", out_data, err)))
        return rc;
    if (x->ndim > 0) kb__tile_norm_axis(op, x, axis, &ax, err);
    kb__dtype_convert(out->dtype, out_data, x->dtype, x_data, (size_t)kb__tile_numel(x));
    int64_t outer, len, inner;
    kb__tile_axis_split(x, x->ndim > 0 ? ax : KB__TILE_AXIS_ALL, &outer, &len, &inner);
    size_t es = kb__dtype_size(out->dtype);
    char *o = out_data;
    for (int64_t g = 0; g < outer; g++)
        for (int64_t i = 0; i < inner; i++)
            scan_group(op, out->dtype, o + (size_t)(g * len * inner + i) * es, len, inner, reverse);
    return 0;
}

/* ---- random numbers ------------------------------------------------------- */

void kb__philox4x32(uint32_t c[4], const uint32_t k[2], int n_rounds)
{
    uint32_t k0 = k[0], k1 = k[1];
    for (int r = 0; r < n_rounds; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0]; /* PHILOX_ROUND_A */
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2]; /* PHILOX_ROUND_B */
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
        c[1] = (uint32_t)p1;
        c[3] = (uint32_t)p0;
        c[0] = n0;
        c[2] = n2;
        k0 += 0x9E3779B9u; /* PHILOX_KEY_A */
        k1 += 0xBB67AE85u; /* PHILOX_KEY_B */
    }
}

/* Triton's uint_to_uniform_float for a 32-bit word: [0, 1) in f32. */
static float uniform_of(uint32_t u)
{
    int32_t x;
    memcpy(&x, &u, 4);
    int64_t v = x < 0 ? -(int64_t)x - 1 : x;
    return (float)v * 4.6566127342e-10f;
}

static float normal_of(uint32_t w0, uint32_t w1)
{
    float u1 = uniform_of(w0), u2 = uniform_of(w1);
    if (!(u1 > 1.0e-7f)) u1 = 1.0e-7f; /* tl.maximum(1.0e-7, u1) */
    float th = 6.283185307179586f * u2;
    float r = sqrtf(-2.0f * logf(u1));
    return r * cosf(th);
}

int kb__tile_rand(kb__tile_op op, uint64_t seed, const kb__tile_desc *out, void *out_data,
                  const kb__tile_desc *offsets, const void *offsets_data, kb__err *err)
{
    kb__tile_desc want;
    int rc;
    if ((rc = kb__tile_rand_infer(op, offsets, &want, err)) ||
        (rc = kb__tile_check_out(op, out, &want, err)) ||
        (rc = kb__tile_check_ptr(op, "offsets", offsets_data, err)) ||
        (rc = kb__tile_check_ptr(op, "out", out_data, err)))
        return rc;
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int64_t n = kb__tile_numel(offsets);
    for (int64_t i = 0; i < n; i++) {
        uint32_t c[4] = {0, 0, 0, 0};
        memcpy(&c[0], (const char *)offsets_data + 4 * i, 4); /* bitcast to u32 */
        kb__philox4x32(c, key, 10);
        if (op == KB__OP_RANDINT) {
            memcpy((char *)out_data + 4 * i, &c[0], 4);
            continue;
        }
        float f = op == KB__OP_RAND ? uniform_of(c[0]) : normal_of(c[0], c[1]);
        memcpy((char *)out_data + 4 * i, &f, 4);
    }
    return 0;
}
