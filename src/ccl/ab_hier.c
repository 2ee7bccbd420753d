/*
 * ab_hier.c — the α-β model of the hierarchical collectives (topology
 * hierarchical, alphabeta.h and docs/ccl.md): all-reduce, all-gather and
 * reduce-scatter as rings inside each group (the SIP's PEs, port E) and
 * rings across the groups between peer PEs (port S), each ring's path
 * from its hops and each phase's bandwidth term from the ring machinery
 * of alphabeta.c, phase by phase as the kernel runs them one after the
 * other, less what the peers' exchanges and the group all-gather overlap
 * when the group rings' ranks end their reduce-scatter apart (the
 * stagger).
 *
 * Invariants: a side's bottleneck names its largest term; the prediction
 * is path + reduce side + gather side. A prediction only.
 * Cost: a few ring bandwidth terms (O(links + nodes + world size × route
 * length × 64) each), the peers' rings' hops, O(group × S × route
 * length), and the stagger's max-plus passes, O(world size × group).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "ccl/colls.h"
#include "pe/ipcq.h"

/* ---- the hierarchical collectives -------------------------------------------- */

/* One ring stream of a hierarchical collective run alone: every rank sends
 * rp - 1 chunks through dir, loads `loads` chunks and stores `stores`;
 * its term and bottleneck in bw's phase 0. */
static int one_phase(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, double loads, double stores,
                     kb__ccl_ring_bw *bw, kb__err *err)
{
    const bool want[2] = {true, false};
    const double ld[2] = {loads, 0}, st[2] = {stores, 0};
    return kb__ab_ring_bw(t, plan, dir, rp, chunk, piece, want, ld, st, bw, err);
}

/* The slowest of the rings through dir (S: the peers' rings, one per place
 * l in a group, only those whose region holds data when elems is not 0:
 * the all-reduce's, data chunk l + 1 of its elems cut in L; E: the
 * group's, all alike): its whole path (half 0) or one phase's (half 1)
 * under a stream of `steps` steps of `chunk`-byte chunks whose bandwidth
 * term is bw_ps (each hop past the steps' slack,
 * kb__ccl_alphabeta_ring_under; paced: its credits pace every phase of
 * ph, which is -1 for both, kb__ccl_ring_credit_paced), and its textbook B. */
static int rings_path(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, int half,
                      const kb__ccl_ring_bw *ring, int ph, uint64_t steps, uint64_t chunk,
                      uint64_t piece, uint64_t elems, uint64_t *path, double *bw, kb__err *err)
{
    uint32_t L = plan->group;
    bool paced = ph < 0 ? kb__ccl_ring_credit_paced(ring, 0) && kb__ccl_ring_credit_paced(ring, 1)
                        : kb__ccl_ring_credit_paced(ring, ph);
    uint64_t bw_ps = ph < 0 ? ring->phase_ps[0] + ring->phase_ps[1] : ring->phase_ps[ph];
    uint64_t slack = kb__ab_step_slack_ps(bw_ps, steps, chunk, piece, paced),
             msg = kb__ab_first_msg_bytes(chunk, piece);
    *path = 0;
    bool first = true;
    for (uint32_t l = 0; l < (dir == KB__CCL_S ? L : 1); l++) {
        if (dir == KB__CCL_S && elems && !kb__ab_chunk_elems(elems, L, (l + 1) % L)) continue;
        kb__ccl_alphabeta ab;
        int rc = kb__ab_ring_hops(t, plan, dir, l, msg, slack, &ab, err);
        if (rc) return rc;
        uint64_t x = half ? ab.half_path_ps : ab.path_ps;
        if (x > *path) *path = x;
        if (first || ab.bw_gbs < *bw) *bw = ab.bw_gbs;
        first = false;
    }
    return 0;
}

/* The path of phase ph of bw, a stream of the group rings (kind 0 a
 * reduce-scatter's, 1 an all-gather's) of `chunk`-byte chunks: none when
 * it steps at its program's own pace (kb__ccl_ring_prog_holds; bw's phase
 * then at least those steps), else its hops past its steps
 * (rings_path); *bw_gbs its textbook B either way. */
