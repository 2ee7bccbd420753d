/*
 * pe_xfer.c — PeXfer: a PE's DMA engine moving a tile between its TCM and
 * device memory (the memory side of tl_load / tl_store), as a PeDma with
 * several segments sharing one channel occupancy.
 *
 * Gather/scatter: the runs are grouped per memory (HBM slice, SRAM) in
 * order of first appearance, and each memory's runs become one segment, one
 * message chain whose data packets carry those runs back to back: request
 * pe_dma -> memory, data memory -> pe_dma -> TCM (a store: the reverse),
 * ack -> pe_dma (xfer.c runs the chain). The
 * memory side moves bytes through the backing store (unless --no-data); the
 * TCM side is timing only, because tile bytes live in the PE's tile buffers:
 * a load's sampled bytes go straight to the tile, a store's come from it.
 * An atomic is a load whose memory side, when it samples the bytes, writes
 * the read-modify-write result back at the same instant (memctl.h); it
 * takes exactly a load's time.
 * Cost: a few allocations per transfer, O(runs × memories) grouping,
 * O(memories) routes (cached).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "host/internal.h"

/* One block from the device's pool when the transfer fits one, else
 * separate allocations. */
static kb__xfer *pex_alloc(kb__device *d, uint32_t n_groups, uint32_t n_runs)
{
    kb__xfer *x;
    if (n_groups == 1 && n_runs <= KB__PEX_BLOCK_RUNS) {
        kb__pex_block *b = kb__pool_get(&d->pex_pool);
        if (!b) return NULL;
        /* Zero all of it but the error's message (read only once the
         * error's code is set) and the runs (pex_build writes the first
         * n_runs, nothing reads past them): together three quarters of the
         * block, and the blocks of transfers in flight are out of cache by
         * the time they come back from the pool. */
        size_t msg = offsetof(kb__pex_block, x.err.msg), rest = msg + sizeof b->x.err.msg;
        size_t runs = offsetof(kb__pex_block, runs), tail = offsetof(kb__pex_block, sipg);
        _Static_assert(offsetof(kb__pex_block, x.err.msg) < offsetof(kb__pex_block, runs),
                       "the error's message lies before the runs");
        memset(b, 0, msg);
        b->x.err.msg[0] = '\0';
        memset((char *)b + rest, 0, runs - rest);
        memset((char *)b + tail, 0, sizeof *b - tail);
        x = &b->x;
        x->pooled = 1;
        x->segs = &b->seg;
        x->runs = b->runs;
        x->sipg = &b->sipg;
        x->cubeg = &b->cubeg;
    } else {
        x = calloc(1, sizeof *x);
        if (!x) return NULL;
        x->segs = calloc(n_groups, sizeof *x->segs);
        x->runs = calloc(n_runs, sizeof *x->runs);
        x->sipg = calloc(1, sizeof *x->sipg);
        x->cubeg = calloc(1, sizeof *x->cubeg);
        if (!x->segs || !x->runs || !x->sipg || !x->cubeg) {
            kb__xfer_free(x);
            return NULL;
        }
    }
    x->d = d;
    x->kind = XK_DMA;
    kb__xfer_track(x);
    x->n_segs = n_groups;
    kb__event_init(&x->done, "PeXfer");
    for (uint32_t i = 0; i < n_groups; i++)
        x->segs[i].x = x;
    return x;
}

static int route(kb__xfer *x, kb__fab_msg *m, uint32_t from, uint32_t via, uint32_t to,
                 uint64_t bytes, uint32_t pkt, void *user, kb__err *err)
{
    const kb__route *r;
    int rc = kb__fabric_route_memo(x->d->fab, &x->dma->routes, from, via, to, &r, err);
    if (rc) return rc;
    kb__fab_msg_init(m, x->d->fab, r, bytes, pkt);
    m->user = user;
    return 0;
}

/* Whether the run [pa, pa + bytes) lies inside memory mem (NULL: no). */
static bool run_inside(const kb__memctl *mem, uint64_t pa, uint64_t bytes)
{
    uint64_t off = mem ? pa - mem->base_pa : 0;
    return mem && off < mem->size && bytes <= mem->size - off;
}

/* The memory of each run, checked; group[i] numbers the distinct memories
 * in order of first appearance, mems[g] is memory g. Returns the count of
 * memories, or a negative status. */
