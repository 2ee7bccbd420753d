/*
 * Kernel mistakes through the tl_ API end the program with a kernel error
 * naming what was expected, never a crash, undefined behaviour or a silent
 * wrong result; the PEs run the next launch normally. One misuse per kernel
 * (selected by the record's `mode`), on the flat device memory of
 * tests/pe/harness.h: x is a 4 x 16 f32 tensor at VA0.
 */
#include <math.h>
#include <string.h>

#include "pe/harness.h"
#include "support/machine.h"

#define VA0  0x10000000ull
#define ROWS 4
#define COLS 16

typedef enum misuse {
    M_BLOCK_STRIDE_WRAPS, /* row stride * row wraps the byte address past 2^64 */
    M_BLOCK_OFFSET_OVERFLOWS,
    M_BLOCK_COL_OFFSET_MIN, /* checked column offset INT64_MIN */
    M_BLOCK_NULL_TENSOR,
    M_BLOCK_BAD_NDIM,
    M_BLOCK_CHECK_BIT_PAST_NDIM,
    M_BLOCK_BAD_PADDING,
    M_ADVANCE_OVERFLOWS,
    M_LOAD_NULL_TENSOR,
    M_STORE_NULL_TENSOR,
    M_FLOAT_MASK,
    M_INT_MASK,
    M_READ_NULL,
    M_SCOPE_KEEP_NULL,
    M_SCOPE_NEVER_ISSUED,
    M_STORE_NO_OFFSETS, /* the op is built, then the handle check raises */
    M_TENSOR_NDIM_NULL,
    M_TENSOR_DIM_NULL,
    M_TENSOR_STRIDE_NULL,
    M_TENSOR_DTYPE_NULL,
    M_TENSOR_DIM_PAST_NDIM,
    M_TENSOR_STRIDE_NEGATIVE,
    M_TENSOR_NOT_AN_ARGUMENT,
    M_LOAD_NOT_AN_ARGUMENT,
    M_TILE_SHAPE_PAST_NDIM,
} misuse;

typedef struct rec {
    misuse mode;
    int64_t got; /* what an accessor returned, if the program went on */
    int went_on; /* the program ran past the misuse */
} rec;

/* A tensor view that no launch handed out (a stale or made-up pointer). */
static tl_tensor not_an_argument = {.name = "fake", .dtype = TL_F32, .ndim = 1, .shape = {4}};

static tl_block_ptr whole(tl_ctx *k, tl_tensor *x, const int64_t *strides, const int64_t *offs,
                          const int64_t *block)
{
    return tl_make_block_ptr(k, x, 2, (int64_t[]){ROWS, COLS}, strides, offs, block, NULL);
}

