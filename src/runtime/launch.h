/*
 * runtime/launch.h — launches (launch.c: kb_launch and the internal launch
 * over an explicit PE list), the PEs' memory port (dma_port.c) and their
 * statistics (stats.c).
 */
#ifndef KB_RUNTIME_LAUNCH_H
#define KB_RUNTIME_LAUNCH_H

#include "kernbench/tl.h"
#include "runtime/machine.h"

struct kb__tl_span;
struct kb__tl_arg;

/* ---- launch.c, dma_port.c, stats.c ----------------------------------------- */

/* Creates every PE (once); KB_ENOMEM. */
int kb__rt_pes_init(kb_machine *m, kb__err *err);
/* kb_close, first: the programs of every outstanding launch that did not
 * finish (a refusal or failure stopped the simulation under it) are freed
 * with what they hold in flight (kb__pe_launch_abandon), while the queues
 * and transfers their ops refer to still exist. The simulation must not run
 * again. */
void kb__rt_launch_abandon(kb_machine *m);
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
/* kb__tl_mem_port.resolve on the machine: the PA of [va, va + bytes)
 * through pe's MMU, KB_EFAULT when it is not one contiguous physical run
 * (or the MMU's fault naming the VA). */
int kb__rt_dma_resolve(void *self, kb__pe *pe, uint64_t va, uint64_t bytes, uint64_t *pa,
                       kb__err *err);
/* Reads (write false) or writes n bytes at [va, va + n) of PE pe's address
 * space (global index) directly in the backing store, as pe's MMU maps
 * them, in no simulated time: a calibrated ring's data (ccl/board.c).
 * Errors as kb__mmu_translate and the store give them. */
int kb__rt_va_copy(kb_machine *m, uint32_t pe, uint64_t va, void *host, uint64_t n, bool write,
                   kb__err *err);
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
/* Launches of m that started and have not finished. O(outstanding launches). */
uint32_t kb__rt_launches_running(const kb_machine *m);

#endif
