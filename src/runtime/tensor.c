/*
 * tensor.c — creating, looking up, describing and freeing tensors.
 *
 * Creation order: validate and place (runtime/shard.h), allocate each
 * shard's HBM (page aligned), one VA range, install the MMU mappings
 * (runtime/mmu_plan.c), then the optional fill. Any failure undoes the
 * steps already done, so a failed call leaves memory and tables as before.
 * Freeing runs the same steps backwards. Handles: see runtime/tensor.h.
 */
#include "runtime/machine.h"
#include "runtime/memory.h"
#include "runtime/port.h"
#include "runtime/tensor.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kb__rt_tensor *kb__rt_tensor_get(kb_machine *m, uint64_t id, kb__err *err)
{
    uint64_t slot = id & (KB__RT_MAX_SLOTS - 1),
             serial = (id >> KB__RT_SLOT_BITS) & KB__RT_MAX_SERIAL, tag = id >> KB__RT_TAG_SHIFT;
    if (kb__rt_made_elsewhere(m, id)) {
        kb__err_set(err, KB_EINVAL,
                    "tensor id %" PRIu64 " is a handle made by another machine (a handle works "
                    "only with the machine that made it)",
                    serial);
        return NULL;
    }
    if (!tag || !serial || serial >= m->next_serial || slot >= m->n_slots) {
        kb__err_set(err, KB_ENOTFOUND, "tensor handle %" PRIu64 " is not a tensor of this machine",
                    id);
        return NULL;
    }
    kb__rt_slot *s = &m->slots[slot];
    if (s->t && s->serial == serial) return s->t;
    if (!s->t && s->serial == serial)
        kb__err_set(err, KB_ENOTFOUND, "tensor '%s' (id %" PRIu64 ") was freed", s->freed_name,
                    serial);
    else
        kb__err_set(err, KB_ENOTFOUND, "tensor id %" PRIu64 " was freed", serial);
    return NULL;
}

static int slot_take(kb_machine *m, uint32_t *out, kb__err *err)
{
    if (m->n_free_slots) {
        *out = m->free_slots[--m->n_free_slots];
        return 0;
    }
    if (m->n_slots == KB__RT_MAX_SLOTS)
        return kb__err_set(err, KB_ENOMEM, "more than %u live tensors", KB__RT_MAX_SLOTS);
    if (m->n_slots == m->cap_slots) {
        uint32_t cap = m->cap_slots ? 2 * m->cap_slots : 16;
        kb__rt_slot *s = realloc(m->slots, cap * sizeof *s);
        uint32_t *f = s ? realloc(m->free_slots, cap * sizeof *f) : NULL;
        if (s) m->slots = s;
        if (!f) return kb__err_set(err, KB_ENOMEM, "cannot grow the tensor table to %u", cap);
        m->free_slots = f;
        m->cap_slots = cap;
    }
    memset(&m->slots[m->n_slots], 0, sizeof m->slots[0]);
    *out = m->n_slots++;
    return 0;
}

/* Frees shard memory of shards [0, n) and the VA range if allocated. */
static void release_memory(kb_machine *m, kb__rt_tensor *t, int n)
{
    for (int i = 0; i < n; i++) {
        const kb__shard *s = &t->plan.shards[i];
        kb__rt_hbm_free(m, kb__rt_pe_index(m, s->sip, s->cube, s->pe), t->pa[i], NULL);
    }
    if (t->va) kb__range_free(&m->va, t->va, NULL);
    t->va = 0;
}

static void tensor_destroy(kb__rt_tensor *t)
{
    kb__shard_plan_fini(&t->plan);
    free(t->pa);
    free(t->region_bytes);
    free(t);
}

static int place(kb_machine *m, kb__rt_tensor *t, const kb_policy *pol, kb__err *err)
{
    int dev_sip = kb__rt_device(m);
    kb__shard_req req = {
        .name = t->name,
        .ndim = t->ndim,
        .shape = t->shape,
        .elem_size = kb__dtype_size(t->dtype),
        .policy = {pol->sip, pol->cube, pol->pe, pol->num_sips, pol->num_cubes, pol->num_pes,
                   pol->first_cube, pol->first_pe},
        .geom = {(int)m->sips, (int)m->cubes, (int)m->pes},
        .device_sip = dev_sip,
    };
    int rc = kb__shard_plan_make(&t->plan, &req, err);
    if (rc) return rc;
    t->policy = *pol;
    t->policy.num_sips = t->plan.count[0];
    t->policy.num_cubes = t->plan.count[1];
    t->policy.num_pes = t->plan.count[2];
    t->sip_scope = (dev_sip >= 0 && t->plan.base[0] == dev_sip && pol->sip == KB_REPLICATE &&
                    pol->num_sips == 0)
                       ? dev_sip
                       : -1;
    return 0;
}