static void misuse_kernel(tl_ctx *k)
{
    rec *r = TM_ARG(k, rec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile offs = tl_arange(k, 0, COLS);
    tl_block_ptr p;
    switch (r->mode) {
    case M_BLOCK_STRIDE_WRAPS: /* row 1 at element 2^62: 2^64 bytes, 0 modulo 2^64 */
        p = whole(k, x, (int64_t[]){(int64_t)1 << 62, 1}, (int64_t[]){0, 0}, (int64_t[]){2, 1});
        tl_item(k, tl_sum(k, tl_load_block(k, p, 0, TL_PAD_ZERO), TL_AXIS_ALL));
        break;
    case M_BLOCK_OFFSET_OVERFLOWS:
        p = whole(k, x, (int64_t[]){COLS, 3}, (int64_t[]){0, INT64_MAX - 2}, (int64_t[]){2, 4});
        tl_item(k, tl_sum(k, tl_load_block(k, p, 0, TL_PAD_ZERO), TL_AXIS_ALL));
        break;
    case M_BLOCK_COL_OFFSET_MIN:
        p = whole(k, x, (int64_t[]){COLS, 1}, (int64_t[]){0, INT64_MIN + 2}, (int64_t[]){2, 4});
        tl_item(k, tl_sum(k, tl_load_block(k, p, TL_CHECK(1), TL_PAD_ZERO), TL_AXIS_ALL));
        break;
    case M_BLOCK_NULL_TENSOR:
        p = (tl_block_ptr){.ndim = 1, .block = {4}};
        tl_load_block(k, p, 0, TL_PAD_ZERO);
        break;
    case M_BLOCK_BAD_NDIM:
        p = (tl_block_ptr){.t = x, .ndim = 4, .block = {4, 4, 1}};
        tl_store_block(k, p, tl_zeros(k, 2, (int64_t[]){4, 4}, TL_F32), 0);
        break;
    case M_BLOCK_CHECK_BIT_PAST_NDIM:
        p = tl_make_block_ptr(k, x, 1, (int64_t[]){COLS}, (int64_t[]){1}, (int64_t[]){0},
                              (int64_t[]){COLS}, NULL);
        tl_load_block(k, p, TL_CHECK(1), TL_PAD_ZERO);
        break;
    case M_BLOCK_BAD_PADDING:
        p = whole(k, x, (int64_t[]){COLS, 1}, (int64_t[]){0, 0}, (int64_t[]){2, 4});
        tl_load_block(k, p, TL_CHECK(0), (tl_padding)7);
        break;
    case M_ADVANCE_OVERFLOWS:
        p = whole(k, x, (int64_t[]){COLS, 1}, (int64_t[]){1, 0}, (int64_t[]){2, 4});
        tl_advance(k, p, (int64_t[]){INT64_MAX, 0});
        break;
    case M_LOAD_NULL_TENSOR:
        tl_load(k, NULL, offs, TL_NONE, TL_NONE);
        break;
    case M_STORE_NULL_TENSOR:
        tl_store(k, NULL, offs, tl_scalar(k, 1, TL_F32), TL_NONE);
        break;
    case M_FLOAT_MASK: /* 0.5 is neither a bool nor a lane the author meant to drop */
        tl_load(k, x, offs, tl_full(k, 1, (int64_t[]){COLS}, 0.5, TL_F32), TL_NONE);
        break;
    case M_INT_MASK:
        tl_store(k, x, offs, tl_scalar(k, 1, TL_F32), tl_full(k, 1, (int64_t[]){COLS}, 2, TL_I32));
        break;
    case M_READ_NULL:
        tl_read(k, offs, NULL, COLS * sizeof(int32_t));
        break;
    case M_SCOPE_KEEP_NULL:
        tl_scope_end(k, tl_scope_begin(k), 2, NULL);
        break;
    case M_STORE_NO_OFFSETS:
        tl_store(k, x, TL_NONE, tl_zeros(k, 1, (int64_t[]){16}, TL_F32), TL_NONE);
        r->went_on = 1;
        break;
    case M_SCOPE_NEVER_ISSUED:
        tl_scope_end(k, tl_scope_begin(k) + 1000, 0, NULL);
        r->went_on = 1;
        break;
    case M_TENSOR_NDIM_NULL:
        r->got = tl_tensor_ndim(NULL);
        r->went_on = 1;
        break;
    case M_TENSOR_DIM_NULL:
        r->got = tl_tensor_dim(NULL, 0);
        r->went_on = 1;
        break;
    case M_TENSOR_STRIDE_NULL:
        r->got = tl_tensor_stride(NULL, 0);
        r->went_on = 1;
        break;
    case M_TENSOR_DTYPE_NULL:
        r->got = tl_tensor_dtype(NULL);
        r->went_on = 1;
        break;
    case M_TENSOR_DIM_PAST_NDIM:
        r->got = tl_tensor_dim(x, 2);
        r->went_on = 1;
        break;
    case M_TENSOR_STRIDE_NEGATIVE:
        r->got = tl_tensor_stride(x, -1);
        r->went_on = 1;
        break;
    case M_TENSOR_NOT_AN_ARGUMENT:
        r->got = tl_tensor_ndim(&not_an_argument);
        r->went_on = 1;
        break;
    case M_LOAD_NOT_AN_ARGUMENT:
        tl_load(k, &not_an_argument, offs, TL_NONE, TL_NONE);
        r->went_on = 1;
        break;
    case M_TILE_SHAPE_PAST_NDIM:
        r->got = tl_shape(k, offs, 1);
        r->went_on = 1;
        break;
    }
}

/* After a failed launch the same PEs run this one normally: x[0, :] += 1. */
static void bump_row0(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile offs = tl_arange(k, 0, COLS);
    tl_store(k, x, offs, tl_add(k, tl_load(k, x, offs, TL_NONE, TL_NONE), tl_scalar(k, 1, TL_F32)),
             TL_NONE);
}

/* Runs misuse `mode`; returns its status with the message in e. Then checks
 * that the machine still runs a correct kernel. */
static int run_misuse_rec(rec *r, kb__err *e)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    float mem[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        mem[i] = (float)i;
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    kb__tl_launch_desc d = tm_desc("misuse", misuse_kernel, 1, r);
    tm_add_tensor(&d, &f, "x", TL_F32, 2, (int64_t[]){ROWS, COLS}, (int64_t[]){COLS, 1}, VA0,
                  sizeof mem);
    int rc = tm_run(&m, &d, 1, e, NULL);
    for (int i = 0; i < ROWS * COLS; i++)
        cr_assert_eq(mem[i], (float)i, "the failed kernel wrote x[%d]", i);
    kb__tl_launch_desc g = tm_desc("bump", bump_row0, 1, NULL);
    tm_add_tensor(&g, &f, "x", TL_F32, 2, (int64_t[]){ROWS, COLS}, (int64_t[]){COLS, 1}, VA0,
                  sizeof mem);
    kb__err ge;
    cr_assert_eq(tm_run(&m, &g, 1, &ge, NULL), 0, "%s", ge.msg);
    for (int i = 0; i < ROWS * COLS; i++)
        cr_assert_eq(mem[i], (float)i + (i < COLS ? 1.0f : 0.0f), "x[%d] after the next launch", i);
    tm_fini(&m);
    return rc;
}

static int run_misuse(misuse mode, kb__err *e)
{
    rec r = {mode, 0, 0};
    return run_misuse_rec(&r, e);
}

static void expect(misuse mode, int code, const char *what)
{
    kb__err e;
    int rc = run_misuse(mode, &e);
    cr_assert_eq(rc, code, "status %d (%s), want %d", rc, e.msg, code);
    cr_assert(strstr(e.msg, "kernel misuse, program 0 on "), "%s", e.msg);
    cr_assert(strstr(e.msg, what), "'%s' lacks '%s'", e.msg, what);
}

Test(tl_misuse, block_row_whose_byte_address_wraps_is_out_of_range_not_element_zero)
{
    expect(M_BLOCK_STRIDE_WRAPS, KB_ERANGE, "is outside the reach");
}

Test(tl_misuse, block_offsets_past_int64_are_out_of_range)
{
    expect(M_BLOCK_OFFSET_OVERFLOWS, KB_ERANGE, "is outside the reach");
}

Test(tl_misuse, checked_block_column_offset_int64_min_reads_padding)
{
    kb__err e;
    cr_assert_eq(run_misuse(M_BLOCK_COL_OFFSET_MIN, &e), 0, "%s", e.msg);
}

Test(tl_misuse, block_pointer_without_tensor_is_a_kernel_error)
{
    expect(M_BLOCK_NULL_TENSOR, KB_EINVAL, "load: the tensor is NULL");
}

Test(tl_misuse, hand_built_block_pointer_with_four_dims_is_a_kernel_error)
{
    expect(M_BLOCK_BAD_NDIM, KB_EINVAL, "store: block pointer has ndim 4 (1 to 3 supported)");
}

Test(tl_misuse, boundary_check_of_a_missing_dimension_is_a_kernel_error)
{
    expect(M_BLOCK_CHECK_BIT_PAST_NDIM, KB_EINVAL, "boundary_check 0x2");
}

Test(tl_misuse, unknown_padding_is_a_kernel_error)
{
    expect(M_BLOCK_BAD_PADDING, KB_EINVAL, "padding 7");
}

Test(tl_misuse, advance_past_int64_is_a_range_error)
{
    expect(M_ADVANCE_OVERFLOWS, KB_ERANGE, "advance: offset 1 + 9223372036854775807");
}

Test(tl_misuse, load_from_null_tensor_is_a_kernel_error)
{
    expect(M_LOAD_NULL_TENSOR, KB_EINVAL, "load: the tensor is NULL");
}

Test(tl_misuse, store_to_null_tensor_is_a_kernel_error)
{
    expect(M_STORE_NULL_TENSOR, KB_EINVAL, "store: the tensor is NULL");
}

Test(tl_misuse, float_mask_is_a_kernel_error)
{
    expect(M_FLOAT_MASK, KB_EINVAL, "mask must be a bool tile");
}

Test(tl_misuse, integer_mask_is_a_kernel_error)
{
    expect(M_INT_MASK, KB_EINVAL, "mask must be a bool tile");
}

Test(tl_misuse, read_into_null_is_a_kernel_error)
{
    expect(M_READ_NULL, KB_EINVAL, "tl_read: destination is NULL");
}

Test(tl_misuse, scope_end_keeping_tiles_from_null_is_a_kernel_error)
{
    expect(M_SCOPE_KEEP_NULL, KB_EINVAL, "tl_scope_end: n_keep 2 with keep NULL");
}

/* Under the sanitizer build LeakSanitizer also checks that the op being
 * built when the error was raised is freed (a fuzzing finding). */
Test(tl_misuse, store_with_no_offsets_tile_is_a_kernel_error_and_leaks_nothing)
{
    expect(M_STORE_NO_OFFSETS, KB_EINVAL, "store: invalid tile handle");
    cr_assert_eq(kb_test_leaks(), 0, "the op being built was not freed");
}

Test(tl_misuse, scope_end_with_a_token_never_issued_is_a_kernel_error)
{
    expect(M_SCOPE_NEVER_ISSUED, KB_EINVAL, "was never returned by tl_scope_begin");
}

/* A tensor accessor misused: the program ends there (it never sees a value),
 * with a kernel error naming the call, the kernel, the program and the PE. */
static void expect_accessor(misuse mode, const char *what)
{
    rec r = {mode, 0, 0};
    kb__err e;
    int rc = run_misuse_rec(&r, &e);
    cr_assert_eq(rc, KB_EINVAL, "status %d (%s), want KB_EINVAL", rc, e.msg);
    cr_assert(strstr(e.msg, "kernel misuse, program 0 on sip0/cube1/pe0: "), "%s", e.msg);
    cr_assert(strstr(e.msg, what), "'%s' lacks '%s'", e.msg, what);
    cr_assert_eq(r.went_on, 0, "the program went on with %lld", (long long)r.got);
}

Test(tl_misuse, tensor_accessors_on_null_are_kernel_errors_naming_the_call)
{
    expect_accessor(M_TENSOR_NDIM_NULL, "tl_tensor_ndim: the tensor is NULL");
    expect_accessor(M_TENSOR_DIM_NULL, "tl_tensor_dim: the tensor is NULL");
    expect_accessor(M_TENSOR_STRIDE_NULL, "tl_tensor_stride: the tensor is NULL");
    expect_accessor(M_TENSOR_DTYPE_NULL, "tl_tensor_dtype: the tensor is NULL");
}

Test(tl_misuse, tile_dimension_out_of_range_is_a_kernel_error)
{
    expect_accessor(M_TILE_SHAPE_PAST_NDIM, "tl_shape: the tile has 1 dimension(s), so d must be "
                                            "0..0, got 1");
}

Test(tl_misuse, tensor_dimension_out_of_range_is_a_kernel_error)
{
    expect_accessor(M_TENSOR_DIM_PAST_NDIM,
                    "tl_tensor_dim(x, 2): tensor x has 2 dimension(s), so d must be 0..1");
    expect_accessor(M_TENSOR_STRIDE_NEGATIVE,
                    "tl_tensor_stride(x, -1): tensor x has 2 dimension(s), so d must be 0..1");
}

Test(tl_misuse, a_tensor_pointer_not_from_tl_arg_tensor_is_a_kernel_error)
{
    expect_accessor(M_TENSOR_NOT_AN_ARGUMENT,
                    "is not a tensor argument of this program (expected a pointer from "
                    "tl_arg_tensor)");
    expect_accessor(M_LOAD_NOT_AN_ARGUMENT, "load: ");
}

Test(tl_misuse, tensor_accessors_outside_a_program_give_the_documented_sentinels)
{
    cr_assert_eq(tl_tensor_ndim(NULL), -1);
    cr_assert_eq(tl_tensor_dim(NULL, 0), -1);
    cr_assert_eq(tl_tensor_stride(NULL, 0), -1);
    cr_assert_eq(tl_tensor_dtype(NULL), TL_DTYPE_INVALID);
    cr_assert_eq(tl_tensor_dim(&not_an_argument, 1), -1);
    cr_assert_eq(tl_tensor_stride(&not_an_argument, -1), -1);
    cr_assert_eq(tl_tensor_dim(&not_an_argument, 0), 4);
}

Test(tl_misuse, cdiv_is_the_ceiling_over_all_of_int64)
{
    cr_assert_eq(tl_cdiv(INT64_MAX, 2), INT64_MAX / 2 + 1);
    cr_assert_eq(tl_cdiv(INT64_MAX - 1, INT64_MAX), 1);
    cr_assert_eq(tl_cdiv(INT64_MIN, 2), INT64_MIN / 2);
    for (int64_t a = -9; a <= 9; a++)
        for (int64_t b = 1; b <= 4; b++)
            cr_assert_eq(tl_cdiv(a, b), (int64_t)ceil((double)a / (double)b), "cdiv(%lld, %lld)",
                         (long long)a, (long long)b);
    cr_assert_eq(tl_cdiv(5, 0), 0);
    cr_assert_eq(tl_cdiv(5, -1), 0);
}

Test(tl_misuse, next_power_of_2_covers_n_over_all_of_int64)
{
    for (int64_t n = -3; n <= 1; n++)
        cr_assert_eq(tl_next_power_of_2(n), 1, "n %lld", (long long)n);
    for (int64_t n = 2; n <= 4096; n++) {
        int64_t p = tl_next_power_of_2(n);
        cr_assert(p >= n && p / 2 < n && (p & (p - 1)) == 0, "n %lld: %lld", (long long)n,
                  (long long)p);
    }
    cr_assert_eq(tl_next_power_of_2((int64_t)1 << 62), (int64_t)1 << 62);
    cr_assert_eq(tl_next_power_of_2(INT64_MAX), (int64_t)1 << 62);
}
