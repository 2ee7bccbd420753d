/*
 * predict.c — a collective call's message sizes and its report: the
 * figures kb__coll_info carries and the α-β prediction of the algorithm
 * (ccl/alphabeta.h, docs/ccl.md "α-β model"), beside the simulated time.
 * Nothing here changes what the simulation does.
 *
 * Cost: O(buffers) for the sizes; a prediction costs its model's
 * (alphabeta.h), host work only.
 */
#include "ccl/call.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/alphabeta.h"
#include "host/device.h"
#include "pe/ipcq.h"
#include "runtime/machine.h"

/* Bytes of one message the kernels aim for: four slots of the built-in
 * ring (measured: 8-32 KiB pieces give the same ring all-reduce time within
 * 3%; smaller pieces cost per-message overheads, larger ones pipelining). */
#define PIECE_TARGET_BYTES (16u * 1024u)

/* Message size (elements), ring window and TCM room for the kernels: a
 * piece fits the tile scratch (the ring keeps up to 2 windows of pieces,
 * ring.c; mesh and tree size their in-flight receives from tcm_pieces,
 * mesh_tree.c), and for mesh and tree one message fits one ring (their
 * deadlock-freedom rests on it). */
void kb__ccl_call_sizes(const kb_machine *m, const kb__ccl_call *c, kb_ccl_sched *s)
{
    uint64_t esize = kb__dtype_size(c->dtype), scratch = UINT64_MAX;
    for (uint32_t r = 0; r < c->p; r++) {
        const kb__tcm *t = &m->pe_units[c->pes[r]]->tcm;
        if (t->size - t->base < scratch) scratch = t->size - t->base;
    }
    uint64_t piece = PIECE_TARGET_BYTES;
    if (piece > scratch / 16) piece = scratch / 16;
    const kb__ccl_settings *q = &c->inst[0]->plan->r.s; /* the same in every install */
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    if (c->mod->topology != KB__CCL_RING_1D && c->mod->topology != KB__CCL_HIER) {
        uint64_t ring = (uint64_t)q->n_slots * payload;
        if (piece > ring) piece = ring;
    }
    if (piece > payload) piece -= piece % payload;
    s->piece = (int64_t)(piece / esize ? piece / esize : 1);
    uint64_t fit = scratch / ((uint64_t)s->piece * esize), window = fit / 2;
    s->window = window > KB__CCL_WINDOW_MAX ? KB__CCL_WINDOW_MAX : window ? (int64_t)window : 1;
    s->tcm_pieces = fit ? (int64_t)fit : 1;
}

/* The hierarchical all-reduce's, reduce-scatter's and all-gather's prediction
 * (kb__ccl_hier_model_get) into info. */
static void fill_hier(const kb_machine *m, const kb__ccl_call *c, uint64_t piece,
                      kb__coll_info *info)
{
    kb__ccl_collective kind = c->r->kind;
    if ((kind != KB__CCL_ALL_REDUCE && kind != KB__CCL_ALL_GATHER &&
         kind != KB__CCL_REDUCE_SCATTER) ||
        c->p < 2)
        return;
    kb__ccl_hier_model hm;
    kb__err e;
    uint64_t esize = kb__dtype_size(c->dtype), n = info->bytes_per_rank, p = c->p;
    if (kb__ccl_hier_model_get(m->dev->topo, c->inst[0]->plan, kind, (uint64_t)c->elems, esize,
                               piece, (uint64_t)c->sched.window, &hm, &e))
        return;
    info->predicted_ps = hm.predicted_ps;
    info->ends_ps = hm.ends_ps;
    info->alpha_ps = hm.hops ? (double)((hm.path_ps + hm.hops - 1) / hm.hops) : 0;
    info->link_bw_gbs = hm.bw_gbs;
    double moved = kind == KB__CCL_ALL_REDUCE       ? 2.0 * (double)(p - 1) / (double)p * (double)n
                   : kind == KB__CCL_REDUCE_SCATTER ? (double)(p - 1) / (double)p * (double)n
                                                    : (double)(p - 1) * (double)n;
    uint64_t t_bw = hm.phase_ps[0] + hm.phase_ps[1];
    info->beta_ps_per_byte = t_bw && moved > 0 ? (double)t_bw / moved : 0;
    for (int ph = 0; ph < 2; ph++) {
        info->phase_ps[ph] = hm.phase_ps[ph];
        snprintf(info->bottleneck[ph], sizeof info->bottleneck[ph], "%s", hm.bottleneck[ph]);
    }
}

/* A one-phase model's figures into info: α the path's mean hop, β its
 * bandwidth term per byte of the rank's buffer, phase 0 that term and its
 * bottleneck, its fill and drain (0: none). */
