/*
 * runtime/internal.h — the machine behind kb_machine and the tensor table.
 *
 * A machine owns: its parameters, the device memory allocators (per PE: HBM
 * slice and TCM above the scheduler reserve; per cube: SRAM; one VA space),
 * the pe_mmu tables, the simulated device (simulator, fabric, memory
 * controllers, backing store; its clock is the machine's clock), the tensor
 * table and statistics.
 * Nothing is global: two machines share nothing but the registry of the
 * tags open machines hold (machine.c).
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
 * Launch ids are (tag << 52 | serial) the same way: serial (52 bits, from
 * 1) is the launch's number on its machine, tag the machine's, so a launch
 * id used with another machine is refused (KB_EINVAL) before any launch is
 * looked at (launch.c).
 *
 * VA layout of a tensor: one contiguous range from the VA allocator, page
 * aligned; region r (the r-th distinct block of data, row-major over the
 * grid of blocks, as runtime/shard.h numbers them) starts at
 * va + r × region_stride, region_stride = region bytes rounded up to a page.
 * Every replica of a region has the same VA; which replica a PE sees is
 * chosen when the mappings are built (runtime/mmu_plan.c).
 */
#ifndef KB_RUNTIME_INTERNAL_H
#define KB_RUNTIME_INTERNAL_H

#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"
#include "kernbench/kernbench.h"
#include "mem/addr.h"
#include "mem/alloc.h"
#include "mem/store.h"
#include "host/device.h"
#include "pe/mmu.h"
#include "pe/pe.h"
#include "runtime/ranks.h"
#include "runtime/shard.h"
#include "topo/params.h"

#define KB__RT_SLOT_BITS   20
#define KB__RT_MAX_SLOTS   (1u << KB__RT_SLOT_BITS)
#define KB__RT_SERIAL_BITS 32
#define KB__RT_MAX_SERIAL  ((1ull << KB__RT_SERIAL_BITS) - 1) /* serials are 1..this */
#define KB__RT_TAG_SHIFT   (KB__RT_SLOT_BITS + KB__RT_SERIAL_BITS)
#define KB__RT_MAX_TAGS    (1u << (64 - KB__RT_TAG_SHIFT)) /* tags are 1..this - 1 */
#define KB__RT_NAME_MAX    64

/* The VA space tensors are placed in (documented in docs/runtime.md). */
#define KB__RT_VA_BASE 0x100000000ull /* 4 GiB: 0 and low addresses never map */
#define KB__RT_VA_SIZE (1ull << 46)   /* 64 TiB, above the default 1.5 TiB of HBM */

typedef struct kb__rt_tensor {
    uint64_t serial; /* creation number; the handle's high bits */
    uint32_t slot;   /* index in the machine's tensor table */
    char name[KB__RT_NAME_MAX];
    int ndim;
    int64_t shape[2]; /* shape[1] = 0 for 1-D */
    kb__dtype dtype;
    kb_policy policy;       /* counts resolved */
    int sip_scope;          /* set_device SIP it was scoped to, or -1 */
    kb__shard_plan plan;    /* shards in (sip, cube, pe) order */
    uint64_t *pa;           /* per shard: HBM address, page aligned */
    uint64_t va, va_bytes;  /* the tensor's VA range */
    uint64_t region_stride; /* bytes between regions in VA */
    int mapped;             /* MMU mappings installed */
} kb__rt_tensor;

typedef struct kb__rt_slot {
    uint64_t serial;                  /* of the live tensor, or of the last freed */
    kb__rt_tensor *t;                 /* NULL when free */
    char freed_name[KB__RT_NAME_MAX]; /* name of the last tensor freed here */
} kb__rt_slot;

typedef struct kb__rt_stats {
    uint64_t reset_ps;
    uint64_t messages[KB_MSG_KIND_COUNT], bytes[KB_MSG_KIND_COUNT];
    uint64_t link_base[KB_LINK_CLASS_COUNT]; /* fabric bytes per class at reset */
    uint64_t launches;                       /* completed since reset */
} kb__rt_stats;

/* Counters of one PE at the last kb_stats_reset (stats.c). */
typedef struct kb__rt_pe_base {
    kb__time busy[KB__PE_UNIT_COUNT];
    uint64_t work[KB__PE_UNIT_COUNT];
    uint64_t programs;
} kb__rt_pe_base;

/* Counters of one link direction at the last reset. */
typedef struct kb__rt_link_base {
    uint64_t bytes;
    kb__time busy;
} kb__rt_link_base;

/* Host-side buffers a copy uses while it blocks: one set per host rank, so
 * ranks copying at the same time never share them. */
typedef struct kb__rt_scratch {
    uint8_t *stage; /* staging buffer for copies */
    size_t stage_cap;
    kb__seg *segs; /* segment list for copies */
    size_t segs_cap;
} kb__rt_scratch;

