/*
 * ab_tree.c — the α-β model of the pipelined mesh and tree all-reduces
 * (algorithms/mesh_tree.c; alphabeta.h and docs/ccl.md): pieces go up
 * to the root, combined at every rank, and back down. The latency term
 * is the deepest leaf's first piece up and last piece down, hop by hop
 * (store and forward, piece by piece); the bandwidth term is the busiest
 * resource of the whole tree's traffic under the phase machinery
 * (ab_phase.c), with every stream's credit loop: a stream whose loop is
 * longer than its pace runs dry every message, one whose loop fits waits
 * on the messages whose loop a link's queue stretches past the pace
 * (kb__ab_tree_wait_ps).
 *
 * Invariants: a rank's place in the tree (parent, children) is read from
 * the plan's ports as the kernel reads it; a cycle of parents is an
 * error, not a hang. A prediction only.
 * Cost: O(links + nodes + p × route length × 64) for the bandwidth term,
 * O(p × depth) for the depth search, p the world size.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "pe/ipcq.h"
#include "sim/sim.h"

/* ---- the pipelined trees: mesh_allreduce and tree_allreduce ------------------- */

/* The credit term of one stream of a tree (0 when its sender never runs
 * dry): its program sends a message of msg_slots slots a tick and waits
 * for its load and its neighbours' pieces in between, so it does not run
 * ahead of the tree's pace (the phase's other terms, worst_ps over the
 * stream's slots). It runs dry when the credit of the last slot it needs
 * is not back by then: the slot n_slots before the message's last one,
 * whose round trip is `first` (the first slot's, with the vc time of the
 * slots queued ahead of it) plus the slots between on the vc channel
 * (slot_ps each). Then it waits a first slot's round trip and resumes
 * (asleep the later credits come back during the wake; polling it waits
 * for each, the last one's round trip), per n_slots slots. */
static double tree_dry_ps(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                          uint64_t msg_slots, double first, double slot_ps, double worst_ps)
{
    double n = q->n_slots, m = (double)msg_slots;
    double last = first + (m < n ? m - 1 : n - 1) * slot_ps;
    if (slots * last / n <= worst_ps) return 0;
    bool poll = q->backpressure == KB__CCL_BP_POLL;
    double resume = kb__ab_resume_ps(tp, q);
    return slots * ((poll ? last : first) + resume) / n;
}

double kb__ab_tree_wait_ps(double margin_ps, double rho, double service_ps, double resume_ps)
{
    if (rho <= 0 || service_ps <= 0) return 0;
    if (rho >= 1) return HUGE_VAL;
    double theta = rho * service_ps / (2 * (1 - rho));
    return rho * exp(-(margin_ps > 0 ? margin_ps : 0) / theta) * (resume_ps + theta);
}

/* The credit waits of one stream whose credit loop fits its pace (tree_dry_ps
 * 0), per message: `last` is its last needed credit's round trip, `pace` the
 * time it has for it (the phase's other terms over its messages, per
 * n_slots slots). Its slots cross the links of `send` (the stream's own
 * bytes, own_bytes, are not others there) and its credits those of `back`;
 * on each link the phase's other flows queue transfers of `xfer` bytes
 * ahead of it (kb__ab_tree_wait_ps). A slot delayed behind a transfer on
 * one link stays behind it on the next, so the delays are not added: the
 * stream waits as behind its worst link. */
static double tree_wait_ps(const kb__topo *t, const kb__ab_phase_acc *a, const kb__ccl_route *send,
                           const kb__ccl_route *back, double own_bytes, double xfer, double last,
                           double pace, double resume)
{
    double w = 0;
    if (!(a->worst_ps > 0)) return 0;
    for (int r = 0; r < 2; r++) {
        const kb__ccl_route *rt = r ? back : send;
        for (uint32_t i = 0; i < rt->n; i++) {
            double bw = t->links[rt->links[i]].bw_gbs;
            double busy =
                a->link_ps[rt->links[i]] - (r ? 0 : kb__ps_real_from_bytes_gbs(own_bytes, bw));
            double v = kb__ab_tree_wait_ps(pace - last, busy / a->worst_ps,
                                           kb__ps_real_from_bytes_gbs(xfer, bw), resume);
            if (v > w) w = v;
        }
    }
    return w;
}

/* Rank k's place in the algorithm's tree (algorithms/mesh_tree.c): the
 * port to its parent (-1 at the root) and to its children, in combine
 * order. mesh_2d: parent W, else N in column 0; children E, and S in column
 * 0. tree: parent N, children W (left) and E (right). */
