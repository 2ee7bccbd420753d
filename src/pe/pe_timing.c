/*
 * pe_timing.c — PE unit defaults and service-time formulas (see pe_timing.h).
 *
 * Every time is rounded to a whole picosecond once per operation, by the
 * simulator's one rule (kb__ps_round, src/sim/time.c): values which are
 * whole picoseconds in decimal (1.5 ns, 64 B at 32 GB/s) stay exact.
 */
#include "pe/pe_timing.h"

void kb__pe_params_default(kb__pe_params *p)
{
    *p = (kb__pe_params){0};
    p->gemm.rows = 64;
    p->gemm.cols = 64;
    p->gemm.clock_ghz = 1.0;
    p->math.lanes = 64;
    p->math.clock_ghz = 1.0;
    for (int c = 0; c < KB__MATH_CLASS_COUNT; c++)
        p->math.cycles[c] = 1;
    p->math.cycles[KB__MATH_MUL] = 2;
    p->math.cycles[KB__MATH_DIV] = 4;
    p->math.cycles[KB__MATH_TRANS] = 8;
    p->math.cycles[KB__MATH_LOG] = 8;
    p->math.cycles[KB__MATH_SQRT] = 8;
    p->math.cycles[KB__MATH_RSQRT] = 8;
    p->math.cycles[KB__MATH_SIGMOID] = 13; /* exp + add + div */
    p->cpu.dispatch_ns = 100.0;
    p->cpu.scalar_op_ns = 1.0;
    p->cpu.pipeline = true;
    p->tcm.size = 16u << 20;
    p->tcm.reserved = 4u << 20;
    p->tcm.bw_gbs = 512.0;
    p->tcm.latency_ns = 2.0;
    p->dma.channels = 4;
    p->dma.bw_gbs = 64.0;
    p->dma.setup_ns = 20.0;
    p->queue_depth = 8;
}

static uint64_t cdiv(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

uint64_t kb__pe_gemm_cycles(const kb__pe_params *p, uint64_t m, uint64_t n, uint64_t k)
{
    if (!m || !n || !k) return 0;
    uint64_t r = p->gemm.rows, c = p->gemm.cols;
    return cdiv(m, r) * cdiv(n, c) * (k + r + c - 1);
}

uint64_t kb__pe_gemm_ps(const kb__pe_params *p, uint64_t m, uint64_t n, uint64_t k)
{
    return kb__ps_from_cycles(kb__pe_gemm_cycles(p, m, n, k), p->gemm.clock_ghz);
}

uint64_t kb__pe_math_cycles(const kb__pe_params *p, kb__math_class c, uint64_t elems)
{
    return cdiv(elems ? elems : 1, p->math.lanes) * p->math.cycles[c];
}

uint64_t kb__pe_reduce_cycles(const kb__pe_params *p, uint64_t elems, uint64_t len)
{
    uint64_t depth = 0;
    while ((1ull << depth) < len)
        depth++;
    uint64_t c = p->math.cycles[KB__MATH_REDUCE];
    return cdiv(elems ? elems : 1, p->math.lanes) * c + depth * c;
}

uint64_t kb__pe_math_ps(const kb__pe_params *p, uint64_t cycles)
{
    return kb__ps_from_cycles(cycles, p->math.clock_ghz);
}

uint64_t kb__pe_dma_ps(const kb__pe_params *p, uint64_t bytes)
{
    return kb__ps_round(p->dma.setup_ns * 1000.0 + (double)bytes * 1000.0 / p->dma.bw_gbs);
}

int kb__pe_params_from_topo(const kb__topo_params *t, kb__pe_params *p, kb__err *err)
{
    kb__pe_params_default(p);
    p->gemm.rows = t->pe.gemm_rows;
    p->gemm.cols = t->pe.gemm_cols;
    p->gemm.clock_ghz = t->pe.gemm_clock_ghz;
    p->math.lanes = t->pe.math_lanes;
    p->math.clock_ghz = t->pe.math_clock_ghz;
    const kb__math_cycles *c = &t->pe.math_cycles;
    uint32_t *y = p->math.cycles;
    y[KB__MATH_ADD] = c->add;
    y[KB__MATH_SUB] = c->sub;
    y[KB__MATH_MUL] = c->mul;
    y[KB__MATH_MAX] = c->max;
    y[KB__MATH_MIN] = c->min;
    y[KB__MATH_CMP] = c->cmp;
    y[KB__MATH_SELECT] = c->select;
    y[KB__MATH_CAST] = c->cast;
    y[KB__MATH_DIV] = c->div;
    y[KB__MATH_TRANS] = c->exp;
    y[KB__MATH_LOG] = c->log;
    y[KB__MATH_SQRT] = c->sqrt;
    y[KB__MATH_RSQRT] = c->rsqrt;
    y[KB__MATH_SIGMOID] = c->sigmoid;
    y[KB__MATH_REDUCE] = c->reduce;
    y[KB__MATH_MOVE] = 1;
    p->cpu.dispatch_ns = t->pe.cpu_dispatch_ns;
    p->cpu.scalar_op_ns = t->pe.cpu_scalar_op_ns;
    p->cpu.pipeline = t->pe.cpu_pipeline != 0;
    p->tcm.size = t->pe.tcm_size;
    p->tcm.reserved = t->pe.tcm_reserved;
    p->tcm.bw_gbs = t->pe.tcm_bw_gbs;
    p->tcm.latency_ns = t->pe.tcm_latency_ns;
    p->dma.channels = t->pe.dma_channels;
    p->dma.bw_gbs = t->pe.dma_bw_gbs;
    p->dma.setup_ns = t->pe.dma_setup_ns;
    for (int i = 0; i < KB__MATH_CLASS_COUNT; i++)
        if (!y[i])
            return kb__err_set(err, KB_ECONFIG, "pe.math.cycles: a cycle count of 0 (class %d)", i);
    if (p->tcm.reserved >= p->tcm.size)
        return kb__err_set(err, KB_ECONFIG,
                           "pe.tcm.reserved (%llu B) must be smaller than pe.tcm.size (%llu B)",
                           (unsigned long long)p->tcm.reserved, (unsigned long long)p->tcm.size);
    return 0;
}