static int allocate(kb_machine *m, kb__rt_tensor *t, kb__err *err)
{
    const kb__shard_plan *p = &t->plan;
    t->pa = calloc((size_t)p->n_shards, sizeof *t->pa);
    if (!t->pa) return kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", t->name);
    for (int i = 0; i < p->n_shards; i++) {
        const kb__shard *s = &p->shards[i];
        int rc = kb__rt_hbm_alloc(m, kb__rt_pe_index(m, s->sip, s->cube, s->pe), s->bytes,
                                  &t->pa[i], err);
        if (rc) {
            release_memory(m, t, i);
            return kb__err_prefix(err, "tensor '%s': shard %d: ", t->name, i);
        }
    }
    /* Regions start one stride apart: the largest shard, rounded to pages. */
    t->region_stride = (p->max_bytes + m->page_size - 1) & ~(m->page_size - 1);
    if (!p->even) { /* uneven shards: kernels check each region's own size */
        t->region_bytes = calloc((size_t)p->n_regions, sizeof *t->region_bytes);
        if (!t->region_bytes) {
            release_memory(m, t, p->n_shards);
            return kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", t->name);
        }
        for (int i = 0; i < p->n_shards; i++)
            t->region_bytes[p->shards[i].region] = p->shards[i].bytes;
    }
    t->va_bytes = t->region_stride * (uint64_t)p->n_regions;
    int rc = kb__range_alloc(&m->va, t->va_bytes, m->page_size, &t->va, err);
    if (rc) {
        release_memory(m, t, p->n_shards);
        return kb__err_prefix(err, "tensor '%s': ", t->name);
    }
    return 0;
}

static int check_create(kb_machine *m, int ndim, const int64_t *shape, kb_dtype dtype,
                        const char *name, kb__err *err)
{
    if (ndim > 3)
        return kb__err_set(err, KB_EUNSUPPORTED,
                           "tensor '%s': %d-D shapes are not supported (tensors have 1 to 3 "
                           "dimensions)",
                           name, ndim);
    if (ndim < 1)
        return kb__err_set(err, KB_EINVAL, "tensor '%s': ndim is %d; expected 1, 2 or 3", name,
                           ndim);
    if (!shape) return kb__err_set(err, KB_EINVAL, "tensor '%s': shape is NULL", name);
    if (!kb__dtype_valid((int)dtype))
        return kb__err_set(err, KB_EINVAL,
                           "tensor '%s': unknown dtype %d (expected KB_F16, KB_BF16, KB_F32, "
                           "KB_I32, KB_I8, KB_BOOL, KB_I16, KB_U8, KB_U16 or KB_U32)",
                           name, (int)dtype);
    return 0;
}

/* Makes, places, allocates and maps a tensor; on success it is in a slot. */
static int create(kb_machine *m, const char *name, int ndim, const int64_t *shape, kb_dtype dtype,
                  const kb_policy *policy, kb__rt_tensor **out, kb__err *err)
{
    char nm[KB__RT_NAME_MAX];
    if (name)
        snprintf(nm, sizeof nm, "%s", name);
    else
        snprintf(nm, sizeof nm, "t%" PRIu64, m->next_serial);
    int rc = check_create(m, ndim, shape, dtype, nm, err);
    if (rc) return rc;
    if (m->next_serial > KB__RT_MAX_SERIAL)
        return kb__err_set(err, KB_ENOMEM,
                           "tensor '%s': this machine has made %llu tensors, the most its "
                           "handles can number",
                           nm, (unsigned long long)KB__RT_MAX_SERIAL);
    kb__rt_tensor *t = calloc(1, sizeof *t);
    if (!t) return kb__err_set(err, KB_ENOMEM, "tensor '%s': out of memory", nm);
    memcpy(t->name, nm, sizeof nm);
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    t->dtype = (kb__dtype)dtype;
    kb_policy def = KB_POLICY_DEFAULT;
    uint32_t slot = 0;
    if ((rc = place(m, t, policy ? policy : &def, err)) || (rc = allocate(m, t, err))) {
        tensor_destroy(t);
        return rc;
    }
    t->serial = m->next_serial;
    if ((rc = kb__rt_tensor_map(m, t, err)) || (rc = slot_take(m, &slot, err))) {
        kb__rt_tensor_unmap(m, t, NULL);
        release_memory(m, t, t->plan.n_shards);
        tensor_destroy(t);
        return rc;
    }
    m->next_serial++;
    t->slot = slot;
    m->slots[slot] = (kb__rt_slot){t->serial, t, ""};
    m->live_tensors++;
    *out = t;
    return 0;
}