static int pex_group(kb__device *d, kb__pe_dma *dma, const kb__seg *runs, uint32_t n,
                     uint32_t *group, kb__memctl **mems, kb__err *err)
{
    uint32_t ng = 0;
    for (uint32_t i = 0; i < n; i++) {
        const kb__seg *r = &runs[i];
        if (!r->bytes)
            return kb__err_set(err, KB_EINVAL, "PeXfer run %u: zero size at 0x%llx", i,
                               (unsigned long long)r->pa);
        /* A run inside the memory of the one before (a tile's rows: the
         * common case), or for the first run one of the engine's last two,
         * needs no decode: [base_pa, base_pa + size) is exactly the
         * addresses that decode to that memory, so the checks below would
         * pass and name it. */
        kb__memctl *mem = NULL;
        if (i && run_inside(mems[group[i - 1]], r->pa, r->bytes)) {
            mem = mems[group[i - 1]];
        } else if (!i && run_inside(dma->recent[0], r->pa, r->bytes)) {
            mem = dma->recent[0];
        } else if (!i && run_inside(dma->recent[1], r->pa, r->bytes)) {
            mem = dma->recent[1];
            dma->recent[1] = dma->recent[0];
            dma->recent[0] = mem;
        } else {
            mem = kb__device_memctl(d, r->pa, err);
            if (!mem) return kb__err_prefix(err, "PeXfer run %u: ", i);
            if (kb__addr_check_span(&d->geom, r->pa, r->bytes, err))
                return kb__err_prefix(err, "PeXfer run %u (%s, %llu bytes): ", i, mem->name,
                                      (unsigned long long)r->bytes);
            if (!i) dma->recent[1] = dma->recent[0], dma->recent[0] = mem;
        }
        uint32_t g = ng && mems[ng - 1] == mem ? ng - 1 : 0;
        while (g < ng && mems[g] != mem)
            g++;
        if (g == ng) mems[ng++] = mem;
        group[i] = g;
    }
    return (int)ng;
}

/* Builds segment g: the memory mem, its nr runs x->runs[first ..] (total
 * bytes), the PE's TCM controller tcm. */
static int pex_seg(kb__xfer *x, uint32_t g, kb__memctl *mem, uint32_t first, uint32_t nr,
                   uint64_t total, kb__memctl *tcm, int write, kb__err *err)
{
    kb__device *d = x->d;
    kb__seg_op *s = &x->segs[g];
    const kb__mem_run *r = &x->runs[first];
    s->seg = (kb__seg){mem->base_pa + r->offset, total, r->host};
    s->mc = write ? tcm : mem;
    s->mc2 = write ? mem : tcm;
    uint32_t p = kb__fabric_packet_bytes(d->fab), h = d->header_bytes, dn = x->dma->node;
    int rc = route(x, &s->req, dn, KB__NO_NODE, s->mc->node, h, h, s, err);
    if (!rc) rc = route(x, &s->data, s->mc->node, dn, s->mc2->node, total, p, s, err);
    if (!rc) rc = route(x, &s->ack, s->mc2->node, KB__NO_NODE, dn, h, h, s, err);
    if (rc) return rc;
    kb__store *st = d->no_data ? NULL : &d->store;
    kb__mem_xfer *mx = write ? &s->mx2 : &s->mx, *tx = write ? &s->mx : &s->mx2;
    kb__mem_xfer_init(mx, mem, st, r->offset, total, p);
    kb__mem_xfer_init(tx, tcm, NULL, 0, total, p);
    if (nr > 1)
        kb__mem_xfer_set_runs(mx, r, nr);
    else if (!d->no_data && write)
        mx->src = r->host;
    else if (!d->no_data)
        mx->dst = r->host;
    s->mx.out = &s->data;
    s->mx.user = s->mx2.user = s;
    s->mx.err = s->mx2.err = &x->err;
    return 0;
}

/* Groups the runs per memory (x->runs: each memory's runs in their order)
 * and builds one segment per memory. */
static int pex_build(kb__xfer *x, const kb__seg *runs, uint32_t n, const uint32_t *group,
                     kb__memctl *const *mems, uint32_t ng, kb__memctl *tcm, int write, kb__err *err)
{
    uint32_t k = 0;
    int rc = 0;
    for (uint32_t g = 0; g < ng && !rc; g++) {
        uint32_t first = k;
        uint64_t total = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (group[i] != g) continue;
            x->runs[k++] = (kb__mem_run){runs[i].pa - mems[g]->base_pa, runs[i].bytes,
                                         (uint8_t *)runs[i].host};
            total += runs[i].bytes;
        }
        rc = pex_seg(x, g, mems[g], first, k - first, total, tcm, write, err);
    }
    return rc;
}

/* kb__device_pe_xfer, with an atomic's read-modify-write on every memory
 * segment of a read when rmw is not NULL. */
