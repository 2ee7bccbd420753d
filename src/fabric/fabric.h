/*
 * fabric/fabric.h — directed links, the packet engine and routing.
 *
 * The fabric is built once from a node list and a directed link list, or
 * from the machine graph of src/topo (kb__fabric_create_topo). It owns the
 * per-link state (free_at, bytes, packets, busy time) and a route cache.
 *
 * Packet engine (docs/timing-model.md): a message of N bytes is cut into
 * n = ceil(N / p) packets. At each hop a packet arriving at time t starts at
 * max(t, link.free_at), ends after size/B (ceil to ps, precomputed for a full
 * packet and for a header packet), and reaches the next link at end + o + w.
 * At most one pooled kb__sim_post per packet per hop (none where the order
 * of reservations is known without one: packet.c); the engine never
 * allocates per packet: the caller owns the kb__fab_msg for its lifetime.
 *
 * Routing: dimension-order XY over the cube mesh inside a SIP; between SIPs
 * source cube -> attach cube -> IO UCIe -> io_noc -> SIP links (ring, shortest
 * direction, ties toward increasing index) -> io_noc -> attach cube -> XY.
 * Inside a cube (PE units, noc, xbar, memories, m_cpu) and inside an IO
 * chiplet (pcie_ep, io_cpu, io_noc, host) the route is the shortest path in
 * that region (breadth first, lowest link id first), joined at the region's
 * gateway (cube: router, IO chiplet: io_noc). Routes are computed once per
 * (from, via, to) and cached in a hash table.
 *
 * Models: the fabric carries messages through one model, chosen by name
 * (kb__fabric_model): `packet` (packet.c, below) or `flow` (flow.c: one
 * max-min fair flow per message). The link state and statistics, routes
 * and closed forms are the fabric's own, whatever the model.
 *
 * Invariants: a link is reserved in arrival order (free_at only grows;
 * debug builds check it); the message object outlives its last packet.
 * Cost: O(1) per packet per hop.
 */
#ifndef KB_FABRIC_FABRIC_H
#define KB_FABRIC_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "sim/sim.h"
#include "topo/topo.h"

/* What a node is, as far as routing cares. */
typedef enum kb__fab_role {
    KB__FR_OTHER = 0,
    KB__FR_HOST,
    KB__FR_PCIE_EP,
    KB__FR_IO_CPU,
    KB__FR_IO_NOC,
    KB__FR_ROUTER,
    KB__FR_XBAR,
    KB__FR_NOC,
    KB__FR_M_CPU,
    KB__FR_SRAM,
    KB__FR_HBM,
    KB__FR_PE, /* any PE unit: cpu, dma, mmu, tcm, gemm, math, ipcq */
    KB__FR_COUNT
} kb__fab_role;

/* A node as the fabric sees it (copied in). */
typedef struct kb__fab_node_desc {
    const char *name; /* "sip0.cube3.pe1.dma"; copied */
    kb__fab_role role;
    uint32_t sip;  /* SIP index (host: 0) */
    uint32_t cube; /* cube index inside the SIP (IO chiplet / host: unused) */
    uint32_t x, y; /* mesh position of the node's cube */
    /* Its serial worker (a transit node's, topo/kinds.h): every packet
     * crossing the node is forwarded by it, one at a time in arrival order,
     * for overhead_ps + size / bw_gbs. bw_gbs 0: none. A node with a worker
     * sends no message of its own (every packet leaving it crosses it). */
    kb__kind_worker worker;
} kb__fab_node_desc;

/* The service time of the last packet size served that is neither a full
 * packet nor a header (a short last packet tends to recur: the same
 * messages repeat); kb__svc_memo_get. Zero: none yet. */
typedef struct kb__svc_memo {
    uint32_t bytes;
    kb__time ps;
} kb__svc_memo;

/* A node's serial worker in the packet model: a FIFO server between the
 * link a packet comes in on and the one it leaves on. */
typedef struct kb__fab_worker {
    kb__time free_at;        /* end of the last packet forwarded */
    kb__time pkt_ps, hdr_ps; /* overhead + size / B for a full and a header packet */
    kb__time o_ps;           /* overhead per packet */
    double bw_gbs;           /* 0: the node has no worker */
    kb__svc_memo odd;        /* packets of other sizes (size / B only) */
    uint64_t packets;
    kb__time busy_ps;
} kb__fab_worker;

