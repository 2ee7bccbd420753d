/*
 * mmu_plan.c — which PE sees which replica, and the MmuMap/MmuUnmap
 * messages that install it.
 *
 * Mappings are SIP-scoped: a PE maps only the regions held inside its own
 * SIP (a VA of a region living on another SIP faults there). The target PEs
 * are every PE of every cube holding a shard of the tensor in that SIP. For
 * each region, a PE sees the nearest replica: its own shard if it holds that
 * region, else the cube's copy on the lowest-numbered PE, else the SIP's
 * first copy in shard order. PEs whose views are identical share one
 * mapping set, so a cube-split tensor gets one set per SIP ("broadcast") and
 * a cube-replicated one a set per cube ("local"), as in the original tool;
 * PE-level replication gives each holding PE its own set.
 * Messages: one per SIP when cubes split the tensor, one per cube when the
 * cube level replicates it.
 * Cost: O(target PEs × regions in the SIP) to build the views.
 */
#include "runtime/machine.h"
#include "runtime/port.h"
#include "runtime/tensor.h"

#include <stdlib.h>
#include <string.h>

typedef struct plan_ctx {
    kb_machine *m;
    kb__rt_tensor *t;
    int sip;
    int *sip_first;  /* [n_regions]: first shard of the SIP holding r, or -1 */
    int *cube_first; /* [n_regions]: same within the current cube */
    int *present;    /* regions held in the SIP, ascending */
    int n_present;
} plan_ctx;

/* Shard index owned by (sip, cube, pe), or -1. Shards are sorted by owner. */
static int shard_of(const kb__shard_plan *p, int sip, int cube, int pe)
{
    int lo = 0, hi = p->n_shards;
    long key = ((long)sip << 40) | ((long)cube << 20) | pe;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const kb__shard *s = &p->shards[mid];
        long k = ((long)s->sip << 40) | ((long)s->cube << 20) | s->pe;
        if (k < key)
            lo = mid + 1;
        else if (k > key)
            hi = mid;
        else
            return mid;
    }
    return -1;
}

static void fill_cube_first(plan_ctx *c, int cube)
{
    const kb__shard_plan *p = &c->t->plan;
    for (int r = 0; r < p->n_regions; r++)
        c->cube_first[r] = -1;
    for (int e = (int)c->m->pes - 1; e >= 0; e--) {
        int i = shard_of(p, c->sip, cube, e);
        if (i >= 0) c->cube_first[p->shards[i].region] = i;
    }
}

static void view_of(const plan_ctx *c, int cube, int pe, int *view)
{
    const kb__shard_plan *p = &c->t->plan;
    int own = shard_of(p, c->sip, cube, pe);
    for (int k = 0; k < c->n_present; k++) {
        int r = c->present[k];
        if (own >= 0 && p->shards[own].region == r)
            view[k] = own;
        else
            view[k] = c->cube_first[r] >= 0 ? c->cube_first[r] : c->sip_first[r];
    }
}

static int make_set(const plan_ctx *c, const int *view, kb__mmu_set **out, kb__err *err)
{
    const kb__rt_tensor *t = c->t;
    kb__mmu_seg *segs = malloc((size_t)c->n_present * sizeof *segs);
    if (!segs) return kb__err_set(err, KB_ENOMEM, "tensor '%s': cannot build its mapping", t->name);
    for (int k = 0; k < c->n_present; k++)
        segs[k] =
            (kb__mmu_seg){kb__rt_region_va(t, c->present[k]), t->region_stride, t->pa[view[k]]};
    int rc = kb__mmu_set_create(&c->m->mmu, segs, (size_t)c->n_present, t->serial, out, err);
    free(segs);
    return rc;
}

typedef struct group_build {
    kb__rt_mmu_group *groups;
    int **views;
    uint32_t n;
} group_build;

static void groups_free(group_build *b)
{
    for (uint32_t g = 0; g < b->n; g++) {
        kb__mmu_set_release(b->groups[g].set);
        free(b->groups[g].pes);
        free(b->views[g]);
    }
    free(b->groups);
    free(b->views);
}

/* Adds PE (global index gpe) with view to the group of an identical view. */
static int group_add(const plan_ctx *c, group_build *b, uint32_t max, const int *view, uint32_t gpe,
                     kb__err *err)
{
    size_t vb = (size_t)c->n_present * sizeof *view;
    uint32_t g = 0;
    while (g < b->n && memcmp(b->views[g], view, vb) != 0)
        g++;
    if (g == b->n) {
        b->views[g] = malloc(vb);
        b->groups[g].pes = malloc(max * sizeof(uint32_t));
        b->groups[g].n_pes = 0;
        b->groups[g].set = NULL;
        b->n++;
        if (!b->views[g] || !b->groups[g].pes)
            return kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", c->t->name);
        memcpy(b->views[g], view, vb);
        int rc = make_set(c, view, &b->groups[g].set, err);
        if (rc) return rc;
    }
    b->groups[g].pes[b->groups[g].n_pes++] = gpe;
    return 0;
}