static void fill_one_phase(kb__coll_info *info, uint64_t predicted_ps, uint64_t path_ps,
                           uint32_t hops, double bw_gbs, uint64_t bw_ps, const char *bottleneck,
                           uint64_t ends_ps)
{
    info->predicted_ps = predicted_ps;
    info->ends_ps = ends_ps;
    info->alpha_ps = hops ? (double)((path_ps + hops - 1) / hops) : 0;
    info->link_bw_gbs = bw_gbs;
    info->beta_ps_per_byte =
        info->bytes_per_rank ? (double)bw_ps / (double)info->bytes_per_rank : 0;
    info->phase_ps[0] = bw_ps;
    snprintf(info->bottleneck[0], sizeof info->bottleneck[0], "%s", bottleneck);
}

/* The ring chains' prediction (kb__ccl_chain_model_get: broadcast, reduce,
 * send_recv) into info; its bandwidth term in phase_ps[0]. */
static void fill_chain(const kb_machine *m, const kb__ccl_call *c, uint64_t piece,
                       kb__coll_info *info)
{
    kb__ccl_collective kind = c->r->kind;
    if (c->p < 2 || c->r->pairwise || c->n_inst != 1) return;
    kb__ccl_chain ch = kind == KB__CCL_BROADCAST ? KB__CCL_CHAIN_BROADCAST
                       : kind == KB__CCL_REDUCE  ? KB__CCL_CHAIN_REDUCE
                                                 : KB__CCL_CHAIN_SEND;
    kb__ccl_chain_model cm;
    kb__err e;
    if (kb__ccl_chain_model_get(m->dev->topo, c->inst[0]->plan, ch, c->sched.root,
                                info->bytes_per_rank, kb__dtype_size(c->dtype), piece, &cm, &e))
        return;
    /* the bytes the busiest rank's links carry: N */
    fill_one_phase(info, cm.predicted_ps, cm.path_ps, cm.hops, cm.bw_gbs, cm.bw_ps, cm.bottleneck,
                   cm.ends_ps);
}

/* The ring all-to-alls' prediction (kb__ccl_a2a_model_get: all_to_all,
 * and all_to_all_v with the call's counts) into info; its bandwidth term
 * in phase_ps[0]. */
static void fill_a2a(const kb_machine *m, const kb__ccl_call *c, uint64_t piece,
                     kb__coll_info *info)
{
    if (c->p < 2 || c->n_inst != 1) return;
    kb__ccl_a2a_model am;
    kb__err e;
    const int64_t *counts = c->r->kind == KB__CCL_ALL_TO_ALL_V ? c->r->counts : NULL;
    if (kb__ccl_a2a_model_get(m->dev->topo, c->inst[0]->plan, counts, c->index, (uint64_t)c->elems,
                              kb__dtype_size(c->dtype), piece, (uint64_t)c->sched.window, &am, &e))
        return;
    fill_one_phase(info, am.predicted_ps, am.path_ps, am.hops, am.bw_gbs, am.bw_ps, am.bottleneck,
                   0);
}

/* The mesh and tree all-reduces' prediction (kb__ccl_tree_model_get) into
 * info; its bandwidth term in phase_ps[0]. */
static void fill_tree(const kb_machine *m, const kb__ccl_call *c, uint64_t piece,
                      kb__coll_info *info)
{
    if (c->p < 2 || c->n_inst != 1 || c->r->kind != KB__CCL_ALL_REDUCE) return;
    kb__ccl_tree_model tm;
    kb__err e;
    if (kb__ccl_tree_model_get(m->dev->topo, c->inst[0]->plan, info->bytes_per_rank,
                               kb__dtype_size(c->dtype), piece, &tm, &e))
        return;
    /* the bytes the busiest rank's links carry: N each way per tree edge */
    fill_one_phase(info, tm.predicted_ps, tm.path_ps, tm.hops, tm.bw_gbs, tm.bw_ps, tm.bottleneck,
                   tm.ends_ps);
}

/* The phases of a flat ring (half: 0 or 1 alone, -1 both) that step at
 * their program's own pace (kb__ccl_ring_prog_holds): each at least those
 * steps, its hops inside them; bit ph of *held set for each. */
