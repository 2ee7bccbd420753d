/*
 * runtime/port.h — the host's messages to the device (port.c: MemoryWrite,
 * MemoryRead, MmuMap / MmuUnmap, sent through host/device.h) and the host
 * scratch a copy uses (copy.c).
 */
#ifndef KB_RUNTIME_PORT_H
#define KB_RUNTIME_PORT_H

#include "mem/store.h"
#include "runtime/machine.h"

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

/* ---- copy.c ----------------------------------------------------------------- */

/* A segment list of at least n entries for the calling host rank (or the
 * driver), owned by m (KB_ENOMEM). */
int kb__rt_segs(kb_machine *m, size_t n, kb__rt_seg **out, kb__err *err);
/* A staging buffer of at least n bytes for the calling host rank (or the
 * driver), owned by m (KB_ENOMEM). */
int kb__rt_stage(kb_machine *m, size_t n, uint8_t **out, kb__err *err);

#endif