/* One MmuMap message for cubes[0..n_cubes) of the context's SIP. */
static int map_cubes(plan_ctx *c, const uint32_t *cubes, uint32_t n_cubes, kb__err *err)
{
    kb_machine *m = c->m;
    uint32_t max = n_cubes * m->pes;
    group_build b = {calloc(max, sizeof *b.groups), calloc(max, sizeof *b.views), 0};
    int *view = malloc(((size_t)c->n_present + 1) * sizeof *view);
    int rc = (!b.groups || !b.views || !view)
                 ? kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", c->t->name)
                 : 0;
    for (uint32_t k = 0; !rc && k < n_cubes; k++) {
        fill_cube_first(c, (int)cubes[k]);
        for (uint32_t e = 0; !rc && e < m->pes; e++) {
            view_of(c, (int)cubes[k], (int)e, view);
            rc =
                group_add(c, &b, max, view, kb__rt_pe_index(m, c->sip, (int)cubes[k], (int)e), err);
        }
    }
    if (!rc) {
        kb__rt_mmu_msg msg = {1, (uint32_t)c->sip, cubes, n_cubes, b.groups, b.n, 0, 0};
        rc = kb__rt_port_mmu(m, &msg, err);
    }
    free(view);
    if (b.groups && b.views)
        groups_free(&b);
    else {
        free(b.groups);
        free(b.views);
    }
    return rc;
}

/* Target cubes of SIP sip (ascending) into cubes; returns how many. */
static uint32_t target_cubes(const kb_machine *m, const kb__shard_plan *p, int sip, uint32_t *cubes)
{
    uint32_t n = 0;
    for (int i = 0; i < p->n_shards; i++)
        if (p->shards[i].sip == sip && (n == 0 || cubes[n - 1] != (uint32_t)p->shards[i].cube))
            cubes[n++] = (uint32_t)p->shards[i].cube;
    return n;
}

static int map_sip(plan_ctx *c, uint32_t *cubes, kb__err *err)
{
    const kb__shard_plan *p = &c->t->plan;
    uint32_t n = target_cubes(c->m, p, c->sip, cubes);
    for (int r = 0; r < p->n_regions; r++)
        c->sip_first[r] = -1;
    for (int i = p->n_shards - 1; i >= 0; i--)
        if (p->shards[i].sip == c->sip) c->sip_first[p->shards[i].region] = i;
    c->n_present = 0;
    for (int r = 0; r < p->n_regions; r++)
        if (c->sip_first[r] >= 0) c->present[c->n_present++] = r;
    if (p->mode[1] != KB_REPLICATE) return map_cubes(c, cubes, n, err);
    for (uint32_t k = 0; k < n; k++) {
        int rc = map_cubes(c, &cubes[k], 1, err);
        if (rc) return rc;
    }
    return 0;
}

int kb__rt_tensor_map(kb_machine *m, kb__rt_tensor *t, kb__err *err)
{
    const kb__shard_plan *p = &t->plan;
    plan_ctx c = {m, t, 0, NULL, NULL, NULL, 0};
    size_t nr = (size_t)p->n_regions;
    c.sip_first = malloc(nr * sizeof(int));
    c.cube_first = malloc(nr * sizeof(int));
    c.present = malloc(nr * sizeof(int));
    uint32_t *cubes = malloc(m->cubes * sizeof *cubes);
    int rc = (!c.sip_first || !c.cube_first || !c.present || !cubes)
                 ? kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", t->name)
                 : 0;
    int s = p->base[0];
    for (; !rc && s < p->base[0] + p->count[0]; s++) {
        c.sip = s;
        rc = map_sip(&c, cubes, err);
    }
    if (rc) /* undo the SIPs already mapped */
        for (int u = p->base[0]; u < s; u++)
            for (uint32_t i = 0; i < m->cubes * m->pes; i++)
                kb__mmu_detach(&m->mmu, (uint32_t)u * m->cubes * m->pes + i, t->va, t->va_bytes);
    t->mapped = !rc;
    free(c.sip_first);
    free(c.cube_first);
    free(c.present);
    free(cubes);
    return rc;
}

static int unmap_cubes(kb_machine *m, kb__rt_tensor *t, int sip, const uint32_t *cubes, uint32_t n,
                       kb__err *err)
{
    uint32_t *pes = malloc((size_t)n * m->pes * sizeof *pes);
    if (!pes) return kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", t->name);
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t e = 0; e < m->pes; e++)
            pes[k * m->pes + e] = kb__rt_pe_index(m, sip, (int)cubes[k], (int)e);
    kb__rt_mmu_group g = {NULL, pes, n * m->pes};
    kb__rt_mmu_msg msg = {0, (uint32_t)sip, cubes, n, &g, 1, t->va, t->va_bytes};
    int rc = kb__rt_port_mmu(m, &msg, err);
    free(pes);
    return rc;
}

int kb__rt_tensor_unmap(kb_machine *m, kb__rt_tensor *t, kb__err *err)
{
    if (!t->mapped) return 0;
    const kb__shard_plan *p = &t->plan;
    uint32_t *cubes = malloc(m->cubes * sizeof *cubes);
    if (!cubes) return kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", t->name);
    int rc = 0;
    for (int s = p->base[0]; !rc && s < p->base[0] + p->count[0]; s++) {
        uint32_t n = target_cubes(m, p, s, cubes);
        if (p->mode[1] != KB_REPLICATE)
            rc = unmap_cubes(m, t, s, cubes, n, err);
        else
            for (uint32_t k = 0; !rc && k < n; k++)
                rc = unmap_cubes(m, t, s, &cubes[k], 1, err);
    }
    t->mapped = 0;
    free(cubes);
    return rc;
}