static int pe_xfer(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe, int write,
                   const kb__seg *runs, uint32_t n, kb__time extra_setup_ps, kb__xfer_fn on_finish,
                   void *user, kb__mem_rmw_fn rmw, void *rmw_ctx, kb__xfer **out, kb__err *err)
{
    *out = NULL;
    const kb__topo *t = d->topo;
    if (sip >= t->sips || cube >= t->cubes_per_sip || pe >= t->pes_per_cube)
        return kb__err_set(err, KB_ERANGE, "PeXfer: no PE sip%u.cube%u.pe%u in this machine", sip,
                           cube, pe);
    if (!n || !runs) return kb__err_set(err, KB_EINVAL, "PeXfer: no runs");
    /* Every PE of the machine has an address (the geometry's SIPs are
     * racks x SIPs per rack); a machine whose SIPs do not fill its racks
     * goes through the address and its error. */
    kb__memctl *tcm = NULL;
    int rc = 0;
    if (sip < d->geom.racks * d->geom.sips_per_rack) {
        tcm = kb__device_tcm(d, sip, cube, pe);
    } else {
        uint64_t tcm_pa;
        rc = kb__device_pa(d, KB__SPACE_TCM, sip, cube, pe, 0, &tcm_pa, err);
        tcm = rc ? NULL : kb__device_memctl(d, tcm_pa, err);
        if (!tcm) return err->code;
    }
    uint32_t group_s[KB__PEX_BLOCK_RUNS];
    kb__memctl *mems_s[KB__PEX_BLOCK_RUNS];
    int small = n <= KB__PEX_BLOCK_RUNS;
    uint32_t *group = small ? group_s : malloc(n * sizeof *group);
    kb__memctl **mems = small ? mems_s : malloc(n * sizeof *mems);
    kb__pe_dma *dma = kb__device_dma(d, sip, cube, pe);
    int ng = group && mems ? pex_group(d, dma, runs, n, group, mems, err)
                           : kb__err_set(err, KB_ENOMEM, "PeXfer: out of memory for %u runs", n);
    kb__xfer *x = ng > 0 ? pex_alloc(d, (uint32_t)ng, n) : NULL;
    if (ng > 0 && !x && d->pex_pool.budget->refused)
        ng = kb__err_set(err, KB_EBUDGET, "PeXfer: %s", d->pex_pool.budget->msg);
    else if (ng > 0 && !x)
        ng = kb__err_set(err, KB_ENOMEM, "PeXfer: out of memory for %u runs", n);
    if (x) {
        x->dma = dma;
        rc = pex_build(x, runs, n, group, mems, (uint32_t)ng, tcm, write, err);
    }
    if (!small) {
        free(group);
        free(mems);
    }
    if (ng < 0) return ng;
    if (rc) {
        kb__xfer_free(x);
        return rc;
    }
    for (int g = 0; rmw && g < ng; g++) { /* a read: the memory side is mx */
        x->segs[g].mx.rmw = rmw;
        x->segs[g].mx.rmw_ctx = rmw_ctx;
    }
    x->extra_setup_ps = extra_setup_ps;
    x->pending_segs = (uint32_t)ng;
    x->on_finish = on_finish;
    x->user = user;
    kb__xfer_wire(x);
    kb__xfer_start(d->sim, x);
    *out = x;
    return 0;
}

int kb__device_pe_xfer(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe, int write,
                       const kb__seg *runs, uint32_t n, kb__time extra_setup_ps,
                       kb__xfer_fn on_finish, void *user, kb__xfer **out, kb__err *err)
{
    return pe_xfer(d, sip, cube, pe, write, runs, n, extra_setup_ps, on_finish, user, NULL, NULL,
                   out, err);
}

int kb__device_pe_atomic(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe,
                         const kb__seg *runs, uint32_t n, kb__time extra_setup_ps,
                         kb__xfer_fn on_finish, void *user, kb__mem_rmw_fn rmw, void *rmw_ctx,
                         kb__xfer **out, kb__err *err)
{
    if (!rmw) return kb__err_set(err, KB_EINVAL, "PeXfer atomic: no read-modify-write function");
    return pe_xfer(d, sip, cube, pe, 0, runs, n, extra_setup_ps, on_finish, user, rmw, rmw_ctx, out,
                   err);
}

void *kb__xfer_user(const kb__xfer *x)
{
    return x->user;
}

int kb__xfer_status(const kb__xfer *x, kb__err *err)
{
    if (x->status && err) kb__err_copy(err, &x->err);
    return x->status;
}