typedef struct tree_place {
    int parent, child[2], n;
} tree_place;

static tree_place tree_place_of(const kb__ccl_plan *plan, uint32_t k)
{
    const kb__ccl_port *pt = plan->ports[k];
    tree_place t = {-1, {-1, -1}, 0};
    if (plan->r.algo->topology == KB__CCL_MESH_2D) {
        t.parent = pt[KB__CCL_W].peer >= 0 ? KB__CCL_W : pt[KB__CCL_N].peer >= 0 ? KB__CCL_N : -1;
        if (pt[KB__CCL_E].peer >= 0) t.child[t.n++] = KB__CCL_E;
        if (pt[KB__CCL_W].peer < 0 && pt[KB__CCL_S].peer >= 0) t.child[t.n++] = KB__CCL_S;
    } else {
        t.parent = pt[KB__CCL_N].peer >= 0 ? KB__CCL_N : -1;
        if (pt[KB__CCL_W].peer >= 0) t.child[t.n++] = KB__CCL_W;
        if (pt[KB__CCL_E].peer >= 0) t.child[t.n++] = KB__CCL_E;
    }
    return t;
}

int kb__ab_piece_hop_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t a, uint32_t b,
                        uint64_t xfer, uint64_t t_add, uint64_t *ps, double *bw, kb__err *err)
{
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES, spp = (xfer + payload - 1) / payload;
    uint64_t last = xfer - (spp - 1) * payload, copy;
    double slot_ps = kb__ab_slot_ps(&t->params, q);
    kb__ccl_msg_cost c;
    int rc = kb__ccl_msg_cost_get(t, plan->loc[a], plan->loc[b], plan->r.s.buffer_kind,
                                  last + KB__IPCQ_META_BYTES, &c, err);
    if (!rc) rc = kb__ab_recv_copy_ps(t, plan->loc[b], plan->r.s.buffer_kind, last, &copy, err);
    if (rc) return rc;
    *ps += (uint64_t)llround((double)(spp - 1) * slot_ps) + c.total_ps + copy + t_add;
    if (!*bw || c.min_bw_gbs < *bw) *bw = c.min_bw_gbs;
    return 0;
}

int kb__ab_mean_piece_hop_ps(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir,
                             uint64_t xfer, double *out, kb__err *err)
{
    uint32_t p = plan->world_size;
    int rc = 0;
    *out = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        uint64_t hop = 0;
        double bw = 0;
        int32_t to = plan->ports[k][dir].peer;
        if (to >= 0 &&
            !(rc = kb__ab_piece_hop_ps(t, plan, k, (uint32_t)to, xfer, 0, &hop, &bw, err)))
            *out += (double)hop / p;
    }
    return rc;
}

/* The first piece's trip from rank k up to the root and the last one's
 * from the root down to k, piece hop by piece hop; *hops += the hops. */
static int tree_path(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, uint64_t xfer,
                     uint64_t t_add, uint64_t *ps, uint32_t *hops, double *bw, kb__err *err)
{
    for (uint32_t guard = 0; guard < plan->world_size; guard++) {
        tree_place pl = tree_place_of(plan, k);
        if (pl.parent < 0) return 0;
        uint32_t up = (uint32_t)plan->ports[k][pl.parent].peer;
        int rc = kb__ab_piece_hop_ps(t, plan, k, up, xfer, t_add, ps, bw, err);
        if (!rc) rc = kb__ab_piece_hop_ps(t, plan, up, k, xfer, 0, ps, bw, err);
        if (rc) return rc;
        *hops += 2;
        k = up;
    }
    return kb__err_set(err, KB_EINVAL, "tree model: rank %u's parents make a cycle", k);
}

/* The fill and drain of the tree's stream (algorithms/mesh_tree.c) on its
 * path's leaf: every rank loads its first own piece (`first` bytes) before
 * it sends, and stores the last piece (`last` bytes) once it came down, each
 * rank's at once (kb__ab_burst_each); neither is on the path's hops. */