/* A directed link as the fabric sees it (copied in). */
typedef struct kb__fab_link_desc {
    uint32_t from, to; /* node ids (indices into the node list) */
    kb__link_class cls;
    double bw_gbs;        /* B, > 0 */
    kb__time overhead_ps; /* o */
    kb__time wire_ps;     /* w */
    int down;             /* a link that is down: kept (ids stay), never routed over */
} kb__fab_link_desc;

/* Per-direction link state and statistics. What every reservation reads
 * and writes fills the first 64-byte line, the queue of waiting packets and
 * odd packet sizes the second; the array is line-aligned. */
typedef struct kb__link {
    _Alignas(64) kb__time free_at; /* end of the last reserved service */
    kb__time pkt_ps;               /* ceil(packet_bytes / B) */
    kb__time hdr_ps;               /* ceil(header_bytes / B) */
    kb__time ow_ps;                /* o + w, the post-service delay */
    uint64_t bytes, packets;
    kb__time busy_ps; /* sum of service times */
    /* Packets on their way to this link, the last of their route into an
     * in-order node, whose arrival is known: they wait to be reserved in
     * arrival order (packet.c). A ring of pq_cap entries (a power of two),
     * sorted by arrival from pq_head. */
    uint32_t pq_n;
    _Alignas(64) struct kb__fab_pend *pq;
    uint32_t pq_head, pq_cap;
    kb__svc_memo odd; /* packets of other sizes */
    double bw_gbs;
    uint32_t id, from, to;
    kb__link_class cls;
    kb__time o_ps, w_ps;
    kb__time last_arrival; /* KB_DEBUG_INVARIANTS: latest arrival reserved */
} kb__link;

/* A packet waiting on a link (above): packet pkt of msg arrives at `at`. */
typedef struct kb__fab_pend {
    struct kb__fab_msg *msg;
    uint32_t pkt;
    kb__time at;
} kb__fab_pend;

/* A route: the links a message crosses, in order, and its closed-form sums. */
typedef struct kb__route {
    uint32_t from, via, to; /* via == KB__NO_NODE for a direct route */
    uint32_t n;             /* number of links, >= 1 */
    uint32_t *nodes;        /* n + 1 node ids: from, ..., to */
    uint32_t bottleneck;    /* link id with the largest pkt_ps (first one) */
    uint32_t workers;       /* nodes[1 .. n - 1] with a serial worker */
    int worker_last;        /* nodes[n - 1] has one: no packet waits on the last link */
    int ends_in_order;      /* `to` takes arrivals at its in-link's service */
    int starts_at_leaf;     /* `from` has no neighbour but the next node: its
                               first link carries only what `from` injects */
    struct kb__route_solo { /* the flow model's last two solo schedules on this route */
        uint64_t bytes;     /* 0: none yet */
        uint32_t pkt_bytes;
        uint32_t short_at; /* and the message's short_at, short_lead */
        kb__time short_lead;
        kb__time total, prev, drain;
    } solo[2]; /* [0] the most recent (a queue's route alternates full and tail pieces) */
    struct kb__route_flow { /* the flow model's resources of a message on this route */
        uint32_t *res;      /* NULL: none yet (freed with the route) */
        uint32_t n_res;
        uint32_t version; /* the flow model's resources when made (they change only
                             when a memory is attached) */
        double min_cap;   /* the smallest capacity among them (+inf: none) */
    } flow;
    uint32_t links[]; /* n link ids, in the route's own allocation */
} kb__route;

#define KB__NO_NODE UINT32_MAX

/* Per-hop trace entry, times relative to the message start. */
typedef struct kb__fab_hop {
    kb__time head; /* first packet starts service on this link */
    kb__time tail; /* last packet ends service on this link */
} kb__fab_hop;

typedef struct kb__fabric kb__fabric;
typedef struct kb__fab_msg kb__fab_msg;

/* Called when packet `pkt` of msg reaches the end of its route, at
 * msg->t_arrive (kb__fabric_set_in_order: the clock may differ, see there). */
typedef void (*kb__fab_pkt_fn)(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt);

