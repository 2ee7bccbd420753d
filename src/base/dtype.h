/*
 * base/dtype.h — element types of tiles and tensors, and conversions.
 *
 * The ten kernel-side element types mirror triton.language: f16, bf16, f32,
 * i32, i16, i8, u32, u16, u8 and bool (Triton's i1, stored as one byte
 * holding 0 or 1; any nonzero byte reads as true). The codes of the first
 * six never change (the public kb_dtype and tl_dtype equal them); the
 * narrower and unsigned integers were appended after bool. Half types are stored as their IEEE 754
 * binary16 / bfloat16 bit patterns in a uint16_t; all conversions are plain
 * bit manipulation (no _Float16), round to nearest even, keep NaN a NaN
 * (quieted), saturate overflow to infinity and handle subnormals exactly.
 *
 * Casting rules of kb__dtype_convert (the rules tl.cast uses here):
 *   float -> float   round to nearest even (f32 -> f16 / bf16), exact widening.
 *   float -> int     truncation toward zero; out-of-range values saturate to the
 *                    type's min/max (0 for a negative value cast to an unsigned
 *                    type) and NaN gives 0 (Triton leaves these cases
 *                    undefined; kernbench picks this deterministic answer).
 *   float -> bool    x != 0 (NaN is true), as Triton.
 *   int   -> float   exact when representable, else round to nearest even
 *                    (computed from the exact integer: no double rounding).
 *   int   -> int     two's-complement wrap (i32 300 -> i8 44, i32 -1 -> u32
 *                    4294967295); unsigned types zero-extend; bool widens to 0/1.
 *   int   -> bool    x != 0.
 * Cost: O(n), no allocation. No state: every function is pure.
 */
#ifndef KB_BASE_DTYPE_H
#define KB_BASE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum kb__dtype {
    KB__F16 = 0,
    KB__BF16,
    KB__F32,
    KB__I32,
    KB__I8,
    KB__BOOL,
    KB__I16,
    KB__U8,
    KB__U16,
    KB__U32,
    KB__DTYPE_COUNT
} kb__dtype;

/* Promotion kinds, ordered as Triton's: bool < integer < floating. */
typedef enum kb__dtype_kind {
    KB__KIND_BOOL = 0,
    KB__KIND_INT = 1,
    KB__KIND_FLOAT = 2
} kb__dtype_kind;

/* True when t is one of the kb__dtype values (guards against casts of junk). */
bool kb__dtype_valid(int t);
/* Bytes per element (f16 2, bf16 2, f32 4, i32 4, i8 1, bool 1, i16 2,
 * u8 1, u16 2, u32 4). 0 for an invalid dtype. */
size_t kb__dtype_size(kb__dtype t);
/* "f16", "bf16", "f32", "i32", "i8", "bool", "i16", "u8", "u16", "u32";
 * "invalid" for anything else. */
const char *kb__dtype_name(kb__dtype t);
kb__dtype_kind kb__dtype_kind_of(kb__dtype t);
bool kb__dtype_is_float(kb__dtype t);
/* Integer or bool (Triton's is_int(): i1 counts as an unsigned integer). */
bool kb__dtype_is_int(kb__dtype t);
/* bool, u8, u16, u32 (Triton's unsigned integers, i1 included). */
bool kb__dtype_is_unsigned(kb__dtype t);
/* Bit width used by integer promotion (bool 1, i8/u8 8, i16/u16 16, i32/u32
 * 32); 16/16/32 for floats. */
int kb__dtype_bits(kb__dtype t);

/* Parses a dtype name (exact, lower case). On failure fills err with a
 * message that lists the valid names and returns KB_EINVAL. */
int kb__dtype_parse(const char *name, kb__dtype *out, kb__err *err);

/* Scalar conversions, round to nearest even. */
uint16_t kb__f32_to_f16(float f);
float kb__f16_to_f32(uint16_t h);
uint16_t kb__f32_to_bf16(float f);
float kb__bf16_to_f32(uint16_t h);
/* From double with a single rounding (via round-to-odd to f32). */
uint16_t kb__f64_to_f16(double d);
uint16_t kb__f64_to_bf16(double d);
/* Float to integer with the casting rules above. */
int32_t kb__f64_to_i32_sat(double d);
int8_t kb__f64_to_i8_sat(double d);
/* One element of t holding v with the casting rules above (a double is
 * rounded once for a float t; integers truncate and saturate; bool v != 0).
 * dst has kb__dtype_size(t) bytes. Returns 0, or KB_EINVAL for an invalid t. */
int kb__dtype_from_f64(kb__dtype t, double v, void *dst);

/* Converts n elements from src (src_dtype) to dst (dst_dtype) with the rules
 * above. dst and src must not overlap unless they are the same pointer and
 * the types have the same size. Returns 0, or KB_EINVAL for an invalid dtype. */
int kb__dtype_convert(kb__dtype dst_dtype, void *dst, kb__dtype src_dtype, const void *src,
                      size_t n);

/* Bulk helpers used by the tile kernels (valid dtypes only, asserted). */
void kb__dtype_load_f32(kb__dtype t, const void *src, float *dst, size_t n);
void kb__dtype_store_f32(kb__dtype t, void *dst, const float *src, size_t n);
void kb__dtype_load_i64(kb__dtype t, const void *src, int64_t *dst, size_t n);
/* Integers wrap to the width of t (bool keeps bit 0, as an i1 does);
 * float t converts the integer with a single rounding. */
void kb__dtype_store_i64(kb__dtype t, void *dst, const int64_t *src, size_t n);

#endif
