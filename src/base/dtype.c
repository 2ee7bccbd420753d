/*
 * dtype.c — element type table, IEEE half / bfloat16 rounding, bulk casts.
 *
 * Invariants: every conversion to f16/bf16 is a single round-to-nearest-even
 * of the exact source value (doubles and large integers go through a
 * round-to-odd f32, which has enough spare bits for that to hold); NaN
 * inputs give quiet NaNs. Cost: a few integer operations per element.
 */
#include "base/dtype.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
    int bits;
    kb__dtype_kind kind;
    bool is_unsigned;
    double lo, hi; /* integer range (saturation bounds of a float cast) */
} dtype_table[KB__DTYPE_COUNT] = {
    [KB__F16] = {"f16", 2, 16, KB__KIND_FLOAT, false, 0, 0},
    [KB__BF16] = {"bf16", 2, 16, KB__KIND_FLOAT, false, 0, 0},
    [KB__F32] = {"f32", 4, 32, KB__KIND_FLOAT, false, 0, 0},
    [KB__I32] = {"i32", 4, 32, KB__KIND_INT, false, -2147483648.0, 2147483647.0},
    [KB__I8] = {"i8", 1, 8, KB__KIND_INT, false, -128.0, 127.0},
    [KB__BOOL] = {"bool", 1, 1, KB__KIND_BOOL, true, 0, 1},
    [KB__I16] = {"i16", 2, 16, KB__KIND_INT, false, -32768.0, 32767.0},
    [KB__U8] = {"u8", 1, 8, KB__KIND_INT, true, 0, 255.0},
    [KB__U16] = {"u16", 2, 16, KB__KIND_INT, true, 0, 65535.0},
    [KB__U32] = {"u32", 4, 32, KB__KIND_INT, true, 0, 4294967295.0},
};

bool kb__dtype_valid(int t)
{
    return t >= 0 && t < KB__DTYPE_COUNT;
}

size_t kb__dtype_size(kb__dtype t)
{
    return kb__dtype_valid(t) ? dtype_table[t].size : 0;
}

const char *kb__dtype_name(kb__dtype t)
{
    return kb__dtype_valid(t) ? dtype_table[t].name : "invalid";
}

kb__dtype_kind kb__dtype_kind_of(kb__dtype t)
{
    assert(kb__dtype_valid(t));
    return dtype_table[t].kind;
}

bool kb__dtype_is_float(kb__dtype t)
{
    return kb__dtype_valid(t) && dtype_table[t].kind == KB__KIND_FLOAT;
}

bool kb__dtype_is_int(kb__dtype t)
{
    return kb__dtype_valid(t) && dtype_table[t].kind != KB__KIND_FLOAT;
}

bool kb__dtype_is_unsigned(kb__dtype t)
{
    return kb__dtype_valid(t) && dtype_table[t].is_unsigned;
}

int kb__dtype_bits(kb__dtype t)
{
    return kb__dtype_valid(t) ? dtype_table[t].bits : 0;
}

int kb__dtype_parse(const char *name, kb__dtype *out, kb__err *err)
{
    for (int t = 0; name && t < KB__DTYPE_COUNT; t++) {
        if (strcmp(name, dtype_table[t].name) == 0) {
            *out = (kb__dtype)t;
            return 0;
        }
    }
    return kb__err_set(err, KB_EINVAL,
                       "unknown dtype '%s': expected one of f16, bf16, f32, i32, i8, bool, i16, "
                       "u8, u16, u32",
                       name ? name : "(null)");
}

/* ---- scalar float conversions ------------------------------------------- */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounds m >> shift to nearest even (shift >= 1). */
static uint32_t shift_rne(uint32_t m, int shift)
{
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return r;
}

uint16_t kb__f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    if (ax >= 0x477ff000) /* >= 65520 (halfway to 65536) rounds to inf; inf stays inf */
        return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000) {    /* below 2^-14: f16 subnormal or zero */
        if (ax <= 0x33000000) /* <= 2^-25: ties to even give 0 */
            return sign;
        uint32_t m = (ax & 0x7fffff) | 0x800000;
        int shift = 126 - (int)(ax >> 23); /* 14..24 */
        return (uint16_t)(sign | shift_rne(m, shift));
    }
    /* Normal: rebias the exponent by 127 - 15; a carry out of the mantissa
     * correctly bumps the exponent. */
    return (uint16_t)(sign | shift_rne(ax - 0x38000000, 13));
}