static int group_path(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_ring_bw *bw, int ph,
                      int kind, uint64_t chunk, uint64_t piece, uint64_t esize, uint64_t *path,
                      double *bw_gbs, kb__err *err)
{
    uint32_t L = plan->group;
    uint64_t step;
    int rc = kb__ccl_ring_prog_holds(t, plan, bw, ph, kind, L, chunk, piece, esize, &step, err);
    if (!rc)
        rc = rings_path(t, plan, KB__CCL_E, 1, bw, ph, L - 1, chunk, piece, 0, path, bw_gbs, err);
    if (rc || !step) return rc;
    kb__ccl_ring_prog_phase(bw, ph, L, step);
    *path = 0;
    return 0;
}

/* side (0 reduce, 1 gather) += ps, naming what bounds it when it is the
 * largest term of that side so far. */
static void hier_add(kb__ccl_hier_model *m, uint64_t best[2], int side, uint64_t ps,
                     const char *what)
{
    m->phase_ps[side] += ps;
    if (ps <= best[side]) return;
    best[side] = ps;
    snprintf(m->bottleneck[side], sizeof m->bottleneck[side], "%s", what);
}

/* ---- the group rings' stagger ------------------------------------------------
 *
 * A group ring whose streams' credit loops differ (the stream that closes
 * the ring back over the cube links, those that cross a cube) does not
 * leave its phase at once: each rank's step waits for its own stream's
 * pace and for its predecessor's piece a hop away, and runs at most a hop
 * ahead of its successor, whose credits it needs (kb__ab_ring_steps). The
 * ranks downstream of the slowest stream end earlier by its pace less a
 * hop a rank, those upstream a hop a rank. */

void kb__ab_ring_steps(uint32_t L, const uint32_t *order, const double *pace, const double *hop,
                       uint32_t steps, const double *start, double *end, double *t)
{
    for (uint32_t i = 0; i < L; i++)
        t[order[i]] = start[order[i]];
    for (uint32_t s = 1; s < steps; s++) {
        /* down the ring, so t_{i-1}(s - 1) is still there when i needs it */
        double last = t[order[L - 1]];
        for (uint32_t i = L; i-- > 0;) {
            uint32_t k = order[i], b = order[(i + L - 1) % L];
            t[k] = fmax(t[k] + pace[k], (i ? t[b] : last) + hop[b]);
        }
        /* a hop ahead of the successor at most: twice around the ring
         * carries a successor's step to every rank before it */
        for (int sweep = 0; sweep < 2; sweep++)
            for (uint32_t i = L; i-- > 0;) {
                uint32_t k = order[i];
                t[k] = fmax(t[k], t[order[(i + 1) % L]] - hop[k]);
            }
    }
    for (uint32_t i = 0; i < L; i++) {
        uint32_t b = order[(i + L - 1) % L];
        end[order[i]] = t[b] + pace[b] + hop[b];
    }
}

/* plan's group rings in ring order: group g's i-th rank at order[g L + i]
 * (from its lowest rank, along port E). */
static int group_order(const kb__ccl_plan *plan, uint32_t *order, kb__err *err)
{
    uint32_t L = plan->group, p = plan->world_size;
    for (uint32_t g = 0; g < p / L; g++) {
        uint32_t k = g * L;
        for (uint32_t i = 0; i < L; i++) {
            order[g * L + i] = k;
            int32_t next = plan->ports[k][KB__CCL_E].peer;
            if (next < 0 || (uint32_t)next >= p)
                return kb__err_set(err, KB_EINVAL, "hierarchical model: rank %u has no next rank",
                                   k);
            k = (uint32_t)next;
        }
    }
    return 0;
}

