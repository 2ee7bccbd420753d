/*
 * topo/reach.h — what the PEs can actually draw: peak figures bounded by
 * the machine graph's minimum cut.
 *
 * A peak figure of `kernbench topo` (HBM bandwidth of a cube, UCIe
 * bisection, PCIe) is one component's rate; traffic reaches it through
 * links that may be slower. kb__topo_max_flow computes the maximum flow
 * from a set of source nodes to a set of sink nodes over the directed
 * links (capacity = the link's bw_gbs), each end with its own capacity,
 * and names the minimum cut that bounds it. kb__topo_reach_get applies it
 * to each bandwidth peak with the consumers that draw it (the PEs' DMA
 * engines, or the host).
 *
 * The host forwards nothing (its links carry flow only from or to it as an
 * end). Otherwise the flow may take any path of the graph: it is an upper bound on what a
 * fixed route achieves, and equal to it wherever traffic has one path (a
 * cube's HBM to its own PEs). Invariant: flow <= every figure it bounds.
 *
 * Cost: Dinic's algorithm, O(V^2 E) worst case; on the default machine
 * (2,247 nodes, 1,970 links) every figure together takes a few ms.
 */
#ifndef KB_TOPO_REACH_H
#define KB_TOPO_REACH_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "topo/topo.h"

/* One end of a flow: a node and the rate it can give or take (GB/s; a
 * non-positive cap means unbounded). what names that rate when it is the
 * bound ("HBM slices"); NULL for an unbounded end. */
typedef struct kb__flow_end {
    uint32_t node;
    double cap_gbs;
    const char *what;
} kb__flow_end;

#define KB__REACH_BOUND_MAX 160

typedef struct kb__topo_reach {
    double gbs;                      /* maximum flow, GB/s */
    uint32_t cut_edges;              /* links and end capacities in the minimum cut */
    char bound[KB__REACH_BOUND_MAX]; /* "1 xbar<->noc link", "8 noc<->pe_dma links + ..." */
} kb__topo_reach;

/* The maximum flow from src[] to dst[] over t's links and its minimum cut,
 * named by the cut's link kinds (roles at either end) and end capacities,
 * counted, in order of first link id. sip_in (t->sips flags, or NULL for
 * all) limits the flow to links between nodes of the SIPs it admits (and
 * the host). gbs is 0 and bound "no path" when no source reaches a sink.
 * KB_EINVAL for a node id out of range; KB_ENOMEM. */
int kb__topo_max_flow(const kb__topo *t, const kb__flow_end *src, size_t nsrc,
                      const kb__flow_end *dst, size_t ndst, const unsigned char *sip_in,
                      kb__topo_reach *out, kb__err *err);

/* Each bandwidth peak of kb__topo_figures with what the PEs can draw of it:
 *   hbm_slice   one HBM slice of cube (0,0) to that cube's PE DMA engines
 *   hbm_cube    all slices of cube (0,0) to that cube's PE DMA engines
 *   hbm_system  all slices to all PE DMA engines
 *   bisection   slices of the cubes of SIP 0 beyond the middle cut of
 *               kb__topo_figures (column >= cols/2; row >= rows/2 when the
 *               rows are cut) to the PE DMA engines of the cubes before it
 *   pcie        the host to every SIP's HBM slices, divided by the SIPs
 *               (alike, so each SIP's share); its cut counts every SIP's links
 *   sip_link    SIP 0's slices to SIP 1's PE DMA engines over SIPs 0 and 1
 *               alone (not round the rest of a ring); absent with one SIP
 * A PE DMA engine takes at most pe.dma.channels x pe.dma.bw_gbs; a slice
 * gives at most its bandwidth x efficiency. has_* is 0 where the figure does
 * not exist (no middle cut, one SIP). */
typedef struct kb__topo_reach_figures {
    kb__topo_reach hbm_slice, hbm_cube, hbm_system, bisection, pcie, sip_link;
    int has_bisection, has_sip_link;
} kb__topo_reach_figures;

int kb__topo_reach_get(const kb__topo *t, kb__topo_reach_figures *r, kb__err *err);

#endif
