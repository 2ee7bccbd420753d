/*
 * values.c — reproducible test inputs (values.h).
 */
#include "support/values.h"

#include <criterion/criterion.h>
#include <stdlib.h>

uint64_t kb_test_mix(uint64_t seed, int64_t i)
{
    uint64_t s = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 1) * 0xBF58476D1CE4E5B9ull;
    s ^= s >> 31;
    s *= 0x94D049BB133111EBull;
    s ^= s >> 29;
    return s;
}

float kb_test_val(uint64_t seed, int64_t i, double scale)
{
    return (float)(((double)(kb_test_mix(seed, i) % 2001) / 1000.0 - 1.0) * scale);
}

float *kb_test_array(uint64_t seed, int64_t n, double scale, double offset)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    cr_assert_not_null(a);
    for (int64_t i = 0; i < n; i++)
        a[i] = kb_test_val(seed, i, scale) + (float)offset;
    return a;
}

float *kb_test_int_array(uint64_t seed, int64_t n, int lo, int hi, float scale)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    cr_assert_not_null(a);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)((int64_t)(kb_test_mix(seed, i) % (uint64_t)(hi - lo + 1)) + lo) * scale;
    return a;
}
