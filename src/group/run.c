/*
 * run.c — a round's calls turned into one device collective
 * (group/internal.h): the checks that name the host rank at fault
 * (two ranks' buffers on one PE, output sizes, all_to_all_v counts), the
 * collective request (ccl/collective.h) with its root's buffer index and
 * count matrix, and the report kb_ccl_last returns.
 *
 * Cost: O(buffers) per call besides the collective (O(buffers²) for the
 * all_to_all_v matrix), one pass over the machine's PEs for the one-buffer-
 * per-PE check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group/internal.h"

static void keep_report(grp_machine *x, const kb__coll_info *info)
{
    kb_ccl_report *o = &x->last;
    memset(o, 0, sizeof *o);
    snprintf(o->algorithm, sizeof o->algorithm, "%s", info->algorithm);
    o->world = (int)info->world;
    o->bytes_per_rank = info->bytes_per_rank;
    o->installed = info->installed;
    o->install_ps = info->installed ? info->install.t_end - info->install.t_start : 0;
    o->start_ps = info->t_start;
    o->end_ps = info->t_end;
    o->run_start_ps = info->t_run_start;
    o->run_end_ps = info->t_run_end;
    o->predicted_ps = info->predicted_ps;
    o->alpha_ps = info->alpha_ps;
    o->beta_ps_per_byte = info->beta_ps_per_byte;
    o->link_bw_gbs = info->link_bw_gbs;
    memcpy(o->phase_ps, info->phase_ps, sizeof o->phase_ps);
    memcpy(o->bottleneck, info->bottleneck, sizeof o->bottleneck);
    snprintf(o->buffer_kind, sizeof o->buffer_kind, "%s",
             kb__ccl_buffer_name(info->queues.buffer_kind));
    o->n_slots = (int)info->queues.n_slots;
    o->slot_size = info->queues.slot_size;
    o->piece_bytes = info->piece_bytes;
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

static int64_t shard_elems(const kb__rt_tensor *t, int s)
{
    return (int64_t)(t->plan.shards[s].bytes / kb__dtype_size(t->dtype));
}

/* Reduce-scatter, all-gather and all-to-all: every member's output shards
 * hold N/p (reduce-scatter), p*N (all-gather) or N (all-to-all) elements of
 * the input's dtype, where N is the elements of one input buffer and p the
 * buffers of all members. Names the host rank at fault. */
static int check_outputs(kb_machine *m, const rt_group *g, const comm *cm, kb__err *err)
{
    const call *first = &g->pend[kb__grp_member_of(cm, 0)];
    int kind = first->kind;
    if (!kb__ccl_has_outputs(kind) || kind == KB__CCL_ALL_TO_ALL_V) return 0; /* counts: run.c */
    int64_t p = 0;
    const kb__rt_tensor *in0 = NULL;
    for (int i = 0; i < cm->n; i++) {
        int k = kb__grp_member_of(cm, i);
        const kb__rt_tensor *t = kb__rt_tensor_get(m, g->pend[k].in.id, err);
        if (!t)
            return kb__err_prefix(err, "%s: host rank %d's input: ", kb__grp_call_label(first), k);
        if (!in0) in0 = t;
        p += t->plan.n_shards;
    }
    int64_t n = shard_elems(in0, 0);
    int64_t want = kind == KB__CCL_REDUCE_SCATTER ? n / p : kind == KB__CCL_ALL_GATHER ? n * p : n;
    for (int i = 0; i < cm->n; i++) {
        int k = kb__grp_member_of(cm, i);
        const kb__rt_tensor *t = kb__rt_tensor_get(m, g->pend[k].out.id, err);
        if (!t)
            return kb__err_prefix(err, "%s: host rank %d's output: ", kb__grp_call_label(first), k);
        for (int s = 0; s < t->plan.n_shards; s++) {
            if (t->dtype == in0->dtype && shard_elems(t, s) == want) continue;
            char why[96];
            if (kind == KB__CCL_REDUCE_SCATTER)
                snprintf(why, sizeof why, "N/p: %lld input elements / %lld buffers", (long long)n,
                         (long long)p);
            else if (kind == KB__CCL_ALL_TO_ALL)
                snprintf(why, sizeof why, "N: as many as the input");
            else
                snprintf(why, sizeof why, "p*N: %lld buffers x %lld input elements", (long long)p,
                         (long long)n);
            return kb__err_set(err, KB_EINVAL,
                               "%s: host rank %d's output '%s' shard %d is %s [%lld elements], "
                               "expected %s [%lld] (%s)",
                               kb__grp_call_label(first), k, t->name, s, kb__dtype_name(t->dtype),
                               (long long)shard_elems(t, s), kb__dtype_name(in0->dtype),
                               (long long)want, why);
        }
    }
    return 0;
}