/* kb__ab_ring_steps over every group ring of plan; the latest end. */
static double groups_steps(const kb__ccl_plan *plan, const uint32_t *order, const double *pace,
                           const double *hop, const double *start, double *end, double *t)
{
    uint32_t L = plan->group, p = plan->world_size;
    double last = 0;
    for (uint32_t g = 0; g < p / L; g++)
        kb__ab_ring_steps(L, order + g * L, pace, hop, L - 1, start, end, t);
    for (uint32_t k = 0; k < p; k++)
        last = fmax(last, end[k]);
    return last;
}

/* How much sooner than its phases one after the other a hierarchical
 * all-reduce ends when its group rings' ranks end their reduce-scatter
 * apart (kb__ab_ring_steps, each stream at its own term's pace over the
 * L - 1 steps): gain[0] for its peers' exchanges, gain[1] for its group
 * all-gather. A rank's exchange starts when it and its peer have left the
 * reduce-scatter; a group's exchanges take peers_ps on the link they
 * share, each rank's 1/L of it, in the order they come. The all-gather
 * then starts rank by rank: it gains what its staggered ring_steps end
 * sooner after the last start than the same ring started at once. */
static int stagger_gain_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk,
                           uint64_t piece, uint64_t esize, double peers_ps, double *peers_gain,
                           double *ag_gain, kb__err *err)
{
    uint32_t L = plan->group, p = plan->world_size;
    *peers_gain = 0;
    if (ag_gain) *ag_gain = 0;
    double *buf = calloc(8 * (size_t)p, sizeof *buf);
    uint32_t *order = calloc(p, sizeof *order);
    int rc = buf && order ? 0 : kb__err_set(err, KB_ENOMEM, "out of memory");
    double *rs = buf, *ag = buf + p, *hop_rs = buf + 2 * p, *hop_ag = buf + 3 * p,
           *start = buf + 4 * p, *end = buf + 5 * p, *tmp = buf + 6 * p, *done = buf + 7 * p;
    if (!rc) rc = group_order(plan, order, err);
    if (!rc) rc = kb__ab_ring_streams_ps(t, plan, KB__CCL_E, L, chunk, piece, L, 1, rs, err);
    if (!rc && ag_gain)
        rc = kb__ab_ring_streams_ps(t, plan, KB__CCL_E, L, chunk, piece, 1, L - 1, ag, err);
    /* a step's first piece to the next rank: its slots, the hop, the copy,
     * and in the reduce-scatter the combine */
    uint64_t xfer = piece < chunk ? piece : chunk, add = kb__ab_combine_ps(&t->params, xfer, esize);
    for (uint32_t k = 0; !rc && k < p; k++) {
        uint32_t n = (uint32_t)plan->ports[k][KB__CCL_E].peer;
        uint64_t hr = 0, ha = 0;
        double bw = 0;
        rc = kb__ab_piece_hop_ps(t, plan, k, n, xfer, add, &hr, &bw, err);
        if (!rc && ag_gain) rc = kb__ab_piece_hop_ps(t, plan, k, n, xfer, 0, &ha, &bw, err);
        hop_rs[k] = (double)hr, hop_ag[k] = (double)ha;
        rs[k] /= L - 1, ag[k] /= L - 1;
    }
    if (!rc) {
        double last = groups_steps(plan, order, rs, hop_rs, start, end, tmp), w = peers_ps / L;
        double all_done = 0;
        for (uint32_t k = 0; k < p; k++) {
            int32_t peer = plan->ports[k][KB__CCL_S].peer;
            start[k] = peer >= 0 ? fmax(end[k], end[peer]) : end[k];
        }
        for (uint32_t g = 0; g < p / L; g++) {
            const uint32_t *o = order + g * L;
            double c = 0;
            for (uint32_t n = 0; n < L; n++) { /* the earliest rank not served yet */
                uint32_t at = 0;
                for (uint32_t i = 1; i < L; i++)
                    if (start[o[i]] < start[o[at]]) at = i;
                c = fmax(c, start[o[at]]) + w;
                done[o[at]] = c, start[o[at]] = HUGE_VAL;
            }
        }
        for (uint32_t k = 0; k < p; k++)
            all_done = fmax(all_done, done[k]);
        *peers_gain = last + peers_ps - all_done;
        if (ag_gain) {
            double staggered = groups_steps(plan, order, ag, hop_ag, done, end, tmp) - all_done;
            memset(start, 0, p * sizeof *start);
            *ag_gain = groups_steps(plan, order, ag, hop_ag, start, end, tmp) - staggered;
        }
    }
    free(buf);
    free(order);
    return rc;
}