static int prog_steps(const kb__topo *t, const kb__ccl_plan *plan, int half, uint64_t chunk,
                      uint64_t piece, uint64_t esize, kb__ccl_ring_bw *bw, unsigned *held,
                      kb__err *err)
{
    *held = 0;
    for (int ph = 0; ph < 2; ph++) {
        if (half >= 0 && half != ph) continue;
        uint64_t step;
        int rc = kb__ccl_ring_prog_holds(t, plan, bw, ph, ph, plan->world_size, chunk, piece, esize,
                                         &step, err);
        if (rc) return rc;
        if (!step) continue;
        kb__ccl_ring_prog_phase(bw, ph, plan->world_size, step);
        *held |= 1u << ph;
    }
    return 0;
}

/* The algorithm's model's prediction and figures into info (its family's
 * model; nothing for pairwise sends). */
static void fill_model(const kb_machine *m, const kb__ccl_call *c, uint64_t piece,
                       kb__coll_info *info)
{
    const kb__ccl_installed *in = c->inst[0];
    kb__ccl_collective kind = c->r->kind;
    int half = kind == KB__CCL_REDUCE_SCATTER ? 0 : kind == KB__CCL_ALL_GATHER ? 1 : -1;
    if (c->mod->topology == KB__CCL_HIER) {
        fill_hier(m, c, piece, info);
        return;
    }
    if (c->mod->topology == KB__CCL_MESH_2D || c->mod->topology == KB__CCL_TREE) {
        fill_tree(m, c, piece, info);
        return;
    }
    if (c->mod->topology == KB__CCL_RING_1D &&
        (kind == KB__CCL_BROADCAST || kind == KB__CCL_REDUCE || kind == KB__CCL_SEND_RECV)) {
        fill_chain(m, c, piece, info);
        return;
    }
    if (c->mod->topology == KB__CCL_RING_1D &&
        (kind == KB__CCL_ALL_TO_ALL || kind == KB__CCL_ALL_TO_ALL_V)) {
        fill_a2a(m, c, piece, info);
        return;
    }
    if ((kind != KB__CCL_ALL_REDUCE && half < 0) || c->mod->topology != KB__CCL_RING_1D) return;
    kb__ccl_alphabeta ab;
    kb__ccl_ring_bw bw;
    kb__err e;
    /* a step's chunk (an all-gather's is a whole input buffer): its first
     * piece is the hops' message */
    uint64_t p = c->p, n = info->bytes_per_rank, elems = (uint64_t)c->elems,
             esize = kb__dtype_size(c->dtype);
    uint64_t chunk = half == 1 ? n : (elems + p - 1) / p * esize;
    const kb__topo *topo = m->dev->topo;
    if (half < 0 ? kb__ccl_ring_allreduce_bw(topo, in->plan, n, piece, (uint64_t)c->sched.window,
                                             &bw, &e)
                 : kb__ccl_ring_half_bw(topo, in->plan, chunk, piece, (uint64_t)c->sched.window,
                                        half, &bw, &e))
        return;
    uint64_t hops = half < 0 ? 2 * (p - 1) : p - 1;
    unsigned held, all = half < 0 ? 3u : 1u << half;
    if (prog_steps(topo, in->plan, half, chunk, piece, esize, &bw, &held, &e)) return;
    uint64_t t_bw = bw.phase_ps[0] + bw.phase_ps[1];
    /* the hops' latency that the steps' bandwidth term does not hide, of
     * the phases that keep their hops (an all-reduce's both, or one
     * phase's where the other steps at its program's pace): all of it
     * past the step where the credits pace every such phase */
    bool paced = true;
    for (int ph = 0; ph < 2; ph++)
        if ((all & ~held & 1u << ph) && !kb__ccl_ring_credit_paced(&bw, ph)) paced = false;
    if (kb__ccl_alphabeta_ring_under(topo, in->plan, t_bw, hops, chunk, piece, paced, &ab, &e))
        return;
    uint64_t path = held == all ? 0 : held || half >= 0 ? ab.half_path_ps : ab.path_ps;
    /* with fewer elements than ranks only the chunks that hold data are
     * sent (an all-reduce: a reduce-scatter's chunks divide by p) */
    if (half < 0) {
        for (int ph = 0; ph < 2; ph++)
            bw.phase_ps[ph] = kb__ccl_ring_data_steps_ps(bw.phase_ps[ph], elems, (uint32_t)p);
        t_bw = bw.phase_ps[0] + bw.phase_ps[1];
    }
    /* no phase ends before its chunks' chains (kb__ccl_ring_chain_ps) */
    uint64_t chain = 0;
    if (kb__ccl_ring_chain_ps(topo, in->plan, half, elems, esize, chunk < piece ? chunk : piece,
                              &chain, &e))
        return;
    info->predicted_ps = p < 2 ? 0 : path + bw.ends_ps + t_bw;
    info->ends_ps = p < 2 ? 0 : bw.ends_ps;
    if (chain > info->predicted_ps) {
        info->predicted_ps = chain;
        for (int ph = 0; ph < 2; ph++)
            snprintf(bw.bottleneck[ph], sizeof bw.bottleneck[ph],
                     "the chain of a chunk's first piece around the ring");
    }
    info->alpha_ps = p < 2 ? 0 : (double)((path + hops - 1) / hops);
    info->link_bw_gbs = ab.bw_gbs;
    /* the textbook bytes each rank's links carry: 2(p-1)/p N for the
     * all-reduce, (p-1)/p N for the reduce-scatter, (p-1) N for the
     * all-gather of N-byte inputs */
    double moved = half < 0    ? 2.0 * (double)(p - 1) / (double)p * (double)n
                   : half == 0 ? (double)(p - 1) / (double)p * (double)n
                               : (double)(p - 1) * (double)n;
    info->beta_ps_per_byte = t_bw && moved > 0 ? (double)t_bw / moved : 0;
    for (int ph = 0; ph < 2; ph++) {
        info->phase_ps[ph] = bw.phase_ps[ph];
        snprintf(info->bottleneck[ph], sizeof info->bottleneck[ph], "%s", bw.bottleneck[ph]);
    }
}

