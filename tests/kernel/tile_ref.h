/*
 * tests/kernel/tile_ref.h — independent host reference for the tile tests.
 *
 * Nothing here calls the code under test: values are decoded from their bit
 * fields with ldexp, rounding to f16/bf16 picks the nearest grid value by
 * comparing long double distances (ties to the even bit pattern), and
 * arithmetic runs in double (for +, -, *, / the double result rounded once
 * more equals the correctly rounded narrow result, since 53 >= 2p + 2).
 */
#ifndef KB_TESTS_TILE_REF_H
#define KB_TESTS_TILE_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"

typedef struct ref_rng {
    uint64_t s;
} ref_rng;

static inline uint32_t ref_next(ref_rng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(r->s >> 32);
}

/* Uniform in [lo, hi). */
static inline double ref_uniform(ref_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * (ref_next(r) / 4294967296.0);
}

static inline long double ref_f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    long double v;
    if (e == 0x1f)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexpl((long double)m, -24);
    else
        v = ldexpl((long double)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static inline long double ref_bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4); /* a bf16 is by definition the top half of an f32 */
    return f;
}

/* Nearest f16 bit pattern to v, ties to even; magnitude >= 65520 is inf. */
static inline uint16_t ref_round_f16(long double v)
{
    if (isnan(v)) return 0x7e00;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    long double a = fabsl(v);
    if (a >= 65520.0L) return sign | 0x7c00;
    unsigned lo = 0, hi = 0x7bff; /* largest pattern with value <= a */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (ref_f16_value((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    long double vl = ref_f16_value((uint16_t)lo);
    long double vh = lo == 0x7bff ? 65536.0L : ref_f16_value((uint16_t)(lo + 1));
    unsigned pick = lo;
    if (a - vl > vh - a || (a - vl == vh - a && (lo & 1))) pick = lo + 1;
    return (uint16_t)(sign | pick);
}

/* Nearest bf16 to v, ties to even (v must be within f32's exponent range or
 * beyond it, where it saturates to inf). */
static inline uint16_t ref_round_bf16(long double v)
{
    if (isnan(v)) return 0x7fc0;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    long double a = fabsl(v);
    float f = (float)a; /* only to locate the neighbourhood */
    uint32_t u;
    memcpy(&u, &f, 4);
    unsigned lo = u >> 16;
    while (lo > 0 && ref_bf16_value((uint16_t)lo) > a)
        lo--;
    while (lo < 0x7f7f && ref_bf16_value((uint16_t)(lo + 1)) <= a)
        lo++;
    if (lo >= 0x7f80) return sign | 0x7f80;
    long double vl = ref_bf16_value((uint16_t)lo);
    long double vh = lo == 0x7f7f ? ldexpl(1.0L, 128) : ref_bf16_value((uint16_t)(lo + 1));
    unsigned pick = lo;
    if (a - vl > vh - a || (a - vl == vh - a && (lo & 1))) pick = lo + 1;
    return (uint16_t)(sign | pick);
}

/* Element i of a buffer of dtype t, as a double (exact for every dtype). */
static inline double ref_get(kb__dtype t, const void *p, size_t i)
{
    switch (t) {
    case KB__F16:
        return (double)ref_f16_value(((const uint16_t *)p)[i]);
    case KB__BF16:
        return (double)ref_bf16_value(((const uint16_t *)p)[i]);
    case KB__F32:
        return ((const float *)p)[i];
    case KB__I32:
        return ((const int32_t *)p)[i];
    case KB__I8:
        return ((const int8_t *)p)[i];
    case KB__I16:
        return ((const int16_t *)p)[i];
    case KB__U8:
        return ((const uint8_t *)p)[i];
    case KB__U16:
        return ((const uint16_t *)p)[i];
    case KB__U32:
        return ((const uint32_t *)p)[i];
    default:
        return ((const uint8_t *)p)[i] != 0;
    }
}

/* Range of integer dtype t (bool: 0..1). */
static inline void ref_int_range(kb__dtype t, double *lo, double *hi)
{
    switch (t) {
    case KB__I32:
        *lo = -2147483648.0, *hi = 2147483647.0;
        break;
    case KB__I16:
        *lo = -32768.0, *hi = 32767.0;
        break;
    case KB__I8:
        *lo = -128.0, *hi = 127.0;
        break;
    case KB__U32:
        *lo = 0, *hi = 4294967295.0;
        break;
    case KB__U16:
        *lo = 0, *hi = 65535.0;
        break;
    case KB__U8:
        *lo = 0, *hi = 255.0;
        break;
    default:
        *lo = 0, *hi = 1;
        break;
    }
}

/* v rounded / wrapped / truncated into dtype t as a cast would, as a double. */
static inline double ref_round(kb__dtype t, double v)
{
    switch (t) {
    case KB__F16:
        return (double)ref_f16_value(ref_round_f16(v));
    case KB__BF16:
        return (double)ref_bf16_value(ref_round_bf16(v));
    case KB__F32:
        return (float)v;
    case KB__BOOL:
        return v != 0.0;
    default: {
        if (isnan(v)) return 0;
        double tr = trunc(v), lo, hi;
        ref_int_range(t, &lo, &hi);
        return tr < lo ? lo : tr > hi ? hi : tr;
    }
    }
}

/* Integer v wrapped to the width of t (bool keeps bit 0, as an i1). */
static inline double ref_wrap(kb__dtype t, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (t) {
    case KB__I32:
        return (double)(int32_t)(uint32_t)u;
    case KB__I16:
        return (double)(int16_t)(uint16_t)u;
    case KB__I8:
        return (double)(int8_t)(uint8_t)u;
    case KB__U32:
        return (double)(uint32_t)u;
    case KB__U16:
        return (double)(uint16_t)u;
    case KB__U8:
        return (double)(uint8_t)u;
    default:
        return (double)(v & 1);
    }
}

/* Stores double v (already representable in t) as element i. */
static inline void ref_put(kb__dtype t, void *p, size_t i, double v)
{
    switch (t) {
    case KB__F16:
        ((uint16_t *)p)[i] = ref_round_f16(v);
        break;
    case KB__BF16:
        ((uint16_t *)p)[i] = ref_round_bf16(v);
        break;
    case KB__F32:
        ((float *)p)[i] = (float)v;
        break;
    case KB__I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case KB__I8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    case KB__I16:
        ((int16_t *)p)[i] = (int16_t)v;
        break;
    case KB__U8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case KB__U16:
        ((uint16_t *)p)[i] = (uint16_t)v;
        break;
    case KB__U32:
        ((uint32_t *)p)[i] = (uint32_t)v;
        break;
    default:
        ((uint8_t *)p)[i] = v != 0.0;
        break;
    }
}

/* Fills n elements with random values suited to t: floats in [lo, hi),
 * rounded to t; ints in [lo, hi] (clipped to the type); bools 0/1. */
static inline void ref_fill(ref_rng *r, kb__dtype t, void *p, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        double v;
        if (t == KB__BOOL)
            v = ref_next(r) & 1;
        else if (!kb__dtype_is_float(t))
            v = ref_round(t, floor(ref_uniform(r, lo, hi + 1)));
        else
            v = ref_round(t, ref_uniform(r, lo, hi));
        ref_put(t, p, i, v);
    }
}

/* Distance in units in the last place between two values of float dtype t
 * (0 when both are NaN or equal; large when signs or NaN-ness differ). */
static inline double ref_ulps(kb__dtype t, double got, double want)
{
    if (isnan(got) || isnan(want)) return isnan(got) && isnan(want) ? 0 : 1e30;
    if (got == want) return 0;
    int p = t == KB__F16 ? 11 : t == KB__BF16 ? 8 : 24;
    int emin = t == KB__F16 ? -14 : -126;
    double m = fmax(fabs(want), ldexp(1.0, emin));
    if (isinf(m)) return 1e30;
    int e;
    frexp(m, &e); /* m in [2^(e-1), 2^e) */
    return fabs(got - want) / ldexp(1.0, e - p);
}

#endif
