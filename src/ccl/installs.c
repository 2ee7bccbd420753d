/*
 * installs.c — the machine's cache of collective installs (ccl/installs.h).
 *
 * What is kept: up to KB__CCL_MAX_INSTALLS installs, each an algorithm,
 * its plan (the PE set in rank order), its queue set and its ring blocks.
 * Rings come from the machine's allocators (TCM, SRAM, HBM), so tensors
 * and rings never share memory. A lookup compares the algorithm and the
 * PE set; a hit costs no simulated time.
 *
 * Invariants:
 *   - a PE's tile scratch starts above the highest TCM ring any cached
 *     install has on it (kb__tcm_set_base; TCM rings are placed first fit
 *     from the bottom of the usable TCM). Freeing an install's rings
 *     recomputes the base of its PEs from the installs that stay. A base
 *     applies from the next program on its PE (kb__tcm_reset), and rings
 *     are placed only on the PEs of a call that no running collective uses
 *     (ccl/run.c, "turns"), so no ring lands under a running collective's
 *     tile scratch.
 *   - a PE has one endpoint pointer (unit->ipcq) and may be in several
 *     installs: kb__ccl_installed_attach, before each launch, points the
 *     PEs at the endpoints of the install that runs. A kernel launched
 *     later outside a collective finds on a PE the endpoint of the install
 *     a collective last used there (tl_send and tl_recv refuse it: only
 *     collective kernels use the queues).
 *   - an install a running collective uses (running) is never evicted;
 *     one whose queues a launch may still use (q_in_use: an unwound
 *     launch whose programs did not end) is never freed, nor evicted:
 *     dropping it detaches its set and leaves it allocated.
 *
 * Eviction, least recently used first among the installs not in use:
 *   - beyond KB__CCL_MAX_INSTALLS, one at a time before a new install;
 *   - when a new install's ring does not fit its memory (KB_ENOSPC,
 *     KB_ENOMEM from the allocator): among the installs holding a ring in
 *     that memory (the TCM or HBM slice of the PE, the SRAM of the cube),
 *     one at a time, each time freeing the new install's rings placed so
 *     far and placing them all again, until they fit or no such install is
 *     left (the allocator's error then). Evicting the others would not
 *     help, so they stay; placing again from the start puts the rings
 *     where they would go without the evicted install. Placing costs no
 *     simulated time (install.h), so a retry does not either.
 * LRU order is a count of calls, so the same calls evict the same installs
 * and give the same simulated times.
 *
 * Cost: a lookup is O(installs x world size) (PE sets compared); a new
 * install O(world size) plus its simulated messages; freeing one
 * O(rings of every install) (the TCM bases recomputed).
 */
#include "ccl/installs.h"

#include <stdlib.h>
#include <string.h>

#include "host/device.h"
#include "runtime/launch.h"
#include "runtime/machine.h"
#include "runtime/memory.h"

/* ---- rings ------------------------------------------------------------------ */

static int memory_alloc(kb_machine *m, kb__ccl_buffer kind, uint32_t unit, uint64_t bytes,
                        uint64_t *pa, kb__err *err)
{
    return kind == KB__CCL_BUF_TCM    ? kb__rt_tcm_alloc(m, unit, bytes, KB__TCM_ALIGN, pa, err)
           : kind == KB__CCL_BUF_SRAM ? kb__rt_sram_alloc(m, unit, bytes, 64, pa, err)
                                      : kb__rt_hbm_alloc(m, unit, bytes, pa, err);
}

/* Tile scratch of every PE with TCM rings of in starts above its highest one. */
static void tcm_raise(kb__ccl_installs *c, const kb__ccl_installed *in)
{
    kb_machine *m = c->m;
    for (size_t i = 0; i < in->n_rings; i++) {
        const kb__ccl_ring_block *b = &in->rings[i];
        if (b->kind != KB__CCL_BUF_TCM) continue;
        kb__tcm *t = &m->pe_units[b->unit]->tcm;
        uint64_t end = b->pa + b->bytes - m->tcm[b->unit].base;
        end = (end + KB__TCM_ALIGN - 1) / KB__TCM_ALIGN * KB__TCM_ALIGN;
        if (end > t->base) kb__tcm_set_base(t, end);
    }
}

