/*
 * pe/pe_timing.h — parameters of a PE's units and the service-time formulas
 * of the GEMM and MATH units (docs/pe-timing.md states them with examples).
 *
 *   GEMM  [M,K]x[K,N] on an R x C systolic array at f GHz:
 *         ceil(M/R) * ceil(N/C) passes, each K + R + C - 1 cycles
 *         (K operand beats plus the skewed fill and drain of the array; passes
 *         do not overlap). The accumulator add is fused into the drain.
 *   MATH  element-wise: ceil(E / lanes) * cycles(class)
 *         reduction of E inputs along rows of length L:
 *         ceil(E / lanes) * cycles(reduce) + ceil(log2 L) * cycles(reduce)
 *         (lane-parallel partial sums, then a log2 combining tree).
 *   cycles -> ps: ceil(cycles * 1000 / f), rounded up once per operation.
 * Cost: O(1) per call, pure functions.
 */
#ifndef KB_PE_TIMING_H
#define KB_PE_TIMING_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "sim/sim.h"
#include "topo/params.h"

/* Op classes of the MATH unit, one cycle cost each (pe.math.*_cycles). */
/* Cycle costs of the MATH unit, one per function the topology names
 * (pe.math.cycles.<name>); each tl_ op charges the function it performs
 * (docs/pe-timing.md has the table). MOVE has no topology key (fixed 1). */
typedef enum kb__math_class {
    KB__MATH_ADD = 0, /* add, neg, abs, bitwise, not */
    KB__MATH_MUL,     /* mul, fma */
    KB__MATH_DIV,     /* div, floordiv, mod; softmax's normalisation */
    KB__MATH_TRANS,   /* exp, exp2, sin, cos (pe.math.cycles.exp) */
    KB__MATH_REDUCE,  /* one pass of a reduction, and each step of its tree */
    KB__MATH_CAST,
    KB__MATH_SELECT, /* where */
    KB__MATH_CMP,
    KB__MATH_MOVE, /* arange, full, broadcast, transpose */
    KB__MATH_SUB,  /* sub; softmax's subtraction of the max */
    KB__MATH_MAX,  /* maximum; clamp's lower bound */
    KB__MATH_MIN,  /* minimum; clamp's upper bound */
    KB__MATH_LOG,  /* log, log2 */
    KB__MATH_SQRT,
    KB__MATH_RSQRT,
    KB__MATH_SIGMOID, /* one pass per element group */
    KB__MATH_CLASS_COUNT
} kb__math_class;

typedef struct kb__pe_params {
    struct {
        uint32_t rows, cols; /* systolic array */
        double clock_ghz;
    } gemm;
    struct {
        uint32_t lanes; /* elements per cycle */
        double clock_ghz;
        uint32_t cycles[KB__MATH_CLASS_COUNT]; /* cycles per lane-group, per class */
    } math;
    struct {
        double dispatch_ns;  /* pe_cpu cost to start one program */
        double scalar_op_ns; /* scalar-side cost to issue one tile operation */
        bool pipeline;       /* programs overlap (pe.cpu.pipeline, docs/pe-timing.md) */
    } cpu;
    struct {
        uint64_t size, reserved; /* bytes; tiles use size - reserved */
        double bw_gbs, latency_ns;
    } tcm;
    struct {
        uint32_t channels; /* transfers in service at once */
        double bw_gbs;     /* per channel */
        double setup_ns;   /* per transfer */
    } dma;
    uint32_t queue_depth; /* ops per unit issued and not finished before issue blocks */
} kb__pe_params;

/* The built-in defaults (docs/pe-timing.md lists them). */
void kb__pe_params_default(kb__pe_params *p);
/* The PE parameters of a machine description: pe.gemm.*, pe.math.* (every
 * pe.math.cycles.<function> key), pe.cpu.*, pe.tcm.*, pe.dma.*; queue depth
 * from the defaults (no topology key). KB_ECONFIG naming the parameter for
 * values the units cannot run with. */
int kb__pe_params_from_topo(const kb__topo_params *t, kb__pe_params *p, kb__err *err);
/* GEMM cycles for [M,K]x[K,N] (formula above); 0 when any extent is 0. */
uint64_t kb__pe_gemm_cycles(const kb__pe_params *p, uint64_t m, uint64_t n, uint64_t k);
uint64_t kb__pe_gemm_ps(const kb__pe_params *p, uint64_t m, uint64_t n, uint64_t k);
/* MATH cycles for an element-wise op over `elems` elements of class c. */
uint64_t kb__pe_math_cycles(const kb__pe_params *p, kb__math_class c, uint64_t elems);
/* MATH cycles for a reduction of `elems` inputs along rows of length `len`. */
uint64_t kb__pe_reduce_cycles(const kb__pe_params *p, uint64_t elems, uint64_t len);
uint64_t kb__pe_math_ps(const kb__pe_params *p, uint64_t cycles);
/* DMA service of one transfer of `bytes` on one channel: setup + bytes / bw. */
uint64_t kb__pe_dma_ps(const kb__pe_params *p, uint64_t bytes);

#endif