/* The hierarchical all-reduce's chain: no rank's last store comes before a
 * data chunk of the group's region (its first piece) is loaded, combined
 * around the group ring and stored by the rank it ends at, then, past the
 * fence, all-reduced over that rank's peers (their ring's longest chain of
 * that region, kb__ab_ring_chains) and, past the next fence, loaded again
 * and forwarded around the group ring, each rank storing it. Each store
 * and load between the phases as the slowest rank's alone. */
static int hier_chain_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t elems,
                         uint64_t esize, uint64_t piece, uint64_t *out, kb__err *err)
{
    uint32_t L = plan->group, p = plan->world_size, S = p / L;
    uint64_t region = (elems + L - 1) / L, xs = (region + S - 1) / S * esize, xg = region * esize;
    xs = xs < piece ? xs : piece, xg = xg < piece ? xg : piece;
    *out = 0;
    double *v = calloc(4 * (size_t)p, sizeof *v);
    if (!v) return kb__err_set(err, KB_ENOMEM, "out of memory");
    double *holds = v, *chain = v + p, *peers = v + 2 * p, *mid = v + 3 * p, worst = 0;
    int rc = 0;
    if (S > 1) { /* rank (g, l) all-reduces data chunk l + 1 of L with its peers */
        for (uint32_t k = 0; k < p; k++)
            holds[k] =
                kb__ab_chunk_elems(kb__ab_chunk_elems(elems, L, (k % L + 1) % L), S, k / L) > 0;
        rc = kb__ab_ring_chains(t, plan, KB__CCL_S, -1, holds, xs, esize, NULL, chain, err);
        for (uint32_t k = 0; !rc && k < p; k++)
            peers[k % L] = fmax(peers[k % L], chain[k]);
    }
    uint64_t ld = 0, st = 0;
    if (!rc && L > 1 && !(rc = kb__ab_xfers_slowest(t, plan, xg, &ld, &st, err))) {
        for (uint32_t k = 0; k < p; k++) {
            holds[k] = kb__ab_chunk_elems(elems, L, k % L) > 0;
            mid[k] = (double)(st + ld) + peers[k % L];
        }
        rc = kb__ab_ring_chains(t, plan, KB__CCL_E, -1, holds, xg, esize, mid, chain, err);
    }
    for (uint32_t k = 0; !rc && k < p; k++)
        worst = fmax(worst, L > 1 ? chain[k] : peers[0]);
    free(v);
    if (!rc) *out = (uint64_t)llround(worst);
    return rc;
}

