/*
 * run.c — a round's calls turned into one device collective
 * (group/internal.h): the collective request (ccl/collective.h) with the
 * members' host ranks, so the runner's checks
 * (two ranks' buffers on one PE, output sizes) name the host rank at
 * fault, its root's buffer index and count matrix (each caller's count of
 * counts checked here, naming it), and the report kb_ccl_last returns.
 *
 * Cost: O(buffers) per call besides the collective (O(buffers²) for the
 * all_to_all_v matrix).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group/internal.h"

static void keep_report(grp_machine *x, const kb__coll_info *info)
{
    kb__ccl_report_of(info, &x->last);
    x->has_last = 1;
}

/* kb_all_to_all_v: the p x p matrix of the calls c[0..n) (host ranks
 * ranks[0..n), NULL from the driver), each caller's rows (one per shard of
 * its input) in index order; *out is allocated. A caller whose count of
 * counts is not its shards times p is named. */
static int gather_counts(kb_machine *m, const call *const *c, const int *ranks, int n,
                         int64_t **out, kb__err *err)
{
    size_t p = 0, at = 0;
    for (int k = 0; k < n; k++) {
        kb__rt_tensor *t = kb__rt_tensor_get(m, c[k]->in.id, err);
        if (!t) return err->code;
        p += (size_t)t->plan.n_shards;
    }
    int64_t *v = malloc(p * p * sizeof *v);
    if (!v) return kb__err_set(err, KB_ENOMEM, "kb_all_to_all_v: out of host memory");
    for (int k = 0; k < n; k++) {
        kb__rt_tensor *t = kb__rt_tensor_get(m, c[k]->in.id, err);
        size_t want = (size_t)t->plan.n_shards * p;
        if (!c[k]->counts || c[k]->n_counts != want) {
            char who[32] = "";
            if (ranks) snprintf(who, sizeof who, "host rank %d ", ranks[k]);
            free(v);
            return kb__err_set(err, KB_EINVAL,
                               "kb_all_to_all_v: %spassed %zu counts, expected %zu: a row of %zu "
                               "(the call's buffers) for each of its %d shards",
                               who, c[k]->counts ? c[k]->n_counts : 0, want, p, t->plan.n_shards);
        }
        memcpy(v + at, c[k]->counts, want * sizeof *v);
        at += want;
    }
    *out = v;
    return 0;
}

int kb__grp_calls_run(kb_machine *m, const call *const *c, const int *ranks, int n, kb__err *err)
{
    if (c[0]->kind == CALL_INIT) return kb__ccl_prepare(m, NULL, NULL, err);
    if (c[0]->kind == CALL_BARRIER) return 0;
    kb_tensor *in = calloc((size_t)n, sizeof *in), *out = calloc((size_t)n, sizeof *out);
    if (!in || !out) {
        free(in);
        free(out);
        return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", kb__grp_call_label(c[0]));
    }
    uint32_t root = 0;
    for (int k = 0; k < n; k++) {
        in[k] = c[k]->in;
        out[k] = c[k]->out;
    }
    int rc = 0;
    if (c[0]->p2p) { /* pairwise: the sender's tensor */
        root = (uint32_t)c[0]->root_index;
    } else if (kb__ccl_has_root(c[0]->kind)) { /* the root's index: shards before it */
        int src = n > 1 ? c[0]->root_index : 0;
        for (int k = 0; k < src && !rc; k++) {
            kb__rt_tensor *t = kb__rt_tensor_get(m, in[k].id, err);
            if (!t)
                rc = err->code;
            else
                root += (uint32_t)t->plan.n_shards;
        }
        if (n == 1) root = (uint32_t)c[0]->root;
    }
    int64_t *counts = NULL;
    if (!rc && c[0]->kind == KB__CCL_ALL_TO_ALL_V) rc = gather_counts(m, c, ranks, n, &counts, err);
    kb__coll_req req = {.kind = (kb__ccl_collective)c[0]->kind,
                        .op = c[0]->op,
                        .n = (uint32_t)n,
                        .in = in,
                        .out = kb__ccl_has_outputs(c[0]->kind) ? out : NULL,
                        .root = root,
                        .ranks = ranks,
                        .n_ranks = ranks ? (uint32_t)n : 0,
                        .pairwise = c[0]->p2p != 0,
                        .counts = counts};
    kb__coll_info info;
    memset(&info, 0, sizeof info);
    if (!rc) rc = kb__ccl_run(m, &req, &info, err);
    if (!rc) {
        grp_machine *x = kb__grp_machine(m, err);
        if (x)
            keep_report(x, &info);
        else
            rc = err->code;
    }
    free(in);
    free(out);
    free(counts);
    return rc;
}

/* Its launch joins the members' streams. */
int kb__grp_round_run(kb_machine *m, const rt_group *g, const comm *cm, kb__err *err)
{
    int rc = 0;
    const call **calls = malloc((size_t)cm->n * sizeof *calls);
    int *ranks = malloc((size_t)cm->n * sizeof *ranks);
    rc = calls && ranks ? 0 : kb__err_set(err, KB_ENOMEM, "collective: out of host memory");
    for (int i = 0; !rc && i < cm->n; i++) {
        ranks[i] = kb__grp_member_of(cm, i);
        calls[i] = &g->pend[ranks[i]];
    }
    if (!rc) rc = kb__grp_calls_run(m, calls, ranks, cm->n, err);
    free(calls);
    free(ranks);
    return rc;
}

int kb_ccl_last(const kb_machine *m, kb_ccl_report *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!m || !out) return KB_EINVAL;
    const grp_machine *x = kb__grp_machine_peek(m);
    if (!x || !x->has_last) return KB_ENOTFOUND;
    *out = x->last;
    return 0;
}