/* Frees in's rings (in is not in the cache). The PEs that had TCM rings of
 * in get their base back from the rings of the installs that stay: it drops
 * to 0 and every cached install raises it again, which leaves the other
 * PEs' bases as they were (each is already their highest ring). */
static void rings_free(kb__ccl_installs *c, kb__ccl_installed *in)
{
    kb_machine *m = c->m;
    kb__err e;
    for (size_t i = 0; i < in->n_rings; i++) {
        kb__ccl_ring_block *b = &in->rings[i];
        if (b->kind == KB__CCL_BUF_TCM) {
            kb__rt_tcm_free(m, b->unit, b->pa, &e);
            if (m->pe_units) kb__tcm_set_base(&m->pe_units[b->unit]->tcm, 0);
        } else if (b->kind == KB__CCL_BUF_SRAM) {
            kb__rt_sram_free(m, b->unit, b->pa, &e);
        } else {
            kb__rt_hbm_free(m, b->unit, b->pa, &e);
        }
    }
    in->n_rings = 0;
    for (size_t i = 0; m->pe_units && i < c->n_inst; i++)
        tcm_raise(c, c->inst[i]);
}

/* The allocator kb__ccl_install places c->building's rings with. A ring
 * that finds its memory full records which (c->full), for place_and_push. */
static int ring_alloc(void *self, kb__ccl_buffer kind, uint32_t rank, kb__ccl_loc loc,
                      uint32_t ring, uint64_t bytes, uint64_t *pa, kb__err *err)
{
    kb__ccl_installs *c = self;
    kb_machine *m = c->m;
    kb__ccl_installed *in = c->building;
    if (in->n_rings == in->cap_rings) {
        size_t cap = in->cap_rings ? 2 * in->cap_rings : 64;
        kb__ccl_ring_block *v = realloc(in->rings, cap * sizeof *v);
        if (!v) return kb__err_set(err, KB_ENOMEM, "ipcq rings: out of host memory");
        in->rings = v;
        in->cap_rings = cap;
    }
    uint32_t gi = kb__rt_pe_index(m, (int)loc.sip, (int)loc.cube, (int)loc.pe);
    uint32_t unit = kind == KB__CCL_BUF_SRAM ? loc.sip * m->cubes + loc.cube : gi;
    int rc = memory_alloc(m, kind, unit, bytes, pa, err);
    if (rc == KB_ENOSPC || rc == KB_ENOMEM) {
        c->is_full = 1;
        c->full = (kb__ccl_ring_block){kind, unit, 0, bytes};
    }
    if (rc)
        return kb__err_prefix(err, "ipcq ring %u of rank %u (sip%u/cube%u/pe%u, %s): ", ring, rank,
                              loc.sip, loc.cube, loc.pe, kb__ccl_buffer_name(kind));
    in->rings[in->n_rings++] = (kb__ccl_ring_block){kind, unit, *pa, bytes};
    return 0;
}

/* ---- the cache ---------------------------------------------------------------- */

/* Frees in (not in the cache). Traffic of its queues still in flight (vc
 * chunks of a tl_send that returned, credits, copies) lands first, as on
 * the hardware: its events point into the set. When it cannot (the
 * simulator stopped), or a launch may still use the queues (q_in_use), the
 * set is detached from the PEs and left allocated rather than freed under
 * pending events. drain 0: the machine is closing, nothing runs again. */
static void install_free(kb__ccl_installs *c, kb__ccl_installed *in, int drain)
{
    kb__ipcq_set *q = in->q;
    if (q && (in->q_in_use || (drain && kb__ipcq_drain(q)))) {
        for (uint32_t r = 0; r < q->world; r++)
            if (q->ep[r].unit && q->ep[r].unit->ipcq == &q->ep[r]) q->ep[r].unit->ipcq = NULL;
    } else {
        kb__ipcq_destroy(q);
    }
    rings_free(c, in);
    kb__ccl_plan_destroy(in->plan);
    free(in->pes);
    free(in->rings);
    free(in);
}