static int hier_allreduce_model(const kb__topo *t, const kb__ccl_plan *plan, uint64_t elems,
                                uint64_t esize, uint64_t piece, uint64_t window,
                                kb__ccl_hier_model *m, kb__err *err)
{
    uint32_t L = plan->group, S = plan->world_size / L;
    uint64_t region = (elems + L - 1) / L, c1 = region * esize, best[2] = {0, 0}, path;
    /* with fewer elements than a ring's ranks only the chunks that hold
     * data are sent (kb__ccl_ring_data_steps_ps): the group rings' region
     * is the buffer, the peers' rings' at most a chunk of it */
    int rc = 0;
    if (L > 1) {
        /* each stream with its fill and drain: the reduce-scatter's
         * finished stores wait behind its last loads; each with its path
         * under its steps */
        kb__ccl_ring_bw rs;
        uint64_t ends = 0;
        if (!(rc = kb__ab_rs_phase(t, plan, KB__CCL_E, L, c1, piece, window, &rs, err)) &&
            !(rc = group_path(t, plan, &rs, 0, 0, c1, piece, esize, &path, &m->bw_gbs, err))) {
            hier_add(m, best, 0, kb__ccl_ring_data_steps_ps(rs.phase_ps[0], elems, L),
                     rs.bottleneck[0]);
            m->ends_ps += rs.ends_ps, m->path_ps += path;
        }
        kb__ccl_ring_bw ag;
        if (!rc && !(rc = one_phase(t, plan, KB__CCL_E, L, c1, piece, 1, L - 1, &ag, err)) &&
            !(rc = kb__ab_ring_ends_ps(t, plan, c1, piece, window, &ag, &ends, err)) &&
            !(rc = group_path(t, plan, &ag, 0, 1, c1, piece, esize, &path, &m->bw_gbs, err))) {
            hier_add(m, best, 1, kb__ccl_ring_data_steps_ps(ag.phase_ps[0], elems, L),
                     ag.bottleneck[0]);
            m->ends_ps += ends, m->path_ps += path;
        }
        m->hops += 2 * (L - 1);
    }
    if (!rc && S > 1) {
        uint64_t c2 = (region + S - 1) / S * esize;
        const bool both[2] = {true, true};
        const double loads[2] = {S, 0}, stores[2] = {1, S - 1};
        kb__ccl_ring_bw bw;
        uint64_t ends = 0;
        if (!(rc = kb__ab_ring_bw(t, plan, KB__CCL_S, S, c2, piece, both, loads, stores, &bw,
                                  err)) &&
            !(rc = kb__ab_ring_ends_ps(t, plan, c2, piece, window, &bw, &ends, err)) &&
            !(rc = rings_path(t, plan, KB__CCL_S, 0, &bw, -1, 2 * (S - 1), c2, piece, elems, &path,
                              &m->bw_gbs, err))) {
            for (int side = 0; side < 2; side++)
                hier_add(m, best, side, kb__ccl_ring_data_steps_ps(bw.phase_ps[side], region, S),
                         bw.bottleneck[side]);
            m->ends_ps += ends, m->path_ps += path;
        }
        double gain[2];
        if (!rc && L > 1 &&
            !(rc = stagger_gain_ps(
                  t, plan, c1, piece, esize,
                  (double)kb__ccl_ring_data_steps_ps(bw.phase_ps[0] + bw.phase_ps[1], region, S),
                  &gain[0], &gain[1], err)))
            for (int side = 0; side < 2; side++)
                m->phase_ps[side] -= (uint64_t)fmin(gain[side], (double)m->phase_ps[side]);
        m->hops += 2 * (S - 1);
    }
    return rc;
}

/* One group (S = 1): the kernel is the ring reduce-scatter (half 0) or the
 * ring all-gather (half 1) on the group's ring (algorithms/ring.c; the
 * reduce-scatter a stream of chunks of N/L, its finished stores left
 * behind the last loads; the all-gather, kb__ccl_hier_all_gather, with its
 * own pieces from the input stored to the output, load and store pairs on
 * the in-order DMA unit), so the model is kb__ccl_ring_half_bw's phase of
 * that half with the ring's path, its fill and drain. */
static int one_group(const kb__topo *t, const kb__ccl_plan *plan, uint64_t c, uint64_t piece,
                     uint64_t window, uint64_t esize, int half, kb__ccl_hier_model *m, kb__err *err)
{
    kb__ccl_ring_bw bw;
    uint64_t path;
    int rc = kb__ccl_ring_half_bw(t, plan, c, piece, window, half, &bw, err);
    if (!rc) rc = group_path(t, plan, &bw, half, half, c, piece, esize, &path, &m->bw_gbs, err);
    if (rc) return rc;
    m->path_ps = path, m->hops = plan->world_size - 1;
    m->ends_ps = bw.ends_ps;
    m->phase_ps[half] = bw.phase_ps[half];
    snprintf(m->bottleneck[half], sizeof m->bottleneck[half], "%s", bw.bottleneck[half]);
    return 0;
}