/* Appends ", ITEM" (the first without its comma) to buf of n bytes. */
static void add_item(char *buf, size_t n, const char *item)
{
    size_t len = strlen(buf);
    if (len < n) snprintf(buf + len, n - len, "%s%s", len ? ", " : "", item);
}

/* Ring neighbours (rank k and k + 1, the last and the first) on different
 * cubes of plan, into *pairs, and the cubes its ranks span, into *cubes
 * (0 when out of memory: then nothing is named). */
static void cube_crossings(const kb__ccl_plan *plan, uint32_t *pairs, uint32_t *cubes)
{
    uint32_t p = plan->world_size, sips = 0, per_sip = 0;
    *pairs = *cubes = 0;
    for (uint32_t k = 0; k < p; k++) {
        const kb__ccl_loc *a = &plan->loc[k], *b = &plan->loc[(k + 1) % p];
        if (a->sip != b->sip || a->cube != b->cube) ++*pairs;
        if (a->sip >= sips) sips = a->sip + 1;
        if (a->cube >= per_sip) per_sip = a->cube + 1;
    }
    unsigned char *seen = calloc((size_t)sips * per_sip, 1);
    for (uint32_t k = 0; seen && k < p; k++) {
        size_t i = (size_t)plan->loc[k].sip * per_sip + plan->loc[k].cube;
        *cubes += !seen[i];
        seen[i] = 1;
    }
    free(seen);
}

/* Which of the queues' settings q (messages of up to `piece` bytes) and
 * the senders' wait lie off what the credit rules were measured on
 * (docs/ccl.md, "Other queue geometries" and "Other wakes": rows within 10 %
 * there): at least 4 slots of at least 4 KiB, a message taking the whole
 * ring or at most a quarter of it, vc chunks of at least 4 KiB, credits of
 * at most 64 B, senders asleep 200 ns; for the ring all-reduce (`ring_ar`)
 * only, rings in SRAM or HBM too, and with its rings in TCM senders asleep
 * 0 ns or polling at most every 100 ns; hello_send (`send_recv`, its own
 * pacing) on its own queues, 2 slots of 4 KiB; ranks of plan placed in
 * order, a pair of ring neighbours on different cubes per cube spanned at
 * most. buf ("" when none) names each and what was measured. */