void kb__ccl_installs_drop(kb__ccl_installs *c, kb__ccl_installed *in, int drain)
{
    for (size_t i = 0; i < c->n_inst; i++)
        if (c->inst[i] == in) {
            memmove(&c->inst[i], &c->inst[i + 1], (c->n_inst - i - 1) * sizeof *c->inst);
            c->n_inst--;
            break;
        }
    if (c->last == in) c->last = NULL;
    install_free(c, in, drain);
}

void kb__ccl_installs_drop_all(kb__ccl_installs *c, int drain)
{
    while (c->n_inst)
        kb__ccl_installs_drop(c, c->inst[c->n_inst - 1], drain);
}

void kb__ccl_installs_init(kb__ccl_installs *c, kb_machine *m)
{
    memset(c, 0, sizeof *c);
    c->m = m;
}

void kb__ccl_installs_fini(kb__ccl_installs *c)
{
    kb__ccl_installs_drop_all(c, 0);
    free(c->inst);
    free(c->unpushed);
    memset(c, 0, sizeof *c);
}

/* Whether in has a ring in the memory of block b (its kind and unit). */
static int holds_ring(const kb__ccl_installed *in, const kb__ccl_ring_block *b)
{
    for (size_t i = 0; i < in->n_rings; i++)
        if (in->rings[i].kind == b->kind && in->rings[i].unit == b->unit) return 1;
    return 0;
}

/* The least recently used install no launch may still use; memory
 * non-NULL: only among those with a ring in that memory. */
static kb__ccl_installed *lru_idle(const kb__ccl_installs *c, const kb__ccl_ring_block *memory)
{
    kb__ccl_installed *best = NULL;
    for (size_t i = 0; i < c->n_inst; i++) {
        kb__ccl_installed *in = c->inst[i];
        if (in->q_in_use || in->running || (memory && !holds_ring(in, memory))) continue;
        if (!best || in->last_use < best->last_use) best = in;
    }
    return best;
}

/* Room in the cache for one more install: evicts the least recently used
 * idle ones beyond KB__CCL_MAX_INSTALLS - 1, grows the list. */
static int make_room(kb__ccl_installs *c, kb__err *err)
{
    kb__ccl_installed *old;
    while (c->n_inst >= KB__CCL_MAX_INSTALLS && (old = lru_idle(c, NULL)))
        kb__ccl_installs_drop(c, old, 1);
    if (c->n_inst < c->cap_inst) return 0;
    size_t cap = c->cap_inst ? 2 * c->cap_inst : 4;
    kb__ccl_installed **v = realloc(c->inst, cap * sizeof *v);
    if (!v) return kb__err_set(err, KB_ENOMEM, "ccl install: out of host memory");
    c->inst = v;
    c->cap_inst = cap;
    return 0;
}

/* The cached install of algorithm a over p's PE set in p's rank order. */
static kb__ccl_installed *find(const kb__ccl_installs *c, const kb__ccl_algo *a,
                               const kb__ccl_plan *p)
{
    for (size_t i = 0; i < c->n_inst; i++) {
        const kb__ccl_plan *q = c->inst[i]->plan;
        if (c->inst[i]->algo == a && q->world_size == p->world_size &&
            !memcmp(q->loc, p->loc, p->world_size * sizeof *p->loc))
            return c->inst[i];
    }
    return NULL;
}

static void use(kb__ccl_installs *c, kb__ccl_installed *in)
{
    in->last_use = ++c->uses;
    c->last = in;
}

/* A PE has one unit->ipcq and may be in several installs: the launch about
 * to run picks whose endpoint it sees. */
void kb__ccl_installed_attach(const kb__ccl_installed *in)
{
    for (uint32_t r = 0; r < in->q->world; r++)
        if (in->q->ep[r].unit) in->q->ep[r].unit->ipcq = &in->q->ep[r];
}

/* Installs in's plan with units[r] rank r's PE. When a ring finds its
 * memory full, in's rings are freed, the least recently used idle install
 * holding rings in that memory is evicted and the whole placement starts
 * again (so the rings land where they would without the evicted one); the
 * allocator's error once no such install is left. Placement fails before
 * the install's simulated push, so retries cost no simulated time. */
