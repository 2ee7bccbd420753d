/*
 * runtime/tensor.h — the tensor table of a machine and a tensor's layout.
 *
 * Tensor table: slots hold tensors; a handle id is
 * (tag << 52 | serial << 20 | slot), where serial (32 bits, from 1) is the
 * tensor's creation number (unique per machine, never reused) and tag
 * (12 bits) is the machine's: a handle belongs to the machine that made it.
 * Open machines hold distinct non-zero tags (machine.c), so a handle used
 * with another machine is refused (KB_EINVAL) before its slot is looked at.
 * A handle is valid while its slot holds the tensor with that serial, so a
 * freed or stale handle is detected, never dereferenced.
 *
 *
 * VA layout of a tensor: one contiguous range from the VA allocator, page
 * aligned; region r (the r-th distinct block of data, row-major over the
 * grid of blocks, as runtime/shard.h numbers them) starts at
 * va + r × region_stride, region_stride = region bytes rounded up to a page.
 * Every replica of a region has the same VA; which replica a PE sees is
 * chosen when the mappings are built (runtime/mmu_plan.c).
 */
#ifndef KB_RUNTIME_TENSOR_H
#define KB_RUNTIME_TENSOR_H

#include "base/dtype.h"
#include "kernbench/tl.h"
#include "runtime/machine.h"
#include "runtime/shard.h"

typedef struct kb__rt_tensor {
    uint64_t serial; /* creation number; the handle's high bits */
    uint32_t slot;   /* index in the machine's tensor table */
    char name[KB__RT_NAME_MAX];
    int ndim;
    int64_t shape[3]; /* entries past ndim are 0 */
    kb__dtype dtype;
    kb_policy policy;       /* counts resolved */
    int sip_scope;          /* set_device SIP it was scoped to, or -1 */
    kb__shard_plan plan;    /* shards in (sip, cube, pe) order */
    uint64_t *pa;           /* per shard: HBM address, page aligned */
    uint64_t va, va_bytes;  /* the tensor's VA range */
    uint64_t region_stride; /* bytes between regions in VA (the largest shard, page-rounded) */
    uint64_t *region_bytes; /* per region: its shard's bytes; NULL when all are equal */
    int mapped;             /* MMU mappings installed */
} kb__rt_tensor;

struct kb__rt_slot {
    uint64_t serial;                  /* of the live tensor, or of the last freed */
    kb__rt_tensor *t;                 /* NULL when free */
    char freed_name[KB__RT_NAME_MAX]; /* name of the last tensor freed here */
};

/* ---- tensor.c --------------------------------------------------------------- */

/* The live tensor of handle id, or NULL with KB_EINVAL ("tensor id N is a
 * handle made by another machine") or KB_ENOTFOUND ("... was freed", "... is
 * not a tensor of this machine") in err. Every public call taking a
 * kb_tensor goes through it. */
kb__rt_tensor *kb__rt_tensor_get(kb_machine *m, uint64_t id, kb__err *err);
/* Whether handle or launch id `id` carries another machine's tag (the
 * tag of an id m made is m->tag; 0 is nobody's). */
static inline int kb__rt_made_elsewhere(const kb_machine *m, uint64_t id)
{
    uint64_t tag = id >> KB__RT_TAG_SHIFT;
    return tag && tag != m->tag;
}
/* The handle of live tensor t of m. */
static inline kb_tensor kb__rt_handle(const kb_machine *m, const kb__rt_tensor *t)
{
    return (kb_tensor){(uint64_t)m->tag << KB__RT_TAG_SHIFT | t->serial << KB__RT_SLOT_BITS |
                       t->slot};
}
/* Writes "inside tensor 'x' (id N) VA [a, b)" for a VA in a live tensor's
 * range, "" otherwise (the pe_mmu fault namer). */
void kb__rt_name_va(void *machine, uint64_t va, char *buf, size_t size);
/* Elements of shard s of t (rows × mid × cols; rows and mid are 1 for a
 * 1-D tensor, mid for a 2-D one). */
static inline int64_t kb__rt_shard_elems(const kb__rt_tensor *t, int s)
{
    return t->plan.shards[s].rows * t->plan.mid * t->plan.shards[s].cols;
}
/* VA of region r of t. */
static inline uint64_t kb__rt_region_va(const kb__rt_tensor *t, int region)
{
    return t->va + (uint64_t)region * t->region_stride;
}

/* ---- mmu_plan.c: which PE sees which replica -------------------------------- */

/* Builds and sends the MmuMap messages of a tensor (one per SIP when cubes
 * split the tensor, one per cube when cubes replicate it). */
int kb__rt_tensor_map(kb_machine *m, kb__rt_tensor *t, kb__err *err);
/* Sends the matching MmuUnmap messages. */
int kb__rt_tensor_unmap(kb_machine *m, kb__rt_tensor *t, kb__err *err);

/* Shard `shard` of t as the tl_tensor a program on its PE sees (name is
 * borrowed). */
void kb__rt_shard_view(const kb__rt_tensor *t, int shard, const char *name, tl_tensor *out);

#endif