static void off_fit(const kb__topo_params *tp, const kb__ccl_settings *q, const kb__ccl_plan *plan,
                    uint64_t piece, bool send_recv, bool ring_ar, char *buf, size_t n)
{
    char item[192];
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    uint64_t msg = piece > payload ? (piece + payload - 1) / payload : 1;
    buf[0] = 0;
    if (send_recv && (q->n_slots != 2 || q->slot_size != 4096)) {
        snprintf(item, sizeof item, "%u slots of %llu B (measured: hello_send's 2 of 4 KiB)",
                 q->n_slots, (unsigned long long)q->slot_size);
        add_item(buf, n, item);
    }
    if (!send_recv &&
        (q->n_slots < 4 || q->slot_size < 4096 || (q->n_slots != msg && q->n_slots < 4 * msg))) {
        snprintf(item, sizeof item,
                 "%u slots of %llu B, messages of %llu slots (measured: >= 4 slots of >= 4 KiB, "
                 "a message the whole ring or <= a quarter of it)",
                 q->n_slots, (unsigned long long)q->slot_size, (unsigned long long)msg);
        add_item(buf, n, item);
    }
    if (q->vc_chunk_size < 4096) {
        snprintf(item, sizeof item, "vc chunks of %llu B (measured: 4 KiB or more)",
                 (unsigned long long)q->vc_chunk_size);
        add_item(buf, n, item);
    }
    if (q->credit_size > 64) {
        snprintf(item, sizeof item, "credits of %llu B (measured: 64 B)",
                 (unsigned long long)q->credit_size);
        add_item(buf, n, item);
    }
    uint32_t pairs, cubes;
    cube_crossings(plan, &pairs, &cubes);
    if (cubes > 1 && pairs > cubes) {
        /* docs/ccl.md, "Placing ranks yourself" */
        snprintf(item, sizeof item,
                 "%u ring neighbours on different cubes of %u (measured: one pair a cube, "
                 "ranks in order or reversed; placement=stride:3: 9 of 78 rows outside 10 %%)",
                 pairs, cubes);
        add_item(buf, n, item);
    }
    if (!ring_ar && q->buffer_kind != KB__CCL_BUF_TCM) {
        /* docs/ccl.md, "Rings in SRAM and HBM, over every algorithm" */
        bool sram = q->buffer_kind == KB__CCL_BUF_SRAM;
        snprintf(item, sizeof item,
                 "rings in %s (measured: the ring all-reduce; the others at 2-16 ranks: %s of "
                 "172 rows outside 10 %%)",
                 sram ? "SRAM" : "HBM", sram ? "28" : "50");
        add_item(buf, n, item);
    }
    double wake = tp->pe.ipcq_wake_ns, poll = tp->pe.ipcq_poll_interval_ns;
    bool poll_q = q->backpressure == KB__CCL_BP_POLL;
    if (!poll_q && wake != 0 && wake != 200) {
        snprintf(item, sizeof item, "senders asleep %g ns (measured: 0 or 200 ns)", wake);
        add_item(buf, n, item);
    }
    if (poll_q && poll > 100) {
        snprintf(item, sizeof item, "senders polling every %g ns (measured: up to 100 ns)", poll);
        add_item(buf, n, item);
    } else if (!(ring_ar && q->buffer_kind == KB__CCL_BUF_TCM) && (poll_q || wake == 0)) {
        /* docs/ccl.md, "Senders that never sleep, over every algorithm" */
        snprintf(item, sizeof item,
                 "senders that %s (measured: the TCM ring all-reduce; all at 2-16 ranks: "
                 "%s of 236 rows outside 10 %%)",
                 poll_q ? "poll" : "never sleep", poll_q ? "9" : "8");
        add_item(buf, n, item);
    }
}

void kb__ccl_report_of(const kb__coll_info *info, kb_ccl_report *o)
{
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
    o->ends_ps = info->ends_ps;
    o->calibrated = (int)info->calibrated;
    memcpy(o->bottleneck, info->bottleneck, sizeof o->bottleneck);
    snprintf(o->buffer_kind, sizeof o->buffer_kind, "%s",
             kb__ccl_buffer_name(info->queues.buffer_kind));
    o->n_slots = (int)info->queues.n_slots;
    o->slot_size = info->queues.slot_size;
    o->piece_bytes = info->piece_bytes;
    memcpy(o->off_fit, info->off_fit, sizeof o->off_fit);
}

void kb__ccl_call_info(const kb_machine *m, const kb__ccl_call *c, const kb__rt_launch_times *t,
                       uint64_t piece, kb__coll_info *info)
{
    snprintf(info->algorithm, sizeof info->algorithm, "%s", c->algo->name);
    info->queues = c->inst[0]->plan->r.s;
    info->piece_bytes = piece;
    info->world = c->p;
    info->bytes_per_rank = (uint64_t)c->elems * kb__dtype_size(c->dtype);
    info->t_start = t->issue;
    info->t_end = t->end;
    info->t_run_start = t->start;
    info->t_run_end = t->pes_end;
    fill_model(m, c, piece, info);
    /* every rank's program starts pe.cpu.dispatch_ns after the launch
     * starts it (docs/pe-timing.md), inside the programs' span */
    if (info->predicted_ps) {
        uint64_t start = kb__ps_from_ns(m->dev->topo->params.pe.cpu_dispatch_ns);
        info->predicted_ps += start;
        info->ends_ps += start;
        bool ring_ar = c->r->kind == KB__CCL_ALL_REDUCE && c->algo->topology == KB__CCL_RING_1D;
        off_fit(&m->dev->topo->params, &info->queues, c->inst[0]->plan, piece,
                c->r->kind == KB__CCL_SEND_RECV, ring_ar, info->off_fit, sizeof info->off_fit);
    }
}