typedef struct kb__rt_launch kb__rt_launch;
typedef struct kb__rt_ranks kb__rt_ranks;
struct kb__tl_span;
struct kb__tl_arg;

struct kb_machine {
    kb__topo_params params;
    uint32_t sips, cubes, pes; /* SIPs, cubes per SIP, PEs per cube */
    uint32_t n_pes;            /* sips × cubes × pes */
    uint64_t page_size;
    kb__addr_geom ageom;
    kb__err err;               /* last failure, for kb_last_error */
    uint32_t tag;              /* top bits of its tensor handles; 0 only while kb_open fails */
    kb__range_allocator *hbm;  /* [n_pes]: PA range of the PE's HBM slice */
    kb__range_allocator *tcm;  /* [n_pes]: PA range of TCM above the reserve */
    kb__range_allocator *sram; /* [sips × cubes]: PA range of the cube's SRAM */
    kb__range_allocator va;    /* tensor virtual addresses */
    kb__mmu mmu;
    kb__device *dev; /* sim (the clock), fabric, memories, backing store */
    int device_sip;  /* kb_set_device binding, -1 none */
    kb__rt_slot *slots;
    uint32_t n_slots, cap_slots;
    uint32_t *free_slots; /* stack of free slot indices */
    uint32_t n_free_slots;
    uint64_t next_serial; /* starts at 1 */
    uint32_t live_tensors;
    kb__rt_stats stats;
    kb__rt_scratch scratch; /* host buffers of the driver (ranks have their own) */
    kb__rt_ranks *ranks;    /* host ranks and their groups' slots (ranks.c), or NULL */
    /* PEs and launches (launch.c); PEs are created at the first launch */
    kb__pe_params pe_params;     /* from the topology, checked at kb_open */
    kb__pe **pe_units;           /* [n_pes], NULL until the first launch */
    kb__rt_pe_base *pe_base;     /* [n_pes] statistics at the last reset */
    kb__rt_link_base *link_base; /* [links] statistics at the last reset */
    kb__rt_launch *launches;     /* outstanding or not yet waited, in launch order */
    uint32_t *pe_mark;           /* [n_pes] scratch of try_start (launch.c) */
    uint32_t pe_stamp;           /* its current mark */
    uint64_t next_launch_id;     /* serial of the next launch, from 1 (kb__rt_launch_id) */
    kb__rt_group_ext layers[KB__RT_EXT_MAX]; /* layers' machine state (ranks.h): ccl's */
    struct kb__rt_trace *trace;              /* kb_trace_start's file, or NULL (trace.c) */
};

/* ---- machine.c: opening, machine tags ---------------------------------------- */

/* A layer above the runtime that opens with the machine: the overrides
 * starting with prefix ("ccl.") are its, the others the topology's; open
 * runs once the topology is loaded, before the allocators and the device
 * are built, and keeps its state in a machine slot (kb__rt_layer_put). */
typedef struct kb__rt_opener {
    const char *prefix;
    int (*open)(kb_machine *m, const kb_open_options *o, const char *const *sets, size_t n_sets,
                kb__err *err);
} kb__rt_opener;

/* kb_open with up's layer (NULL: none); the same contract. */
int kb__rt_open(kb_machine **out, const kb_open_options *opts, const kb__rt_opener *up,
                char *errbuf, size_t errbuf_size);

/* Takes a tag no open machine holds, in 1..KB__RT_MAX_TAGS - 1, going round
 * them in order (a closed machine's tag comes back only after the others
 * were handed out); KB_ENOMEM when every tag is held. Thread safe. */
int kb__rt_tag_take(uint32_t *out, kb__err *err);
/* Gives a tag back (0: nothing). */
void kb__rt_tag_release(uint32_t tag);

/* ---- memory.c: device memory allocators ---------------------------------- */

/* Creates the per-PE, per-cube and VA allocators; KB_ENOMEM/KB_ECONFIG. */
int kb__rt_memory_init(kb_machine *m, kb__err *err);
void kb__rt_memory_fini(kb_machine *m);
/* Global PE index of an owner. */
static inline uint32_t kb__rt_pe_index(const kb_machine *m, int sip, int cube, int pe)
{
    return ((uint32_t)sip * m->cubes + (uint32_t)cube) * m->pes + (uint32_t)pe;
}
/* Allocates bytes (rounded up to a page, page aligned) in the HBM slice of
 * PE index pe; KB_ENOSPC naming the slice, request and largest free. */
int kb__rt_hbm_alloc(kb_machine *m, uint32_t pe, uint64_t bytes, uint64_t *pa, kb__err *err);
int kb__rt_hbm_free(kb_machine *m, uint32_t pe, uint64_t pa, kb__err *err);
/* Same for the PE's TCM above the scheduler reserve (align a power of two). */
int kb__rt_tcm_alloc(kb_machine *m, uint32_t pe, uint64_t bytes, uint64_t align, uint64_t *pa,
                     kb__err *err);