/* A collective's buffers are the shards of every member's input, one per
 * PE: two host ranks whose inputs have shards on the same PE are named with
 * that PE (the collective layer would name only the two shards). Tensors
 * are placed from cube 0, PE 0 of a SIP unless the policy's first_cube /
 * first_pe say otherwise, so that is the usual remedy. */
static int check_pes_apart(kb_machine *m, const rt_group *g, const comm *cm, kb__err *err)
{
    const call *first = &g->pend[kb__grp_member_of(cm, 0)];
    int kind = first->kind;
    if (kind < 0 || kind >= KB__CCL_COLLECTIVE_COUNT) return 0;
    int *owner = malloc(m->n_pes * sizeof *owner), *shard = malloc(m->n_pes * sizeof *shard);
    int rc = owner && shard
                 ? 0
                 : kb__err_set(err, KB_ENOMEM, "%s: out of host memory", kb__grp_call_label(first));
    for (uint32_t i = 0; !rc && i < m->n_pes; i++)
        owner[i] = -1;
    for (int i = 0; !rc && i < cm->n; i++) {
        int k = kb__grp_member_of(cm, i);
        const kb__rt_tensor *t = kb__rt_tensor_get(m, g->pend[k].in.id, err);
        if (!t) {
            rc = kb__err_prefix(err, "%s: host rank %d's input: ", kb__grp_call_label(first), k);
            break;
        }
        for (int s = 0; !rc && s < t->plan.n_shards; s++) {
            const kb__shard *sh = &t->plan.shards[s];
            uint32_t gi = kb__rt_pe_index(m, sh->sip, sh->cube, sh->pe);
            int o = owner[gi];
            if (o >= 0 && o != k) {
                const kb__rt_tensor *ot = kb__rt_tensor_get(m, g->pend[o].in.id, err);
                rc = kb__err_set(
                    err, KB_EINVAL,
                    "%s: host ranks %d and %d both have a buffer on sip%d/cube%d/pe%d (rank "
                    "%d: tensor '%s' shard %d; rank %d: tensor '%s' shard %d), and a PE holds "
                    "one buffer of a collective at most. Tensors are placed from cube 0, PE 0 "
                    "of their SIP unless the policy's first_cube / first_pe move them: give "
                    "ranks that share a SIP different first_pe (rank / %u with one rank per "
                    "PE), or spawn one rank per SIP (kb_spawn nprocs 0)",
                    kb__grp_call_label(first), o, k, sh->sip, sh->cube, sh->pe, o,
                    ot ? ot->name : "?", shard[gi], k, t->name, s, m->sips);
            }
            owner[gi] = k;
            shard[gi] = s;
        }
    }
    free(owner);
    free(shard);
    return rc;
}

/* Its launch joins the members' streams. */
int kb__grp_round_run(kb_machine *m, const rt_group *g, const comm *cm, kb__err *err)
{
    int rc = check_pes_apart(m, g, cm, err);
    if (!rc) rc = check_outputs(m, g, cm, err);
    if (rc) return rc;
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