static int place_and_push(kb__ccl_installs *c, kb__ccl_installed *in, kb__pe *const *units,
                          kb__ccl_install_info *info, kb__err *err)
{
    kb__ccl_ring_alloc alloc = {ring_alloc, c};
    int rc;
    for (;;) {
        c->building = in;
        c->is_full = 0;
        rc = c->deferring ? kb__ccl_install_place(c->m->dev, in->plan, units, &alloc, &in->q, err)
                          : kb__ccl_install(c->m->dev, in->plan, units, &alloc, &in->q, info, err);
        c->building = NULL;
        if (!rc || !c->is_full) break;
        rings_free(c, in);
        kb__ccl_installed *old = lru_idle(c, &c->full);
        if (!old) break;
        kb__ccl_installs_drop(c, old, 1);
        kb__err_clear(err);
    }
    return rc;
}

/* Makes the queues of plan (taken over) for algorithm a and adds them to
 * the cache. */
static int install_new(kb__ccl_installs *c, const kb__ccl_algo *a, kb__ccl_plan *plan,
                       kb__ccl_installed **out, kb__ccl_install_info *info, kb__err *err)
{
    kb_machine *m = c->m;
    int rc = make_room(c, err);
    if (!rc) rc = kb__rt_pes_init(m, err);
    kb__ccl_installed *in = rc ? NULL : calloc(1, sizeof *in);
    uint32_t *pes = in ? malloc(plan->world_size * sizeof *pes) : NULL;
    kb__pe **units = pes ? malloc(plan->world_size * sizeof *units) : NULL;
    if (!rc && !units) rc = kb__err_set(err, KB_ENOMEM, "ccl install: out of memory");
    for (uint32_t r = 0; !rc && r < plan->world_size; r++) {
        kb__ccl_loc l = plan->loc[r];
        pes[r] = kb__rt_pe_index(m, (int)l.sip, (int)l.cube, (int)l.pe);
        units[r] = m->pe_units[pes[r]];
    }
    if (!rc) {
        *in = (kb__ccl_installed){.algo = a, .plan = plan, .pes = pes};
        rc = place_and_push(c, in, units, info, err);
    }
    free(units);
    if (rc) {
        if (in) rings_free(c, in);
        free(in ? in->rings : NULL);
        free(in);
        free(pes);
        kb__ccl_plan_destroy(plan);
        return kb__err_prefix(err, "algorithm '%s': ", a->name);
    }
    c->inst[c->n_inst++] = in;
    tcm_raise(c, in);
    *out = in;
    return 0;
}

int kb__ccl_installs_get(kb__ccl_installs *c, const kb__ccl_algo *a, kb__ccl_plan *plan,
                         kb__ccl_installed **out, int *installed, kb__ccl_install_info *info,
                         kb__err *err)
{
    *out = NULL;
    *installed = 0;
    kb__ccl_installed *in = find(c, a, plan);
    if (in) {
        kb__ccl_plan_destroy(plan);
    } else {
        if (c->deferring && c->n_unpushed == c->cap_unpushed) {
            size_t cap = c->cap_unpushed ? 2 * c->cap_unpushed : 16;
            const kb__ccl_plan **v = realloc(c->unpushed, cap * sizeof *v);
            if (!v) {
                kb__ccl_plan_destroy(plan);
                return kb__err_set(err, KB_ENOMEM, "ccl install: out of memory");
            }
            c->unpushed = v;
            c->cap_unpushed = cap;
        }
        int rc = install_new(c, a, plan, &in, info, err);
        if (rc) return rc;
        if (c->deferring) c->unpushed[c->n_unpushed++] = in->plan;
        *installed = 1;
    }
    use(c, in);
    *out = in;
    return 0;
}

void kb__ccl_installs_defer(kb__ccl_installs *c)
{
    c->deferring = 1;
    c->n_unpushed = 0;
}

int kb__ccl_installs_push(kb__ccl_installs *c, kb__ccl_install_info *info, kb__err *err)
{
    int rc = kb__ccl_install_push(c->m->dev, c->unpushed, c->n_unpushed, info, err);
    c->deferring = 0;
    c->n_unpushed = 0;
    return rc;
}