float kb__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f;
    uint32_t m = h & 0x3ff;
    if (e == 0x1f) return f32_from_bits(sign | 0x7f800000 | (m << 13));
    if (e == 0) {
        float v = (float)m * 0x1p-24f; /* exact: m < 2^10 */
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t kb__f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    /* Adding 0x7fff plus the kept lsb rounds to nearest even; a carry into
     * the exponent gives the next binade or inf, both correct. */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float kb__bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/* d rounded to f32 toward zero, with the lsb forced to 1 when inexact
 * ("round to odd"). Rounding that result to a format with at least two fewer
 * significand bits equals rounding d directly. Overflow gives FLT_MAX with
 * the lsb set, which rounds on to inf in f16 and bf16 as it must. */
static float f64_to_f32_round_odd(double d)
{
    if (isnan(d) || isinf(d)) return (float)d;
    float f = (float)d;
    if (isinf(f) || fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    if ((double)f != d) f = f32_from_bits(f32_bits(f) | 1u);
    return f;
}

uint16_t kb__f64_to_f16(double d)
{
    return kb__f32_to_f16(f64_to_f32_round_odd(d));
}

uint16_t kb__f64_to_bf16(double d)
{
    return kb__f32_to_bf16(f64_to_f32_round_odd(d));
}

int32_t kb__f64_to_i32_sat(double d)
{
    if (isnan(d)) return 0;
    if (d >= 2147483647.0) return INT32_MAX;
    if (d <= -2147483648.0) return INT32_MIN;
    return (int32_t)d; /* C conversion truncates toward zero */
}

int8_t kb__f64_to_i8_sat(double d)
{
    if (isnan(d)) return 0;
    if (d >= 127.0) return INT8_MAX;
    if (d <= -128.0) return INT8_MIN;
    return (int8_t)d;
}

/* d truncated toward zero and saturated to the range of integer type t
 * (NaN gives 0); exact in int64 for every integer type we have. */
static int64_t f64_to_int_sat(kb__dtype t, double d)
{
    if (isnan(d)) return 0;
    if (d >= dtype_table[t].hi) return (int64_t)dtype_table[t].hi;
    if (d <= dtype_table[t].lo) return (int64_t)dtype_table[t].lo;
    return (int64_t)d;
}

/* Stores integer v into element i of dst (type t), wrapping to its width. */
static void int_store1(kb__dtype t, void *dst, size_t i, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (t) {
    case KB__I32:
    case KB__U32: {
        uint32_t w = (uint32_t)u;
        memcpy((char *)dst + 4 * i, &w, 4);
        break;
    }
    case KB__I16:
    case KB__U16: {
        uint16_t w = (uint16_t)u;
        memcpy((char *)dst + 2 * i, &w, 2);
        break;
    }
    case KB__BOOL:
        ((uint8_t *)dst)[i] = (uint8_t)(u & 1u);
        break;
    default: /* I8, U8 */
        ((uint8_t *)dst)[i] = (uint8_t)u;
        break;
    }
}

/* Element i of src (integer type t), sign- or zero-extended. */
static int64_t int_load1(kb__dtype t, const void *src, size_t i)
{
    switch (t) {
    case KB__I32:
        return ((const int32_t *)src)[i];
    case KB__U32:
        return ((const uint32_t *)src)[i];
    case KB__I16:
        return ((const int16_t *)src)[i];
    case KB__U16:
        return ((const uint16_t *)src)[i];
    case KB__I8:
        return ((const int8_t *)src)[i];
    case KB__U8:
        return ((const uint8_t *)src)[i];
    default: /* BOOL */
        return ((const uint8_t *)src)[i] != 0;
    }
}

int kb__dtype_from_f64(kb__dtype t, double v, void *dst)
{
    uint16_t h;
    float f;
    switch (t) {
    case KB__F16:
    case KB__BF16:
        h = t == KB__F16 ? kb__f64_to_f16(v) : kb__f64_to_bf16(v);
        memcpy(dst, &h, 2);
        return 0;
    case KB__F32:
        f = (float)v;
        memcpy(dst, &f, 4);
        return 0;
    case KB__BOOL:
        *(uint8_t *)dst = v != 0.0; /* NaN is true, as a cast to bool */
        return 0;
    default:
        if (!kb__dtype_valid(t)) return KB_EINVAL;
        int_store1(t, dst, 0, f64_to_int_sat(t, v));
        return 0;
    }
}

/* ---- bulk loads and stores ----------------------------------------------- */

void kb__dtype_load_f32(kb__dtype t, const void *src, float *dst, size_t n)
{
    switch (t) {
    case KB__F16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++)
            dst[i] = kb__f16_to_f32(s[i]);
        break;
    }
    case KB__BF16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++)
            dst[i] = kb__bf16_to_f32(s[i]);
        break;
    }
    case KB__F32:
        memmove(dst, src, n * sizeof(float));
        break;
    default: /* integers and bool: exact in int64, one rounding to f32 */
        assert(kb__dtype_valid(t));
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)int_load1(t, src, i);
        break;
    }
}