static int hier_all_gather_model(const kb__topo *t, const kb__ccl_plan *plan, uint64_t elems,
                                 uint64_t esize, uint64_t piece, uint64_t window,
                                 kb__ccl_hier_model *m, kb__err *err)
{
    uint32_t L = plan->group, S = plan->world_size / L;
    uint64_t c = elems * esize, best[2] = {0}, path;
    int rc = 0;
    if (S == 1) return one_group(t, plan, c, piece, window, esize, 1, m, err);
    if (S > 1) {
        kb__ccl_ring_bw bw;
        if (!(rc = one_phase(t, plan, KB__CCL_S, S, c, piece, 1, S, &bw, err)) &&
            !(rc = rings_path(t, plan, KB__CCL_S, 1, &bw, 0, S - 1, c, piece, 0, &path, &m->bw_gbs,
                              err))) {
            hier_add(m, best, 0, bw.phase_ps[0], bw.bottleneck[0]);
            m->path_ps += path;
        }
        m->hops += S - 1;
    }
    if (!rc && L > 1) {
        /* one all-gather per group's blocks, each rank's own block loaded
         * from its output, where the peers' phase stored it: a ring
         * all-gather's stream, with its credit rule (in step when every
         * message takes every credit) */
        kb__ccl_ring_bw bw;
        double group_b = 0; /* B stays the peers' ring's */
        if (!(rc = kb__ab_ring_gather_bw(t, plan, KB__CCL_E, L, c, piece, window, 1, L - 1, &bw,
                                         err)) &&
            !(rc = rings_path(t, plan, KB__CCL_E, 1, &bw, 0, L - 1, c, piece, 0, &path, &group_b,
                              err))) {
            hier_add(m, best, 1, (uint64_t)S * bw.phase_ps[0], bw.bottleneck[0]);
            m->path_ps += (uint64_t)S * path;
        }
        m->hops += S * (L - 1);
    }
    return rc;
}

/* The last step's finish of a hierarchical reduce-scatter into *out
 * (algorithms/ring.c, kb__ccl_hier_reduce_scatter): after its group step,
 * per round of at most half a window of pieces of the block, each piece
 * loaded, combined with the peer's partial and stored, one piece after
 * the other, the store beside the next piece's load: per round its pieces'
 * loads and combines and its last store, each transfer as alone on the
 * rank where they take longest. */
static int finish_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t block, uint64_t piece,
                     uint64_t window, uint64_t esize, uint64_t *out, kb__err *err)
{
    uint64_t xfer = piece < block ? piece : block, half = window / 2 ? window / 2 : 1;
    uint64_t pieces = (block + piece - 1) / piece, ld, st;
    uint64_t add = kb__ab_combine_ps(&t->params, xfer, esize);
    int rc = kb__ab_xfers_slowest(t, plan, xfer, &ld, &st, err);
    *out = rc ? 0 : pieces * (ld + add) + (pieces + half - 1) / half * st;
    return rc;
}

/* S steps, each a reduce-scatter in the group over one region of L blocks
 * (chunks of N/p: L loads, 1 store) with its fill and drain (its finished
 * stores behind its last loads, kb__ab_rs_phase), then one message of N/p
 * to the next peer (1 load; the last step stores instead). When a round's
 * messages to the peer all fit in the slots the sends do not wait, and
 * they cross beside the next step's group reduce-scatter: that step hides
 * them up to its own length. The last step's finish (finish_ps) comes
 * after its group step. One group: the group's ring reduce-scatter of N. */
