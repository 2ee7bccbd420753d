/*
 * support/values.h — reproducible test inputs: a counter-based hash of
 * (seed, index), so every test and its host reference draw the same values
 * without sharing state.
 */
#ifndef KB_TESTS_SUPPORT_VALUES_H
#define KB_TESTS_SUPPORT_VALUES_H

#include <stdint.h>

/* 64 well-mixed bits for element i of stream seed (splitmix64's finaliser). */
uint64_t kb_test_mix(uint64_t seed, int64_t i);

/* Element i of stream seed in [-scale, scale], in steps of scale / 1000. */
float kb_test_val(uint64_t seed, int64_t i, double scale);

/* n such values, each plus offset (malloc'd; the caller frees). */
float *kb_test_array(uint64_t seed, int64_t n, double scale, double offset);

/* n values of stream seed, each an integer in [lo, hi] times scale (a power
 * of two keeps sums of products exact in f32 and f16; malloc'd, the caller
 * frees). */
float *kb_test_int_array(uint64_t seed, int64_t n, int lo, int hi, float scale);

#endif
