/*
 * fabric/internal.h — the fabric's private state, shared by fabric.c
 * (construction, statistics), route.c (routing, cache) and packet.c (engine).
 *
 * Invariants: links[i].id == i; out_first/out_next form, per node, the list
 * of its outgoing links in increasing id order; the route cache holds every
 * route ever returned and owns it until kb__fabric_destroy.
 */
#ifndef KB_FABRIC_INTERNAL_H
#define KB_FABRIC_INTERNAL_H

#include "fabric/fabric.h"

typedef struct kb__route_slot {
    uint64_t key_a;   /* from << 32 | to */
    uint32_t key_via; /* via */
    kb__route *route; /* NULL: empty slot */
} kb__route_slot;

struct kb__fabric {
    kb__sim *sim;
    const kb__fabric_model *model; /* never NULL */
    void *model_state;             /* the model's (init / fini) */
    uint32_t packet_bytes, header_bytes;
    uint32_t ring_warmup; /* fabric.ring_warmup */
    uint32_t n_nodes, n_links;
    uint32_t n_down;          /* links that are down (faults): out of out_first/out_next */
    kb__fab_node_desc *nodes; /* names owned */
    kb__link *links;
    uint32_t *out_first; /* per node: first outgoing link id or KB__NO_NODE */
    uint32_t *out_next;  /* per link: next outgoing link of the same node */
    /* Mesh gateways: routers[sip * mesh_cap + y * mesh_w + x], io_noc[sip]. */
    uint32_t n_sips, mesh_w, mesh_h;
    uint32_t *routers;
    uint32_t *io_nocs;
    uint32_t *attach; /* per SIP: its attach cube's router (attach_router in route.c) */
    /* Route cache: open addressing, power-of-two capacity. */
    kb__route_slot *slots;
    size_t n_slots, n_routes;
    /* Scratch for breadth-first search (n_nodes entries each): a node's
     * prev link is valid when its mark equals the search's (bfs_mark). */
    uint32_t *bfs_prev_link, *bfs_queue, *bfs_seen;
    uint32_t bfs_mark;
    uint64_t packet_hops;
    struct kb__fab_util *util; /* kb__fabric_util_start, or NULL (util.c) */
    uint8_t *in_order;         /* per node: kb__fabric_set_in_order was called */
    uint32_t *in_deg;          /* per node: incoming links */
    uint32_t *in_from;         /* per node: the source of one incoming link (the only one when
                                  in_deg is 1) */
    kb__fab_worker *workers;   /* per node (bw_gbs 0: none), or NULL when no node has one */
};

/* Service time of a packet of `bytes` on l (kb__link_service_ps, inline):
 * full and header packets precomputed, other sizes remembered one at a
 * time (a short last packet tends to recur: the same messages repeat). */
static inline kb__time kb__link_svc(const kb__fabric *fab, const kb__link *l, uint32_t bytes)
{
    if (bytes == fab->packet_bytes) return l->pkt_ps;
    if (bytes == fab->header_bytes) return l->hdr_ps;
    return kb__svc_memo_get(&l->odd, bytes, 1, l->bw_gbs);
}

/* The serial worker of the node a packet crosses before hop h of route r
 * (nodes[h], h >= 1), or NULL: the node has none, or it is r's source. */
static inline kb__fab_worker *kb__fab_worker_at(const kb__fabric *fab, const kb__route *r,
                                                uint32_t h)
{
    if (!h || !r->workers) return NULL;
    kb__fab_worker *w = &fab->workers[r->nodes[h]];
    return w->bw_gbs > 0 ? w : NULL;
}

/* Service time of a packet of `bytes` at worker w: its overhead plus
 * bytes / B, precomputed for full and header packets. */
static inline kb__time kb__fab_worker_svc(const kb__fabric *fab, const kb__fab_worker *w,
                                          uint32_t bytes)
{
    if (bytes == fab->packet_bytes) return w->pkt_ps;
    if (bytes == fab->header_bytes) return w->hdr_ps;
    return w->o_ps + kb__svc_memo_get(&w->odd, bytes, 1, w->bw_gbs);
}

/* Adds the reservation [start, end) of l to its utilization (util.c; call
 * only when fab->util is set). */
void kb__fab_util_add(kb__fabric *fab, const kb__link *l, kb__time start, kb__time end);
/* Adds busy ps of l spread evenly over [start, end) (all at start when the
 * interval is empty); the parts given to its buckets add up to busy. */
void kb__fab_util_spread(kb__fabric *fab, const kb__link *l, kb__time start, kb__time end,
                         kb__time busy);
/* Buckets a link's utilization stays open for under the flow model (util.c). */
#define KB__FAB_UTIL_WINDOW_FLOW 64

/* The two models (packet.c, flow.c). */
extern const kb__fabric_model kb__fab_packet_model;
extern const kb__fabric_model kb__fab_flow_model;

/* The solo schedule of a message alone on route r, offered at once at 0
 * (model.c): when its last packet arrives (the closed form's total, exact
 * to the ps for any size) and when the packet before it does. */
void kb__fab_solo(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p,
                  kb__time *last, kb__time *prev);
/* The same for a message whose short last packet is offered at 0 after
 * `at` full packets (a read: it leaves the memory before them,
 * docs/timing-model.md "Memories"), the full ones at `lead` (0 unless `at`
 * is 0): the packets after it one by one, O(k) per packet; KB_ENOMEM. */
int kb__fab_solo_short(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p,
                       uint32_t at, kb__time lead, kb__time *last, kb__time *prev);
/* The drain of a message alone on route r: its packets' service at the
 * route's slowest server (a link or a node's serial worker), the one with
 * the largest full-packet time (model.c). */
kb__time kb__fab_drain(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p);

/* Builds the gateway tables (route.c). */
int kb__fabric_index_gateways(kb__fabric *fab, kb__err *err);

#endif