int kb__rt_tcm_free(kb_machine *m, uint32_t pe, uint64_t pa, kb__err *err);
/* Same for the SRAM of cube index (sip × cubes + cube). */
int kb__rt_sram_alloc(kb_machine *m, uint32_t cube, uint64_t bytes, uint64_t align, uint64_t *pa,
                      kb__err *err);
int kb__rt_sram_free(kb_machine *m, uint32_t cube, uint64_t pa, kb__err *err);
/* True when every allocator (HBM, TCM, SRAM, VA) holds nothing. */
bool kb__rt_memory_pristine(const kb_machine *m);

/* ---- port.c: the host's messages to the device ---------------------------- */

/* One piece of a host message: [pa, pa + bytes) inside one memory, and
 * the host bytes it comes from or goes to (unused by a fill). */
typedef kb__seg kb__rt_seg;

/* One MemoryWrite command covering n segments: data from each segment's
 * host bytes, or (pattern non-NULL) a repeating fill of pattern_len bytes.
 * Sent through the device (host/device.h); blocks until every segment
 * landed, running the simulation (the clock advances); counts it in the
 * statistics. */
int kb__rt_port_write(kb_machine *m, const kb__rt_seg *segs, uint32_t n, const void *pattern,
                      size_t pattern_len, kb__err *err);
/* One MemoryRead command gathering n segments into their host bytes. */
int kb__rt_port_read(kb_machine *m, const kb__rt_seg *segs, uint32_t n, kb__err *err);

/* One group of an MMU message: PEs (global indices) that get one set. */
typedef struct kb__rt_mmu_group {
    kb__mmu_set *set;
    uint32_t *pes;
    uint32_t n_pes;
} kb__rt_mmu_group;

/* MmuMap (map = 1) or MmuUnmap (map = 0) for one SIP's target cubes. For an
 * unmap, groups carry no set and [va, va + len) is removed from their PEs. */
typedef struct kb__rt_mmu_msg {
    int map;
    uint32_t sip;
    const uint32_t *cubes; /* target cubes (in the SIP) */
    uint32_t n_cubes;
    kb__rt_mmu_group *groups;
    uint32_t n_groups;
    uint64_t va, len; /* unmap range */
} kb__rt_mmu_msg;

/* Sends the message to its target cubes, applies it to the PE tables there
 * and advances the clock; the cost grows with the number of target cubes.
 * On a map failure nothing stays attached. */
int kb__rt_port_mmu(kb_machine *m, const kb__rt_mmu_msg *msg, kb__err *err);

/* ---- mmu_plan.c: which PE sees which replica -------------------------------- */

/* Builds and sends the MmuMap messages of a tensor (one per SIP when cubes
 * split the tensor, one per cube when cubes replicate it). */
int kb__rt_tensor_map(kb_machine *m, kb__rt_tensor *t, kb__err *err);
/* Sends the matching MmuUnmap messages. */
int kb__rt_tensor_unmap(kb_machine *m, kb__rt_tensor *t, kb__err *err);

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
/* Elements of shard s of t (rows × cols; rows is 1 for a 1-D tensor). */
static inline int64_t kb__rt_shard_elems(const kb__rt_tensor *t, int s)
{
    return t->plan.shards[s].rows * t->plan.shards[s].cols;
}
/* VA of region r of t. */
static inline uint64_t kb__rt_region_va(const kb__rt_tensor *t, int region)
{
    return t->va + (uint64_t)region * t->region_stride;
}

/* ---- copy.c ----------------------------------------------------------------- */

/* A segment list of at least n entries for the calling host rank (or the
 * driver), owned by m (KB_ENOMEM). */
int kb__rt_segs(kb_machine *m, size_t n, kb__rt_seg **out, kb__err *err);
/* A staging buffer of at least n bytes for the calling host rank (or the
 * driver), owned by m (KB_ENOMEM). */
int kb__rt_stage(kb_machine *m, size_t n, uint8_t **out, kb__err *err);
void kb__rt_scratch_fini(kb__rt_scratch *s);

/* ---- trace.c: the trace file ---------------------------------------------------- */

/* Tracks of a PE in the trace: its units (kb__pe_unit_id), then programs. */
#define KB__RT_TRACK_COUNT (KB__PE_UNIT_COUNT + 1)

/* Tracks of the host in the trace. */
typedef enum kb__rt_host_track {
    KB__RT_HOST_COLLECTIVES = 0,
    KB__RT_HOST_LAUNCHES,
    KB__RT_HOST_TRACK_COUNT
} kb__rt_host_track;

