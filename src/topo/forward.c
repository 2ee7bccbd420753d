/*
 * forward.c — the forwarding kinds' ops (topo/kinds.h): what a message
 * pays leaving a node that forwards it.
 *
 *   router   cube.router.overhead_ns: the cube router's traversal
 *   transit  transit.first_flit_ns: the generic forwarding component that
 *            can stand for a router, xbar, NOC, IO NOC or PCIe endpoint
 *
 * The cost is paid once per message per node (the first flit; the other
 * packets pipeline behind it), on every link out of the node. Messages
 * follow their whole route as computed at the source (path-based: the
 * fabric's route, fabric/route.c). A transit node also has a serial
 * worker: every packet crossing it, whatever links it comes in and goes
 * out on, is forwarded one at a time (the fabric models serve it:
 * docs/topology.md, "Component kinds"); a router serialises nothing
 * beyond its links.
 */
#include "sim/sim.h"
#include "topo/kinds.h"
#include "topo/params.h"

static uint64_t router_leave(const kb__topo_params *p)
{
    return kb__ps_from_ns(p->cube.router_overhead_ns);
}

static uint64_t transit_leave(const kb__topo_params *p)
{
    return kb__ps_from_ns(p->transit.first_flit_ns);
}

/* The transit node's serial worker: one packet at a time, across all its
 * links, for transit.worker_ns + size / transit.worker_bw_gbs. */
static kb__kind_worker transit_worker(const kb__topo_params *p)
{
    return (kb__kind_worker){p->transit.worker_bw_gbs, kb__ps_from_ns(p->transit.worker_ns)};
}

const kb__kind_ops kb__router_ops = {.version = KB__KIND_OPS_VERSION, .leave_ps = router_leave};
const kb__kind_ops kb__transit_ops = {
    .version = KB__KIND_OPS_VERSION, .leave_ps = transit_leave, .worker = transit_worker};
