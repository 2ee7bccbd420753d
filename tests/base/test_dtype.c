#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "base/dtype.h"
#include "kernel/tile_ref.h"

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static bool f16_is_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

Test(dtype, names_sizes_and_parse_round_trip)
{
    const char *names[] = {"f16", "bf16", "f32", "i32", "i8", "bool", "i16", "u8", "u16", "u32"};
    size_t sizes[] = {2, 2, 4, 4, 1, 1, 2, 1, 2, 4};
    cr_assert_eq(KB__DTYPE_COUNT, 10);
    for (int t = 0; t < KB__DTYPE_COUNT; t++) {
        kb__dtype got;
        cr_assert_str_eq(kb__dtype_name((kb__dtype)t), names[t]);
        cr_assert_eq(kb__dtype_size((kb__dtype)t), sizes[t]);
        cr_assert_eq(kb__dtype_parse(names[t], &got, NULL), 0);
        cr_assert_eq(got, (kb__dtype)t);
    }
    cr_assert_eq(kb__dtype_size((kb__dtype)99), 0);
    cr_assert_str_eq(kb__dtype_name((kb__dtype)-1), "invalid");
}

Test(dtype, parse_error_lists_the_valid_names)
{
    kb__err e;
    kb__dtype t;
    cr_assert_eq(kb__dtype_parse("float16", &t, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "'float16'"), "%s", e.msg);
    cr_assert(strstr(e.msg, "f16, bf16, f32, i32, i8, bool, i16, u8, u16, u32"), "%s", e.msg);
}

Test(dtype, f16_decode_matches_bit_field_formula_for_all_patterns)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kb__f16_to_f32((uint16_t)h);
        long double want = ref_f16_value((uint16_t)h);
        if (isnan(want))
            cr_assert(isnan(f), "pattern 0x%04x", h);
        else
            cr_assert_eq((long double)f, want, "pattern 0x%04x", h);
        if (!isnan(want)) cr_assert_eq(signbit(f) != 0, (h & 0x8000) != 0);
    }
}

Test(dtype, f16_to_f32_to_f16_round_trips_all_65536_patterns)
{
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = kb__f32_to_f16(kb__f16_to_f32((uint16_t)h));
        if (f16_is_nan((uint16_t)h))
            cr_assert(f16_is_nan(back), "NaN 0x%04x came back as 0x%04x", h, back);
        else
            cr_assert_eq(back, h, "0x%04x came back as 0x%04x", h, back);
    }
}

Test(dtype, f16_halfway_cases_round_to_even)
{
    for (uint32_t lo = 0; lo < 0x7bff; lo++) {
        long double mid = (ref_f16_value((uint16_t)lo) + ref_f16_value((uint16_t)(lo + 1))) / 2;
        float f = (float)mid;
        cr_assert_eq((long double)f, mid, "midpoint must be exact in f32");
        uint16_t even = (lo & 1) ? (uint16_t)(lo + 1) : (uint16_t)lo;
        cr_assert_eq(kb__f32_to_f16(f), even, "mid above 0x%04x", lo);
        cr_assert_eq(kb__f32_to_f16(-f), even | 0x8000);
        cr_assert_eq(kb__f32_to_f16(nextafterf(f, 0.0f)), lo, "just below mid of 0x%04x", lo);
        cr_assert_eq(kb__f32_to_f16(nextafterf(f, INFINITY)), lo + 1, "just above mid 0x%04x", lo);
    }
}

Test(dtype, f16_rounding_matches_nearest_grid_value_on_random_f32)
{
    ref_rng r = {42};
    for (int i = 0; i < 200000; i++) {
        /* exponents spread over the f16 range and a little beyond */
        uint32_t e = 100 + ref_next(&r) % 45, u = (ref_next(&r) & 0x807fffff) | (e << 23);
        float f = float_of(u);
        cr_assert_eq(kb__f32_to_f16(f), ref_round_f16(f), "f32 0x%08x", u);
    }
}