/* Records a host call that began at t0 and ends now on `track` of the host
 * (bytes: its payload); nothing when no trace is on. */
void kb__rt_trace_span(kb_machine *m, kb__rt_host_track track, const char *cat, const char *name,
                       kb__time t0, uint64_t bytes);

/* ---- ranks.c (runtime/ranks.h has the rest) --------------------------------- */

/* The calling host rank's scratch buffers (the driver's from the main stack). */
kb__rt_scratch *kb__rt_scratch_of(kb_machine *m);
/* Frees the machine's layer slots, the last taken first (kb_close). */
void kb__rt_layers_fini(kb_machine *m);

/* ---- launch.c, dma_port.c, stats.c ----------------------------------------- */

/* Creates every PE (once); KB_ENOMEM. */
int kb__rt_pes_init(kb_machine *m, kb__err *err);
/* Destroys outstanding launches and the PEs (kb_close; the device's
 * simulator must already be gone or idle). */
void kb__rt_launch_fini(kb_machine *m);
/* The memory port PE DMA units reach: translation through the PE's MMU,
 * data through the device (kb__device_pe_xfer). self is the machine. */
void kb__rt_dma_transfer(void *self, kb__pe *pe, kb__pe_op *op, bool write,
                         const struct kb__tl_span *spans, uint32_t n, void *bytes);
/* kb__tl_mem_port.atomic on the machine: an atomic read-modify-write of the
 * spans (kb__device_pe_atomic), translated as kb__rt_dma_transfer does. */
void kb__rt_dma_atomic(void *self, kb__pe *pe, kb__pe_op *op, const struct kb__tl_span *spans,
                       uint32_t n, void *bytes, kb__mem_rmw_fn rmw, void *ctx);
/* Gives every outstanding launch to the driver (the ranks that made them
 * ended). */
void kb__rt_launch_adopt(kb_machine *m);
/* Statistics of PEs and links since the last reset (stats.c). */
void kb__rt_stats_pe(const kb_machine *m, kb_stats *out);
/* Takes the current PE and link counters as the new base. KB_ENOMEM. */
int kb__rt_stats_pe_reset(kb_machine *m);

/* An internal launch over an explicit PE list (the collective runner,
 * ccl/run.c): program i runs on PE pes[i] and sees pe_tensors[i × n_args
 * + a] for tensor argument a; args[a] gives the other arguments. It takes
 * the same path and costs as kb_launch (fan-out, start, completion). */
typedef struct kb__rt_launch_spec {
    const char *name; /* kernel name in messages (copied) */
    tl_kernel_fn fn;
    const uint32_t *pes; /* [n_pes] global PE indices, distinct */
    uint32_t n_pes;
    const struct kb__tl_arg *args; /* [n_args] */
    int n_args;
    const tl_tensor *pe_tensors; /* [n_pes × n_args], NULL: none; names must outlive the launch */
    const void *coll;   /* a collective call's kb_ccl_sched (must outlive the launch), or NULL */
    const int *streams; /* [n_streams] host ranks (-1 the driver) whose earlier launches it
                           waits for and whose later ones wait for it, besides its PEs' */
    uint32_t n_streams;
} kb__rt_launch_spec;

typedef struct kb__rt_launch_times {
    kb__time issue, start; /* host issue, programs start */
    kb__time pes_end;      /* the last program ended */
    kb__time end;          /* completion reached the host */
} kb__rt_launch_times;

/* The id of m's launch number serial: (tag << 52 | serial), a launch id
 * belongs to the machine that made it. Serials stay below 2^52 (a machine
 * would need years of launches to get there). */
static inline kb_launch_id kb__rt_launch_id(const kb_machine *m, uint64_t serial)
{
    return (kb_launch_id){(uint64_t)m->tag << KB__RT_TAG_SHIFT | serial};
}

/* Queues s (returns at once, like kb_launch). KB_EINVAL, KB_ENOMEM. */
int kb__rt_launch_on(kb_machine *m, const kb__rt_launch_spec *s, kb_launch_id *out, kb__err *err);
/* Runs until launch id completed (from the main stack or a process); its
 * status with the message in err, its times in *times (may be NULL). If
 * the simulation stopped first (deadlock), the launch stays outstanding.
 * Another machine's id is KB_EINVAL, one not outstanding KB_ENOTFOUND. */
int kb__rt_launch_wait(kb_machine *m, kb_launch_id id, kb__rt_launch_times *times, kb__err *err);

/* Shard `shard` of t as the tl_tensor a program on its PE sees (name is
 * borrowed). */
void kb__rt_shard_view(const kb__rt_tensor *t, int shard, const char *name, tl_tensor *out);

/* Records a failure of a public call on m and returns its code. */
int kb__rt_fail(kb_machine *m, const kb__err *e);

#endif