void kb__dtype_store_f32(kb__dtype t, void *dst, const float *src, size_t n)
{
    switch (t) {
    case KB__F16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = kb__f32_to_f16(src[i]);
        break;
    }
    case KB__BF16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = kb__f32_to_bf16(src[i]);
        break;
    }
    case KB__F32:
        memmove(dst, src, n * sizeof(float));
        break;
    case KB__BOOL: {
        uint8_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = src[i] != 0.0f; /* NaN != 0 is true */
        break;
    }
    default: /* integers: truncate and saturate */
        assert(kb__dtype_valid(t));
        for (size_t i = 0; i < n; i++)
            int_store1(t, dst, i, f64_to_int_sat(t, src[i]));
        break;
    }
}

void kb__dtype_load_i64(kb__dtype t, const void *src, int64_t *dst, size_t n)
{
    if (kb__dtype_is_int(t)) {
        for (size_t i = 0; i < n; i++)
            dst[i] = int_load1(t, src, i);
        return;
    }
    /* floats: truncation with the casting rules (to i32's range) */
    float buf[256];
    for (size_t i = 0; i < n; i += 256) {
        size_t k = n - i < 256 ? n - i : 256;
        kb__dtype_load_f32(t, (const char *)src + i * kb__dtype_size(t), buf, k);
        for (size_t j = 0; j < k; j++)
            dst[i + j] = kb__f64_to_i32_sat(buf[j]);
    }
}

void kb__dtype_store_i64(kb__dtype t, void *dst, const int64_t *src, size_t n)
{
    switch (t) {
    case KB__F16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = kb__f64_to_f16((double)src[i]);
        break;
    }
    case KB__BF16: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = kb__f64_to_bf16((double)src[i]);
        break;
    }
    case KB__F32: {
        float *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = (float)src[i]; /* |src| < 2^53 here: one rounding */
        break;
    }
    default:
        assert(kb__dtype_valid(t));
        for (size_t i = 0; i < n; i++)
            int_store1(t, dst, i, src[i]);
        break;
    }
}

/* ---- casts ---------------------------------------------------------------- */

#define CHUNK 256

static void convert_via_f32(kb__dtype dt, char *dst, kb__dtype st, const char *src, size_t n)
{
    float buf[CHUNK];
    size_t ds = kb__dtype_size(dt), ss = kb__dtype_size(st);
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        kb__dtype_load_f32(st, src + i * ss, buf, k);
        kb__dtype_store_f32(dt, dst + i * ds, buf, k);
    }
}

static void convert_from_int(kb__dtype dt, char *dst, kb__dtype st, const char *src, size_t n)
{
    int64_t buf[CHUNK];
    size_t ds = kb__dtype_size(dt), ss = kb__dtype_size(st);
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        kb__dtype_load_i64(st, src + i * ss, buf, k);
        if (dt == KB__BOOL) /* a cast to bool is x != 0, not a wrap */
            for (size_t j = 0; j < k; j++)
                buf[j] = buf[j] != 0;
        kb__dtype_store_i64(dt, dst + i * ds, buf, k);
    }
}

int kb__dtype_convert(kb__dtype dst_dtype, void *dst, kb__dtype src_dtype, const void *src,
                      size_t n)
{
    if (!kb__dtype_valid(dst_dtype) || !kb__dtype_valid(src_dtype)) return KB_EINVAL;
    if (dst_dtype == src_dtype) {
        if (dst != src) memmove(dst, src, n * kb__dtype_size(dst_dtype));
        return 0;
    }
    /* Every float value converts exactly to f32 and every float -> non-f32
     * rounding from f32 is the single rounding of the exact value, so floats
     * go through f32. Integers keep their exact value through int64. */
    if (kb__dtype_is_float(src_dtype))
        convert_via_f32(dst_dtype, dst, src_dtype, src, n);
    else
        convert_from_int(dst_dtype, dst, src_dtype, src, n);
    return 0;
}
