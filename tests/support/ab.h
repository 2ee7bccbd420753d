/*
 * support/ab.h — test helpers for the α-β model's tests: the built-in
 * machine's graph routed by its fabric, collective plans over it.
 */
#ifndef KB_TESTS_SUPPORT_AB_H
#define KB_TESTS_SUPPORT_AB_H

#include <stdint.h>

#include "ccl/ab_internal.h"
#include "topo/topo.h"

/* ns -> ps, rounded up (values within 1e-6 ps of a whole ps are that ps). */
uint64_t kb_test_ps(double ns);
/* Routes t's graph by a fabric built over it (the model's routes are the
 * fabric's); aborts the test on error. kb_test_untopo frees both. */
void kb_test_routed(kb__topo *t);
/* The built-in machine with a cube mesh of rows x cols per SIP, its routes
 * the fabric's (kb_test_routed); aborts the test on error. Free with
 * kb_test_untopo. */
kb__topo *kb_test_topo_mesh(kb__topo_params *p, uint32_t rows, uint32_t cols);
/* The built-in machine (4 x 4 cubes a SIP), as kb_test_topo_mesh. */
kb__topo *kb_test_topo(kb__topo_params *p);
/* Frees t and the fabric routing over it. */
void kb_test_untopo(kb__topo *t);
/* The plan of ccl.yaml `text`'s first algorithm over ws ranks on machine
 * p; *c the configuration (free both). Aborts the test on error. */
kb__ccl_plan *kb_test_plan_of(const kb__topo_params *p, const char *text, uint32_t ws,
                              kb__ccl_config **c);
/* kb_test_plan_of for a ring_1d ring all-reduce. */
kb__ccl_plan *kb_test_ring_plan(const kb__topo_params *p, uint32_t ws, kb__ccl_config **c);
/* A load's and a store's time alone (kb__ab_xfer_ps) of b bytes between PE
 * at's TCM and its HBM slice, ps. */
void kb_test_xfers_alone(const kb__topo *t, kb__ccl_loc at, uint64_t b, uint64_t *ld_ps,
                         uint64_t *st_ps);
/* loops[0..world size) := each rank's credit loop alone through its port
 * dir with whole slots (kb__ab_credit_rtt_slot_ps, the rest zero),
 * loops[k] rank k's; aborts the test on error. */
void kb_test_loops_alone(const kb__topo *t, const kb__ccl_plan *pl, kb__ccl_dir dir,
                         kb__ab_credit_loop *loops);

#endif