/* A message in flight. The caller owns it; fill with kb__fab_msg_init. */
struct kb__fab_msg {
    /* Read by every hop: the first 64 bytes. */
    const kb__route *route;
    kb__fabric *fab;
    uint64_t bytes;         /* N */
    uint32_t pkt_bytes;     /* p for this message (packet_bytes, or header_bytes) */
    uint32_t npkts;         /* ceil(N / p) */
    kb__time first_end;     /* kb__fab_send: packet 0's service end on link 0 */
    const kb__time *l0_end; /* kb__fab_inject of a train: packet i's end on link 0 */
    const kb__time *inject; /* kb__fab_inject: packet i is offered at inject[i] */
    kb__fab_hop *trace;     /* optional, route->n entries, filled by the engine */
    /* Read at the end of the route: the next 64 bytes. */
    int inject_chain;         /* inject is non-decreasing: packet i posts i + 1 */
    uint32_t delivered;       /* packets that reached the end */
    uint32_t waiting;         /* packets waiting on the last link (packet.c) */
    kb__time wait_last_at;    /* the latest of their arrivals there */
    kb__time t_end;           /* when the last packet arrived (valid once done) */
    kb__time t_arrive;        /* in on_packet / on_done: when this packet arrives */
    kb__fab_pkt_fn on_packet; /* optional, each delivered packet */
    kb__fab_pkt_fn on_done;   /* optional, after the last packet's on_packet, at its
                                 arrival (in-order nodes: see there) */
    void *user;
    kb__time t_start; /* when the message was offered */
    kb__time t_prev;  /* message grain (kb__fabric_grain): when the packet before the
                         last one arrived (the last's t_arrive when there is one packet) */
    void *flow;       /* the flow model's state of this message while in flight */
    /* Message grain, a read with a short last packet (memctl): that packet is
     * offered to the first link after short_at full ones (npkts - 1: in
     * order), short_lead ps before them when short_at is 0; it then arrives
     * in that place. */
    uint32_t short_at;
    kb__time short_lead;
};

/* How a fabric model hands a message's packets to its end (on_packet). */
typedef enum kb__fab_grain {
    KB__GRAIN_PACKET,  /* once per packet, in arrival order (msg->t_arrive: its arrival) */
    KB__GRAIN_MESSAGE, /* once per message, for its last packet: every packet has arrived
                          (t_arrive: the last one's arrival, t_prev: the one before's);
                          the model has shared the memories' bandwidth itself */
} kb__fab_grain;

/* A fabric model: how messages cross the links (docs/timing-model.md). The
 * table grows by appending slots; `version` says which slots are present.
 * Every slot is required. A model's state hangs off the fabric
 * (kb__fabric_model_state); init runs once, before any message. */
#define KB__FABRIC_MODEL_VERSION 1
typedef struct kb__fabric_model {
    int version;      /* KB__FABRIC_MODEL_VERSION */
    const char *name; /* as `fabric.model` names it */
    const char *doc;
    kb__fab_grain grain;
    /* Long ring collectives run their first fabric.ring_warmup steps message
     * by message and the rest calibrated from them (ccl/board.h); false:
     * every step message by message. */
    bool calibrates_rings;
    int (*init)(kb__fabric *fab, kb__err *err);
    void (*fini)(kb__fabric *fab);
    /* Forgets link state (statistics are the fabric's: kb__fabric_reset). */
    void (*reset)(kb__fabric *fab);
    void (*send)(kb__sim *sim, kb__fab_msg *msg);                              /* kb__fab_send */
    void (*send_at)(kb__sim *sim, kb__fab_msg *msg, kb__time at);              /* kb__fab_send_at */
    int (*inject)(kb__sim *sim, kb__fab_msg *msg, kb__time *at, int in_order); /* kb__fab_inject */
    /* node is a memory of bandwidth bw_gbs behind one incoming link
     * (kb__fabric_attach_memory). */
    int (*attach_memory)(kb__fabric *fab, uint32_t node, double bw_gbs, kb__err *err);
} kb__fabric_model;

/* The models, one row each (model.c): the model called name, or NULL. */
const kb__fabric_model *kb__fabric_model_find(const char *name);
size_t kb__fabric_model_count(void);
const kb__fabric_model *kb__fabric_model_at(size_t i);
/* "packet, flow": the names, for messages. */
const char *kb__fabric_model_list(void);

/* Builds a fabric over nodes/links. packet_bytes, header_bytes >= 1. Errors:
 * KB_EINVAL (bad link endpoints, bandwidth <= 0), KB_ENOMEM. */
int kb__fabric_create(kb__fabric **out, kb__sim *sim, const kb__fab_node_desc *nodes,
                      uint32_t n_nodes, const kb__fab_link_desc *links, uint32_t n_links,
                      uint32_t packet_bytes, uint32_t header_bytes, kb__err *err);
