/*
 * ccl/call.h — one collective call as ccl/run.c gathers, installs and
 * launches it, shared with ccl/predict.c, which sizes its messages and
 * reports its α-β prediction. Private to src/ccl.
 *
 * A call lives on run.c's stack from kb__ccl_run's start to its end: its
 * buffers, installs and launch arguments are run.c's to allocate and
 * free; predict.c only reads them (and fills the launch's sched).
 */
#ifndef KB_CCL_CALL_H
#define KB_CCL_CALL_H

#include <stdint.h>

#include "ccl/algorithms/algorithms.h"
#include "ccl/board.h"
#include "ccl/collective.h"
#include "ccl/installs.h"
#include "kernbench/kernbench.h"
#include "runtime/launch.h"
#include "runtime/tensor.h"

/* One buffer of a call: a shard of an input tensor. */
typedef struct kb__ccl_call_buf {
    uint32_t gi; /* PE */
    const kb__rt_tensor *in, *out;
    int in_shard, out_shard;
    uint32_t tensor; /* index of in in the request */
} kb__ccl_call_buf;

/* One call: its request, buffers, algorithm, installs and launch. */
typedef struct kb__ccl_call {
    kb_machine *m;
    const kb__coll_req *r;
    const char *what;      /* "all_reduce" */
    kb__ccl_call_buf *buf; /* [p] in call order */
    uint32_t p;
    int64_t elems;   /* of one input buffer */
    kb__dtype dtype; /* of every buffer */
    const kb__ccl_algo *algo;
    const kb__ccl_module *mod;
    /* its installs: one, or (pairwise) one per pair of buffers */
    kb__ccl_installed **inst;
    uint32_t n_inst;
    /* the launch's arguments, read by its programs until it ends */
    uint32_t *pes; /* [p] program -> PE: each install's PEs in its rank order */
    kb_ccl_sched sched;
    uint32_t *index; /* sched.index: program -> buffer */
    tl_tensor *views;
    kb__ccl_phase *phases; /* [n_phases] when it may be calibrated (ccl/board.h) */
    uint32_t n_phases;
} kb__ccl_call;

/* The message size (sched.piece, elements), ring window (sched.window) and
 * TCM room (sched.tcm_pieces) of c's kernels: a piece fits every buffer PE's tile scratch, and for
 * the mesh and tree one message fits one ring. c's installs, pes and module are set. */
void kb__ccl_call_sizes(const kb_machine *m, const kb__ccl_call *c, kb_ccl_sched *s);

/* Fills info after c ran (times t, messages of at most piece bytes): the
 * algorithm, sizes, times and, for the collectives that have one
 * (kb__coll_info.predicted_ps), the α-β prediction of ccl/alphabeta.h.
 * A model that fails leaves the prediction 0. */
void kb__ccl_call_info(const kb_machine *m, const kb__ccl_call *c, const kb__rt_launch_times *t,
                       uint64_t piece, kb__coll_info *info);

#endif