static int tree_ends_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t leaf, uint64_t first,
                        uint64_t last, uint64_t *out, kb__err *err)
{
    uint32_t p = plan->world_size;
    double *conc = malloc(p * sizeof *conc);
    if (!conc) return kb__err_set(err, KB_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < p; k++)
        conc[k] = 1;
    uint64_t fill = 0, drain = 0;
    int rc = kb__ab_burst_ps(t, plan, false, first, conc, leaf, &fill, err);
    if (!rc) rc = kb__ab_burst_ps(t, plan, true, last, conc, leaf, &drain, err);
    *out = fill + drain;
    free(conc);
    return rc;
}

int kb__ccl_tree_model_get(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                           uint64_t esize, uint64_t piece, kb__ccl_tree_model *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    kb__ccl_topology topo = plan->r.algo->topology;
    if (topo != KB__CCL_MESH_2D && topo != KB__CCL_TREE)
        return kb__err_set(err, KB_EINVAL, "tree model: algorithm '%s' is %s, not mesh_2d or tree",
                           plan->r.algo->name, kb__ccl_topology_name(topo));
    uint32_t p = plan->world_size;
    if (p < 2 || !bytes || !piece || !esize) return 0;
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    uint64_t msgs, slots, xfer = piece < bytes ? piece : bytes;
    kb__ab_cut(bytes, piece, payload, &msgs, &slots);
    uint64_t spp = (xfer + payload - 1) / payload; /* slots of a whole piece */
    double wire = (double)(bytes + slots * KB__IPCQ_META_BYTES);
    double slot_ps = kb__ab_slot_ps(tp, q);
    double scalar = (double)kb__ps_from_ns(tp->pe.cpu_scalar_op_ns);
    uint64_t t_add = kb__ab_combine_ps(tp, xfer, esize);
    kb__ab_phase_acc a;
    int rc = kb__ab_acc_init(t, &a, err);
    kb__ab_rank_xfers *rx = calloc(p, sizeof *rx);
    if (!rc && !rx) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    kb__ccl_route send = {0}, copy = {0}, ld = {0}, st = {0};
    uint64_t deepest = 0;
    uint32_t rtt_rank = 0, leaf = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        kb__ccl_loc at = plan->loc[k];
        tree_place pl = tree_place_of(plan, k);
        int ports[3], sends = 0;
        if (pl.parent >= 0) ports[sends++] = pl.parent;
        for (int c = 0; c < pl.n; c++)
            ports[sends++] = pl.child[c];
        uint64_t t_load, t_store;
        if ((rc = kb__ab_copy_path(t, at, q->buffer_kind, &copy, err)) ||
            (rc = kb__ab_data_path(t, at, false, &ld, err)) ||
            (rc = kb__ab_data_path(t, at, true, &st, err)) ||
            (rc = kb__ab_xfer_ps(t, at, false, &ld, xfer, &t_load, err)) ||
            (rc = kb__ab_xfer_ps(t, at, true, &st, xfer, &t_store, err)))
            break;
        for (int s = 0; !rc && s < sends; s++) {
            if ((rc = kb__ccl_route_build(t, at, plan->ports[k][ports[s]].loc, q->buffer_kind,
                                          &send, err)))
                break;
            kb__ab_add_route(t, &a, &send, wire);
            kb__ab_add_mem(t, &a, kb__ab_ring_node(t, plan->ports[k][ports[s]].loc, q->buffer_kind),
                           wire);
        }
        if (rc) break;
        kb__ab_add_route(t, &a, &copy,
                         (double)sends * (double)bytes); /* one receive per neighbour */
        kb__ab_add_route(t, &a, &ld, (double)bytes);
        kb__ab_add_route(t, &a, &st, (double)bytes);
        kb__ab_pe_nodes nd = kb__ab_nodes_of(t, at);
        kb__ab_add_mem(t, &a, nd.tcm, sends * (wire + (double)bytes) + 2.0 * (double)bytes);
        kb__ab_add_mem(t, &a, kb__ab_ring_node(t, at, q->buffer_kind),
                       (double)sends * (double)bytes);
        kb__ab_add_mem(t, &a, nd.hbm, 2.0 * (double)bytes);
        kb__ab_worst(&a, (double)sends * kb__ab_chunk_vc_ps(tp, q, bytes, piece), "vc channel", k);
        /* its DMA channels (a load and a store a piece) and its program,
         * piece by piece: the load it combines, the combines, a scalar op
         * per slot sent */
        kb__ab_rank_xfers *x = &rx[k];
        x->lds = x->sts = x->prog_loads = 1;
        x->ld.alone_ps = (double)t_load, x->st.alone_ps = (double)t_store;
        x->prog_fixed_ps =
            (double)msgs * pl.n * (double)t_add + (double)sends * (double)slots * scalar;
        uint64_t depth = 0;
        for (uint32_t r = k, g = 0; g < p; g++) {
            tree_place up = tree_place_of(plan, r);
            if (up.parent < 0) break;
            r = (uint32_t)plan->ports[r][up.parent].peer, depth++;
        }
        if (depth > deepest) deepest = depth, leaf = k;
    }
    if (!rc) kb__ab_acc_links(t, &a);
    for (uint32_t k = 0; !rc && k < p; k++)
        rc = kb__ab_rank_share(t, &a, plan->loc[k], (double)xfer, (double)bytes, (double)bytes,
                               &rx[k], &ld, &st, err);
    if (!rc) kb__ab_share_solve(&a, rx, p, (double)msgs, tp->pe.dma_channels);
    /* the credit loops of every stream under the tree's traffic */
    double loaded = 0, T = a.worst_ps;
    uint64_t slot_bytes = kb__ab_slot_bytes(q, xfer);
    kb__ccl_route back = {0};
    for (uint32_t k = 0; !rc && k < p; k++) {
        tree_place pl = tree_place_of(plan, k);
        int ports[3], sends = 0;
        if (pl.parent >= 0) ports[sends++] = pl.parent;
        for (int c = 0; c < pl.n; c++)
            ports[sends++] = pl.child[c];
        for (int s = 0; !rc && s < sends; s++) {
            uint64_t rtt;
            double extra;
            kb__ccl_dir d = (kb__ccl_dir)ports[s];
            if ((rc = kb__ccl_route_build(t, plan->loc[k], plan->ports[k][d].loc, q->buffer_kind,
                                          &send, err)) ||
                (rc = kb__ab_credit_rtt_slot_ps(t, plan, k, d, &send, slot_bytes, &rtt, err)) ||
                (rc = kb__ab_rtt_stretch_ps(t, plan, &a, k, d, &send, slot_bytes, wire,
                                            (double)bytes, a.worst_ps, &extra, err)))
                break;
            /* a piece goes down to the children one after the other on the
             * rank's one vc channel: a later child's first slot waits behind
             * the earlier children's slots, and so does its credit */
            int before = s - (pl.parent >= 0);
            double first =
                (double)rtt + extra + (before > 0 ? before * kb__ab_msg_vc_ps(tp, q, xfer) : 0);
            double cost = tree_dry_ps(tp, q, (double)slots, spp, first, slot_ps, T);
            if (!cost) {
                /* its loop fits: the messages whose loop a queue stretches
                 * past the pace wait, at most as one that runs dry each time */
                double n = q->n_slots, last = first + (spp < n ? spp - 1 : n - 1) * slot_ps;
                double resume = kb__ab_resume_ps(tp, q);
                if ((rc = kb__ccl_route_build(t, plan->ports[k][d].loc, plan->loc[k],
                                              KB__CCL_BUF_TCM, &back, err)))
                    break;
                back.n--; /* the credit: DMA to DMA */
                double w = tree_wait_ps(t, &a, &send, &back, wire, (double)xfer, last,
                                        T * n / (double)slots, resume);
                double dry = (double)slots * (first + resume) / n;
                cost = T + (double)msgs * w;
                if (cost > dry) cost = dry > T ? dry : T;
            }
            if (cost > loaded) loaded = cost, rtt_rank = k;
        }
    }
    if (!rc && loaded > 0) kb__ab_worst(&a, loaded, "credits", rtt_rank);
    kb__ccl_route_fini(&send);
    kb__ccl_route_fini(&back);
    kb__ccl_route_fini(&copy);
    kb__ccl_route_fini(&ld);
    kb__ccl_route_fini(&st);
    kb__ab_acc_fini(&a);
    free(rx);
    if (rc) return rc;
    if ((rc = tree_path(t, plan, leaf, xfer, t_add, &out->path_ps, &out->hops, &out->bw_gbs, err)))
        return rc;
    if ((rc = tree_ends_ps(t, plan, leaf, xfer, bytes - (msgs - 1) * xfer, &out->ends_ps, err)))
        return rc;
    out->bw_ps = (uint64_t)ceil(a.worst_ps - 1e-6);
    snprintf(out->bottleneck, sizeof out->bottleneck, "%s", a.what);
    out->pieces = msgs;
    out->predicted_ps = out->path_ps + out->ends_ps + out->bw_ps;
    return 0;
}