static int create_filled(kb_machine *m, const char *name, int ndim, const int64_t *shape,
                         kb_dtype dtype, const kb_policy *policy, const double *value,
                         kb_tensor *out)
{
    kb__err err;
    kb__err_clear(&err);
    if (!out) return m ? kb__rt_fail(m, &(kb__err){KB_EINVAL, "tensor: out is NULL"}) : KB_EINVAL;
    *out = (kb_tensor){0};
    if (!m) return KB_EINVAL;
    kb__rt_tensor *t = NULL;
    int rc = create(m, name, ndim, shape, dtype, policy, &t, &err);
    if (rc) return kb__rt_fail(m, &err);
    kb_tensor h = kb__rt_handle(m, t);
    if (value) {
        uint8_t pat[8] __attribute__((aligned(8)));
        kb__dtype_from_f64(t->dtype, *value, pat);
        kb__rt_seg *segs = malloc((size_t)t->plan.n_shards * sizeof *segs);
        if (!segs) rc = kb__err_set(&err, KB_ENOMEM, "tensor '%s': out of memory", t->name);
        for (int i = 0; !rc && i < t->plan.n_shards; i++)
            segs[i] = (kb__rt_seg){t->pa[i], t->plan.shards[i].bytes, NULL};
        if (!rc)
            rc = kb__rt_port_write(m, segs, (uint32_t)t->plan.n_shards, pat,
                                   kb__dtype_size(t->dtype), &err);
        free(segs);
        if (rc) {
            kb_free(m, h);
            return kb__rt_fail(m, &err);
        }
    }
    *out = h;
    return 0;
}

int kb_empty(kb_machine *m, const char *name, int ndim, const int64_t *shape, kb_dtype dtype,
             const kb_policy *policy, kb_tensor *out)
{
    return create_filled(m, name, ndim, shape, dtype, policy, NULL, out);
}

int kb_zeros(kb_machine *m, const char *name, int ndim, const int64_t *shape, kb_dtype dtype,
             const kb_policy *policy, kb_tensor *out)
{
    return create_filled(m, name, ndim, shape, dtype, policy, &(double){0.0}, out);
}

int kb_full(kb_machine *m, const char *name, int ndim, const int64_t *shape, kb_dtype dtype,
            const kb_policy *policy, double value, kb_tensor *out)
{
    return create_filled(m, name, ndim, shape, dtype, policy, &value, out);
}

int kb_free(kb_machine *m, kb_tensor h)
{
    if (!m) return KB_EINVAL;
    kb__err err;
    kb__err_clear(&err);
    kb__rt_tensor *t = kb__rt_tensor_get(m, h.id, &err);
    if (!t) return kb__rt_fail(m, &err);
    int rc = kb__rt_tensor_unmap(m, t, &err);
    release_memory(m, t, t->plan.n_shards);
    uint32_t slot = t->slot;
    snprintf(m->slots[slot].freed_name, sizeof m->slots[slot].freed_name, "%s", t->name);
    m->slots[slot].t = NULL;
    m->free_slots[m->n_free_slots++] = slot;
    m->live_tensors--;
    tensor_destroy(t);
    return rc ? kb__rt_fail(m, &err) : 0;
}

void kb__rt_name_va(void *machine, uint64_t va, char *buf, size_t size)
{
    kb_machine *m = machine;
    buf[0] = '\0';
    for (uint32_t i = 0; i < m->n_slots; i++) {
        const kb__rt_tensor *t = m->slots[i].t;
        if (t && va >= t->va && va - t->va < t->va_bytes) {
            char a[32], b[32];
            snprintf(buf, size, "(inside tensor '%s' (id %" PRIu64 ") VA [%s, %s))", t->name,
                     t->serial, kb__mmu_format_va(t->va, a, sizeof a),
                     kb__mmu_format_va(t->va + t->va_bytes, b, sizeof b));
            return;
        }
    }
}
