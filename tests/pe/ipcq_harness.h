/*
 * tests/pe/ipcq_harness.h — the built-in machine as a device, a ccl plan
 * installed on it (kb__ccl_install) and one kb__pe per rank, running kernels
 * through the internal launch so queue traffic crosses the real fabric.
 */
#ifndef KB_TESTS_PE_IPCQ_HARNESS_H
#define KB_TESTS_PE_IPCQ_HARNESS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ccl_config.h"
#include "ccl/install.h"
#include "ccl/plan.h"
#include "kernbench/dist.h"
#include "kernel/tl_internal.h"
#include "pe/ipcq.h"
#include "support/machine.h"

typedef struct qm {
    kb__device *d;
    kb__ccl_config *cc;
    kb__ccl_plan *plan;
    kb__pe **pes;
    uint32_t n;
    kb__ipcq_set *q;
    kb__ccl_install_info info;
} qm;

/* Installs algorithm hello_send (with ccl overrides sets) for world ranks on
 * the built-in machine (topology overrides tsets). */
static inline void qm_init(qm *m, uint32_t world, const char *const *sets, size_t n_sets,
                           const char *const *tsets, size_t n_tsets)
{
    kb__err e = {0};
    memset(m, 0, sizeof *m);
    m->d = kb_test_device(tsets, n_tsets, 0);
    cr_assert_eq(kb__ccl_config_load(&m->cc, NULL, sets, n_sets, &e), 0, "%s", e.msg);
    const kb__ccl_algo *a;
    cr_assert_eq(kb__ccl_config_find(m->cc, "hello_send", &a, &e), 0, "%s", e.msg);
    kb__ccl_resolved r;
    const kb__topo_params *tp = &m->d->topo->params;
    cr_assert_eq(kb__ccl_resolve(a, tp, world, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__ccl_plan_build(&m->plan, tp, &r, &e), 0, "%s", e.msg);
    m->n = world;
    m->pes = calloc(world, sizeof *m->pes);
    kb__pe_params p;
    kb__pe_params_default(&p);
    p.tcm.size = tp->pe.tcm_size;
    p.tcm.reserved = tp->pe.tcm_reserved;
    p.cpu.scalar_op_ns = tp->pe.cpu_scalar_op_ns;
    p.dma.setup_ns = tp->pe.dma_setup_ns;
    p.dma.bw_gbs = tp->pe.dma_bw_gbs;
    for (uint32_t i = 0; i < world; i++) {
        char name[48];
        kb__ccl_loc l = m->plan->loc[i];
        snprintf(name, sizeof name, "sip%u/cube%u/pe%u", l.sip, l.cube, l.pe);
        cr_assert_eq(kb__pe_create(m->d->sim, name, &p, &m->pes[i], &e), 0, "%s", e.msg);
    }
    cr_assert_eq(kb__ccl_install(m->d, m->plan, m->pes, NULL, &m->q, &m->info, &e), 0, "%s", e.msg);
}

static inline void qm_fini(qm *m)
{
    kb__ipcq_destroy(m->q);
    for (uint32_t i = 0; i < m->n; i++)
        kb__pe_destroy(m->pes[i]);
    free(m->pes);
    kb__ccl_plan_destroy(m->plan);
    kb__ccl_config_destroy(m->cc);
    kb__device_destroy(m->d);
}

static inline kb__tl_launch_desc qm_desc(const char *name, tl_kernel_fn fn, uint32_t g0, void *arg)
{
    kb__tl_launch_desc d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.fn = fn;
    d.grid[0] = g0;
    d.grid[1] = d.grid[2] = 1;
    d.n_args = 1;
    d.args[0].kind = KB__TL_ARG_I64;
    d.args[0].i = (int64_t)(intptr_t)arg;
    static const kb_ccl_sched sched; /* the queues serve collective launches only */
    d.coll = &sched;
    return d;
}

/* Runs fn with one program per rank to completion; returns the launch status
 * (message in err), the end time in *t_end. */
static inline int qm_run(qm *m, const char *name, tl_kernel_fn fn, void *arg, kb__err *err,
                         kb__time *t_end)
{
    kb__tl_launch_desc d = qm_desc(name, fn, m->n, arg);
    kb__pe_launch *l;
    kb__err_clear(err);
    cr_assert_eq(kb__tl_launch_start(m->d->sim, m->pes, m->n, &d, &l, err), 0, "%s", err->msg);
    int rc = kb__sim_run(m->d->sim);
    cr_assert_eq(rc, 0, "sim: %s", kb__sim_error(m->d->sim)->msg);
    cr_assert(kb__event_is_fired(kb__pe_launch_done(l)));
    rc = kb__pe_launch_status(l, err);
    if (t_end) *t_end = kb__pe_launch_end(l);
    kb__pe_launch_destroy(l);
    return rc;
}

#define QM_ARG(k, type) ((type *)(intptr_t)tl_arg_i64((k), 0))

#endif