/* Builds the fabric of the machine graph t (node and link ids are t's).
 * A link leaving a router also carries cube.router.overhead_ns in its o. */
int kb__fabric_create_topo(kb__fabric **out, kb__sim *sim, const kb__topo *t, uint32_t header_bytes,
                           kb__err *err);
void kb__fabric_destroy(kb__fabric *fab);
/* Makes fab the router of t (kb__topo_router, topo.h), t being the graph
 * fab was built from: kb__topo_route(t, ...) is kb__fabric_route(fab, ...)
 * from then on, while fab lives. */
void kb__fabric_route_graph(kb__fabric *fab, kb__topo *t);
/* Replaces the fabric's model (the packet model after kb__fabric_create)
 * before any message is sent; memories attach afterwards. KB_EINVAL for a
 * table of another version, KB_ENOMEM. */
int kb__fabric_set_model(kb__fabric *fab, const kb__fabric_model *model, kb__err *err);
const kb__fabric_model *kb__fabric_model_of(const kb__fabric *fab);
kb__fab_grain kb__fabric_grain(const kb__fabric *fab);
/* Steps a long ring collective runs message by message before the rest is
 * calibrated (fabric.ring_warmup), or 0 when the model does not calibrate
 * rings (packet) or the warm-up is 0. */
int kb__fabric_ring_warmup(const kb__fabric *fab);
/* Declares node a memory of bandwidth bw_gbs whose accesses all arrive
 * through its one incoming link: the packet model takes its arrivals in
 * order (kb__fabric_set_in_order), the flow model shares the memory as a
 * resource. KB_EINVAL as kb__fabric_set_in_order. */
int kb__fabric_attach_memory(kb__fabric *fab, uint32_t node, double bw_gbs, kb__err *err);

uint32_t kb__fabric_packet_bytes(const kb__fabric *fab);
uint32_t kb__fabric_header_bytes(const kb__fabric *fab);
/* Link utilization for traces (util.c): fn(user, link, t, busy_ps) gets
 * each link's busy time in the bucket [t, t + bucket_ps) of simulated time
 * once a reservation starts in a later bucket (or at stop), and busy_ps 0
 * at the start of the bucket after one the link then left idle. Buckets
 * with no reservation are not reported. Restarting replaces the previous
 * hook (stopping it first). KB_ENOMEM. */
typedef void (*kb__fab_util_fn)(void *user, uint32_t link, kb__time t, kb__time busy_ps);
int kb__fabric_util_start(kb__fabric *fab, kb__time bucket_ps, kb__fab_util_fn fn, void *user);
/* Reports every open bucket and stops (nothing when not started). */
void kb__fabric_util_stop(kb__fabric *fab);
/* Stops without reporting. */
void kb__fabric_util_drop(kb__fabric *fab);

uint32_t kb__fabric_node_count(const kb__fabric *fab);
uint32_t kb__fabric_link_count(const kb__fabric *fab);
/* Directed links that are down (faults.down_links, docs/faults.md): in the
 * link table, on no route. */
uint32_t kb__fabric_down_count(const kb__fabric *fab);
const kb__link *kb__fabric_link(const kb__fabric *fab, uint32_t id);
/* Adds traffic to link id's statistics that no message carried: the steps
 * a calibrated ring (ccl/board.c) accounts for without running them, over
 * [from, to) (the link utilization of a trace gets busy_ps spread there). */
void kb__fabric_link_count_more(kb__fabric *fab, uint32_t id, uint64_t bytes, uint64_t packets,
                                kb__time busy_ps, kb__time from, kb__time to);
const kb__fab_node_desc *kb__fabric_node(const kb__fabric *fab, uint32_t id);
/* kb__ps_from_bytes_gbs(scale · bytes, gbs) through memo m (not part of its
 * owner's value: a const owner may update it). */
static inline kb__time kb__svc_memo_get(const kb__svc_memo *m, uint32_t bytes, uint64_t scale,
                                        double gbs)
{
    kb__svc_memo *w = (kb__svc_memo *)m;
    if (bytes != w->bytes) *w = (kb__svc_memo){bytes, kb__ps_from_bytes_gbs(scale * bytes, gbs)};
    return w->ps;
}
/* Service time of one packet of `bytes` on link l (precomputed when full). */
kb__time kb__link_service_ps(const kb__fabric *fab, const kb__link *l, uint32_t bytes);

