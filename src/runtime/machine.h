/*
 * runtime/machine.h — the machine behind kb_machine.
 *
 * A machine owns: its parameters, the device memory allocators (per PE: HBM
 * slice and TCM above the scheduler reserve; per cube: SRAM; one VA space),
 * the pe_mmu tables, the simulated device (simulator, fabric, memory
 * controllers, backing store; its clock is the machine's clock), the tensor
 * table and statistics.
 * Nothing is global: two machines share nothing but the registry of the
 * tags open machines hold (machine.c).
 *
 * Launch ids are (tag << 52 | serial) the same way: serial (52 bits, from
 * 1) is the launch's number on its machine, tag the machine's, so a launch
 * id used with another machine is refused (KB_EINVAL) before any launch is
 * looked at (launch.c).
 *
 *
 * The runtime's other headers hold what only some files need: tensor.h
 * (the tensor table), memory.h (device memory allocators), port.h (the
 * host's messages to the device, host scratch), launch.h (launches, PE
 * statistics), trace.h, ranks.h (host ranks and the layers' slots).
 */
#ifndef KB_RUNTIME_MACHINE_H
#define KB_RUNTIME_MACHINE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "kernbench/kernbench.h"
#include "mem/addr.h"
#include "host/device.h"
#include "mem/alloc.h"
#include "pe/mmu.h"
#include "pe/pe.h"
#include "runtime/ranks.h"
#include "sim/sim.h"
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

typedef struct kb__rt_stats {
    uint64_t reset_ps;
    uint64_t messages[KB_MSG_KIND_COUNT], bytes[KB_MSG_KIND_COUNT];
    uint64_t link_base[KB__LINK_CLASS_COUNT]; /* fabric bytes per class at reset (every
                                                 class, also those kb_stats has no
                                                 field for) */
    uint64_t launches;                        /* completed since reset */
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
typedef struct kb__rt_slot kb__rt_slot;
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
    kb__pe_params pe_params;        /* from the topology, checked at kb_open */
    kb__pe **pe_units;              /* [n_pes], NULL until the first launch */
    kb__rt_pe_base *pe_base;        /* [n_pes] statistics at the last reset */
    kb__rt_link_base *link_base;    /* [links] statistics at the last reset */
    const kb__kind_registry *kinds; /* kb__rt_open_kinds: the caller's, or NULL */
    kb__rt_launch *launches;        /* outstanding or not yet waited, in launch order */
    uint32_t *pe_mark;              /* [n_pes] scratch of try_start (launch.c) */
    uint32_t pe_stamp;              /* its current mark */
    uint64_t next_launch_id;        /* serial of the next launch, from 1 (kb__rt_launch_id) */
    kb__rt_group_ext layers[KB__RT_EXT_MAX]; /* layers' machine state (ranks.h): ccl's */
    struct kb__rt_trace *trace;              /* kb_trace_start's file, or NULL (trace.c) */
    struct kb__rt_rank_spans *rank_spans;    /* [n_rank_spans] open spans per rank (trace.c) */
    uint32_t n_rank_spans;
    int trace_cut;                            /* the last trace stopped at its size limit */
    uint64_t trace_cut_ps, trace_cut_records; /* when, and how many records it kept */
    void (*measure_fn)(void *user, kb_machine *m, int end); /* observe.c, or NULL */
    void *measure_user;
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
/* kb__rt_open with the kinds of registry kinds (NULL: the built-in table),
 * which the machine's description may name (kb__topo_params_load_kinds);
 * the caller keeps kinds alive until kb_close. */
int kb__rt_open_kinds(kb_machine **out, const kb_open_options *opts, const kb__rt_opener *up,
                      const kb__kind_registry *kinds, char *errbuf, size_t errbuf_size);

/* Takes a tag no open machine holds, in 1..KB__RT_MAX_TAGS - 1, going round
 * them in order (a closed machine's tag comes back only after the others
 * were handed out); KB_ENOMEM when every tag is held. Thread safe. */
int kb__rt_tag_take(uint32_t *out, kb__err *err);
/* Gives a tag back (0: nothing). */
void kb__rt_tag_release(uint32_t tag);

/* Global PE index of an owner. */
static inline uint32_t kb__rt_pe_index(const kb_machine *m, int sip, int cube, int pe)
{
    return ((uint32_t)sip * m->cubes + (uint32_t)cube) * m->pes + (uint32_t)pe;
}
/* ---- ranks.c (runtime/ranks.h has the rest), copy.c ------------------------- */

/* The calling host rank's scratch buffers (the driver's from the main stack). */
kb__rt_scratch *kb__rt_scratch_of(kb_machine *m);
/* Frees the machine's layer slots, the last taken first (kb_close). */
void kb__rt_layers_fini(kb_machine *m);

void kb__rt_scratch_fini(kb__rt_scratch *s);

/* Records a failure of a public call on m and returns its code. */
int kb__rt_fail(kb_machine *m, const kb__err *e);

#endif