Test(dtype, f16_overflow_and_subnormals)
{
    cr_assert_eq(kb__f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(kb__f32_to_f16(65519.99f), 0x7bff);
    cr_assert_eq(kb__f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(kb__f32_to_f16(-1e10f), 0xfc00);
    cr_assert_eq(kb__f32_to_f16(INFINITY), 0x7c00);
    cr_assert_eq(kb__f32_to_f16(ldexpf(1, -24)), 0x0001);
    cr_assert_eq(kb__f32_to_f16(ldexpf(1, -25)), 0x0000);       /* tie to even: 0 */
    cr_assert_eq(kb__f32_to_f16(ldexpf(1.5f, -25)), 0x0001);    /* above the tie */
    cr_assert_eq(kb__f32_to_f16(ldexpf(3, -25)), 0x0002);       /* tie 1|2 -> 2 */
    cr_assert_eq(kb__f32_to_f16(ldexpf(1023, -24)), 0x03ff);    /* largest subnormal */
    cr_assert_eq(kb__f32_to_f16(ldexpf(2047, -25)), 0x0400);    /* tie rounds up to normal */
    cr_assert_eq(kb__f32_to_f16(float_of(0x00000001)), 0x0000); /* f32 subnormal */
    cr_assert_eq(kb__f32_to_f16(-0.0f), 0x8000);
    cr_assert(f16_is_nan(kb__f32_to_f16(NAN)));
    cr_assert(f16_is_nan(kb__f32_to_f16(float_of(0x7f800001)))); /* payload in low bits only */
}

Test(dtype, bf16_round_trips_all_patterns)
{
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = kb__f32_to_bf16(kb__bf16_to_f32((uint16_t)h));
        bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (nan)
            cr_assert((back & 0x7f80) == 0x7f80 && (back & 0x7f), "NaN 0x%04x -> 0x%04x", h, back);
        else
            cr_assert_eq(back, h);
    }
}

Test(dtype, bf16_rounding_matches_nearest_on_sampled_and_halfway_patterns)
{
    ref_rng r = {7};
    for (int i = 0; i < 200000; i++) {
        uint32_t u = ref_next(&r);
        if ((u & 0x7f800000) == 0x7f800000) continue;  /* inf / NaN covered below */
        if (i % 4 == 0) u = (u & 0xffff0000) | 0x8000; /* exact halfway case */
        cr_assert_eq(kb__f32_to_bf16(float_of(u)), ref_round_bf16(float_of(u)), "0x%08x", u);
    }
    cr_assert_eq(kb__f32_to_bf16(float_of(0x3f808000)), 0x3f80); /* tie, even stays */
    cr_assert_eq(kb__f32_to_bf16(float_of(0x3f818000)), 0x3f82); /* tie, odd goes up */
    cr_assert_eq(kb__f32_to_bf16(float_of(0x7f7fffff)), 0x7f80); /* FLT_MAX -> inf */
    cr_assert_eq(kb__f32_to_bf16(float_of(0x00000001)), 0x0000); /* tiny subnormal */
    cr_assert_eq(kb__f32_to_bf16(float_of(0x00018000)), 0x0002); /* subnormal tie */
    cr_assert_eq(kb__f32_to_bf16(-INFINITY), 0xff80);
    uint16_t n = kb__f32_to_bf16(float_of(0x7f800001));
    cr_assert((n & 0x7f80) == 0x7f80 && (n & 0x7f), "NaN stays NaN: 0x%04x", n);
}

Test(dtype, f64_to_half_types_round_once)
{
    /* 2^24 + 2^16 + 1 lies just above a bf16 halfway point; rounding through
     * f32 first would land exactly on it and tie down to 2^24. */
    double d = 16777216.0 + 65536.0 + 1.0;
    cr_assert_eq(kb__bf16_to_f32(kb__f64_to_bf16(d)), 16777216.0f + 131072.0f);
    cr_assert_eq(kb__f64_to_f16(2049.0), kb__f32_to_f16(2048.0f));
    cr_assert_eq(kb__f64_to_f16(2051.0), kb__f32_to_f16(2052.0f));
    cr_assert_eq(kb__f64_to_f16(1e300), 0x7c00);
    cr_assert_eq(kb__f64_to_bf16(-1e300), 0xff80);
    ref_rng r = {3};
    for (int i = 0; i < 50000; i++) {
        double v = ldexp(ref_uniform(&r, 1.0, 2.0), (int)(ref_next(&r) % 40) - 20);
        cr_assert_eq(kb__f64_to_f16(v), ref_round_f16(v));
        cr_assert_eq(kb__f64_to_bf16(v), ref_round_bf16(v));
    }
}

Test(dtype, float_to_int_truncates_and_saturates)
{
    float src[] = {-2.7f, 2.7f, 1e10f, -1e10f, NAN, 300.0f, -0.5f};
    int32_t i32[7];
    int8_t i8[7];
    cr_assert_eq(kb__dtype_convert(KB__I32, i32, KB__F32, src, 7), 0);
    cr_assert_eq(kb__dtype_convert(KB__I8, i8, KB__F32, src, 7), 0);
    int32_t want32[] = {-2, 2, INT32_MAX, INT32_MIN, 0, 300, 0};
    int8_t want8[] = {-2, 2, 127, -128, 0, 127, 0};
    for (int i = 0; i < 7; i++) {
        cr_assert_eq(i32[i], want32[i], "element %d", i);
        cr_assert_eq(i8[i], want8[i], "element %d", i);
    }
}

Test(dtype, bool_casts_test_against_zero)
{
    float f[] = {0.0f, -0.0f, NAN, 0.25f};
    int32_t n[] = {0, 5, -1, 256};
    uint8_t b[4];
    kb__dtype_convert(KB__BOOL, b, KB__F32, f, 4);
    cr_assert(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 1);
    kb__dtype_convert(KB__BOOL, b, KB__I32, n, 4);
    cr_assert(b[0] == 0 && b[1] == 1 && b[2] == 1 && b[3] == 1); /* 256 is true, not wrapped */
    uint8_t bb[2] = {1, 0};
    float back[2];
    kb__dtype_convert(KB__F32, back, KB__BOOL, bb, 2);
    cr_assert(back[0] == 1.0f && back[1] == 0.0f);
}

Test(dtype, int_casts_wrap_and_int_to_float_rounds_once)
{
    int32_t src[] = {300, -129, 16777217, 2049, 2051, 65520};
    int8_t i8[6];
    float f[6];
    uint16_t h[6];
    kb__dtype_convert(KB__I8, i8, KB__I32, src, 6);
    cr_assert_eq(i8[0], 44);
    cr_assert_eq(i8[1], 127);
    kb__dtype_convert(KB__F32, f, KB__I32, src, 6);
    cr_assert_eq(f[2], 16777216.0f);
    kb__dtype_convert(KB__F16, h, KB__I32, src, 6);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(h[i], ref_round_f16(src[i]), "element %d", i);
    cr_assert_eq(h[5], 0x7c00); /* 65520 -> inf */
}

Test(dtype, convert_between_all_pairs_matches_reference)
{
    ref_rng r = {11};
    for (int s = 0; s < KB__DTYPE_COUNT; s++) {
        char src[64 * 4], dst[64 * 4];
        ref_fill(&r, (kb__dtype)s, src, 64, -100, 100);
        for (int d = 0; d < KB__DTYPE_COUNT; d++) {
            cr_assert_eq(kb__dtype_convert((kb__dtype)d, dst, (kb__dtype)s, src, 64), 0);
            for (int i = 0; i < 64; i++) {
                double v = ref_get((kb__dtype)s, src, i);
                /* int -> int wraps (a negative to unsigned); the rest round or saturate */
                bool wrap = kb__dtype_is_int((kb__dtype)s) && kb__dtype_is_int((kb__dtype)d) &&
                            d != KB__BOOL;
                double want =
                    wrap ? ref_wrap((kb__dtype)d, (int64_t)v) : ref_round((kb__dtype)d, v);
                cr_assert_eq(ref_get((kb__dtype)d, dst, i), want, "%s -> %s element %d",
                             kb__dtype_name((kb__dtype)s), kb__dtype_name((kb__dtype)d), i);
            }
        }
    }
}

Test(dtype, convert_rejects_invalid_dtype)
{
    float a = 1, b;
    cr_assert_eq(kb__dtype_convert((kb__dtype)17, &b, KB__F32, &a, 1), KB_EINVAL);
    cr_assert_eq(kb__dtype_convert(KB__F32, &b, (kb__dtype)-3, &a, 1), KB_EINVAL);
}

Test(dtype, narrow_and_unsigned_integers_wrap_saturate_and_extend)
{
    int32_t src[4] = {-1, 300, 70000, -40000};
    uint8_t u8[4];
    uint16_t u16[4];
    int16_t i16[4];
    uint32_t u32[4];
    kb__dtype_convert(KB__U8, u8, KB__I32, src, 4);
    kb__dtype_convert(KB__U16, u16, KB__I32, src, 4);
    kb__dtype_convert(KB__I16, i16, KB__I32, src, 4);
    kb__dtype_convert(KB__U32, u32, KB__I32, src, 4);
    for (int i = 0; i < 4; i++) { /* two's-complement wrap: low bits kept */
        cr_assert_eq(u8[i], (uint8_t)((uint32_t)src[i] & 0xffu));
        cr_assert_eq(u16[i], (uint16_t)((uint32_t)src[i] & 0xffffu));
        cr_assert_eq((uint16_t)i16[i], (uint16_t)((uint32_t)src[i] & 0xffffu));
        cr_assert_eq(u32[i], (uint32_t)src[i]);
    }
    /* u32 zero-extends back to f32 (4294967295 rounds to 2^32) */
    float f[4];
    kb__dtype_convert(KB__F32, f, KB__U32, u32, 4);
    cr_assert_eq(f[0], 4294967296.0f);
    cr_assert_eq(f[1], 300.0f);
    /* float -> unsigned saturates: negatives to 0, large to the max */
    float g[4] = {-5.5f, 1e10f, 65535.9f, NAN};
    kb__dtype_convert(KB__U32, u32, KB__F32, g, 4);
    kb__dtype_convert(KB__U16, u16, KB__F32, g, 4);
    cr_assert_eq(u32[0], 0u);
    cr_assert_eq(u32[1], 4294967295u);
    cr_assert_eq(u32[2], 65535u);
    cr_assert_eq(u32[3], 0u);
    cr_assert_eq(u16[1], 65535);
    cr_assert_eq(u16[2], 65535);
    uint8_t one[4];
    cr_assert_eq(kb__dtype_from_f64(KB__I16, -1e9, one), 0);
    int16_t s16;
    memcpy(&s16, one, 2);
    cr_assert_eq(s16, -32768);
    cr_assert(kb__dtype_is_unsigned(KB__U8) && kb__dtype_is_unsigned(KB__BOOL) &&
              !kb__dtype_is_unsigned(KB__I16));
}