/* Declares that every message ending at node reaches it through its one
 * incoming link and that what its arrivals trigger only depends on their
 * order and times (a memory controller: channel reservations). The engine
 * then hands each arriving packet over when it is reserved on that link,
 * with msg->t_arrive its arrival time, instead of posting an event for the
 * arrival: the link is reserved in arrival order, so the hand-overs come in
 * arrival order. The clock at a hand-over may be before t_arrive, or, for
 * any packet but the message's last, after it; the last packet's comes no
 * later than its t_arrive. So on_packet and on_done of such messages must
 * use t_arrive, not the clock; on_done may act at or after it, on_packet
 * only on state that the node's later hand-overs read (no event). KB_EINVAL
 * when node has not exactly one incoming link. */
int kb__fabric_set_in_order(kb__fabric *fab, uint32_t node, kb__err *err);

/* A few routes remembered by their user (a DMA engine, a queue endpoint) in
 * front of the fabric's route cache: the user's own memory is in cache, the
 * route cache's slots mostly are not. Zero-initialise; replaced round robin. */
#define KB__ROUTE_MEMO 6
typedef struct kb__route_memo {
    struct {
        uint32_t from, via, to;
        const kb__route *r; /* NULL: empty */
    } e[KB__ROUTE_MEMO];
    uint32_t next;
} kb__route_memo;

/* kb__fabric_route through memo. */
int kb__fabric_route_memo(kb__fabric *fab, kb__route_memo *memo, uint32_t from, uint32_t via,
                          uint32_t to, const kb__route **out, kb__err *err);

/* The cached route from -> to (via KB__NO_NODE) or from -> via -> to, or an
 * error (KB_ENOTFOUND naming both nodes) when no path exists. */
int kb__fabric_route(kb__fabric *fab, uint32_t from, uint32_t via, uint32_t to,
                     const kb__route **out, kb__err *err);

/* Prepares msg for `bytes` (>= 1) over route, cut in packets of pkt_bytes. */
void kb__fab_msg_init(kb__fab_msg *msg, kb__fabric *fab, const kb__route *route, uint64_t bytes,
                      uint32_t pkt_bytes);
/* Records per-hop head (earliest start) and tail (latest end) into trace
 * (route->n entries), relative to msg->t_start. */
void kb__fab_msg_set_trace(kb__fab_msg *msg, kb__fab_hop *trace);
/* Bytes carried by packet pkt of msg. */
uint32_t kb__fab_msg_pkt_size(const kb__fab_msg *msg, uint32_t pkt);

/* Offers every packet of msg to its first link now (FIFO behind earlier
 * arrivals). */
void kb__fab_send(kb__sim *sim, kb__fab_msg *msg);
/* kb__fab_send at `at` >= now (msg->t_start becomes at). */
void kb__fab_send_at(kb__sim *sim, kb__fab_msg *msg, kb__time at);
/* Offers packet i to the first link at at[i] >= now, for every packet (a
 * source that produces packets over time, such as a memory read). at must
 * stay valid until the last packet is offered. When at is non-decreasing
 * (the usual case) each packet's offer posts the next, so a long message
 * keeps one pending event on its first link, not n.
 * `in_order`: the source guarantees that these packets come after every
 * packet it offered before (all of them already served) and before every
 * packet it will offer later. When also the first link carries nothing
 * but what the source offers (route->starts_at_leaf), the link is reserved
 * for the whole train now, which is the order it would serve them in, and
 * at[i] is overwritten with packet i's service end. Returns 1 then, 0 when
 * the packets were posted one by one. */
int kb__fab_inject(kb__sim *sim, kb__fab_msg *msg, kb__time *at, int in_order);

/* Closed form for msg alone on route (docs/timing-model.md): the three terms. */
typedef struct kb__fab_closed {
    kb__time overhead, wire, drain, total;
} kb__fab_closed;
void kb__fabric_closed_form(const kb__fabric *fab, const kb__route *route, uint64_t bytes,
                            uint32_t pkt_bytes, kb__fab_closed *out);

/* Statistics. */
typedef struct kb__link_class_stats {
    uint64_t bytes, packets, links;
    kb__time busy_ps;
} kb__link_class_stats;
void kb__fabric_class_stats(const kb__fabric *fab, kb__link_class_stats out[KB__LINK_CLASS_COUNT]);
/* Resets link free times and statistics (routes stay cached). */
void kb__fabric_reset(kb__fabric *fab);
/* Total packet-hops served since creation or the last reset. */
uint64_t kb__fabric_packet_hops(const kb__fabric *fab);

#endif