static int hier_reduce_scatter_model(const kb__topo *t, const kb__ccl_plan *plan, uint64_t elems,
                                     uint64_t esize, uint64_t piece, uint64_t window,
                                     kb__ccl_hier_model *m, kb__err *err)
{
    uint32_t L = plan->group, S = plan->world_size / L;
    uint64_t block = (elems + plan->world_size - 1) / plan->world_size * esize;
    uint64_t c = S > 1 ? block : (elems + L - 1) / L * esize;
    uint64_t best[2] = {0}, path;
    uint64_t group_ps = 0;
    int rc = 0;
    if (S == 1) return one_group(t, plan, c, piece, window, esize, 0, m, err);
    if (L > 1) {
        kb__ccl_ring_bw rs;
        if (!(rc = kb__ab_rs_phase(t, plan, KB__CCL_E, L, c, piece, window, &rs, err)) &&
            !(rc = group_path(t, plan, &rs, 0, 0, c, piece, esize, &path, &m->bw_gbs, err))) {
            group_ps = rs.phase_ps[0];
            hier_add(m, best, 0, (uint64_t)S * group_ps, rs.bottleneck[0]);
            m->ends_ps += (uint64_t)S * rs.ends_ps, m->path_ps += (uint64_t)S * path;
        }
        m->hops += S * (L - 1);
    }
    if (!rc && S > 1) {
        /* a round's partials (half a window of pieces) in messages that
         * all fit in the slots */
        const kb__ccl_settings *q = &plan->r.s;
        uint64_t half = window / 2 ? window / 2 : 1, msgs, slots, finish;
        uint64_t round = half * piece < block ? half * piece : block;
        kb__ab_cut(round, piece, q->slot_size - KB__IPCQ_META_BYTES, &msgs, &slots);
        uint64_t hidden = slots <= q->n_slots ? group_ps : 0;
        kb__ccl_ring_bw bw;
        if (!(rc = one_phase(t, plan, KB__CCL_S, 2, block, piece, 1, 0, &bw, err)) &&
            !(rc = rings_path(t, plan, KB__CCL_S, 1, &bw, 0, 1, block, piece, 0, &path, &m->bw_gbs,
                              err))) {
            uint64_t ps = bw.phase_ps[0];
            double gain = 0;
            if (!hidden && L > 1)
                rc = stagger_gain_ps(t, plan, c, piece, esize, (double)ps, &gain, NULL, err);
            ps -= (uint64_t)fmin(gain, (double)ps);
            hier_add(m, best, 0, (uint64_t)(S - 1) * (ps > hidden ? ps - hidden : 0),
                     bw.bottleneck[0]);
            m->path_ps += path;
        }
        if (!rc && !(rc = finish_ps(t, plan, block, piece, window, esize, &finish, err)))
            m->ends_ps += finish;
        m->hops += S - 1;
    }
    return rc;
}

int kb__ccl_hier_model_get(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_collective kind,
                           uint64_t elems, uint64_t esize, uint64_t piece, uint64_t window,
                           kb__ccl_hier_model *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    if (plan->r.algo->topology != KB__CCL_HIER)
        return kb__err_set(err, KB_EINVAL,
                           "hierarchical model: algorithm '%s' is %s, not hierarchical",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    if (plan->world_size < 2 || !elems || !piece) return 0;
    int rc;
    switch (kind) {
    case KB__CCL_ALL_REDUCE:
        rc = hier_allreduce_model(t, plan, elems, esize, piece, window, out, err);
        break;
    case KB__CCL_ALL_GATHER:
        rc = hier_all_gather_model(t, plan, elems, esize, piece, window, out, err);
        break;
    case KB__CCL_REDUCE_SCATTER:
        rc = hier_reduce_scatter_model(t, plan, elems, esize, piece, window, out, err);
        break;
    default:
        return kb__err_set(err, KB_EINVAL, "hierarchical model: no model of a %s",
                           kb__ccl_coll(kind)->name);
    }
    if (rc) return rc;
    out->predicted_ps = out->path_ps + out->ends_ps + out->phase_ps[0] + out->phase_ps[1];
    /* no all-reduce ends before its chunks' chains (hier_chain_ps) */
    uint64_t chain = 0;
    if (kind == KB__CCL_ALL_REDUCE &&
        (rc = hier_chain_ps(t, plan, elems, esize, piece, &chain, err)))
        return rc;
    if (chain > out->predicted_ps) {
        out->predicted_ps = chain;
        for (int side = 0; side < 2; side++)
            snprintf(
                out->bottleneck[side], sizeof out->bottleneck[side],
                "the chain of a chunk's first piece around the group, its peers and the group");
    }
    return 0;
}
