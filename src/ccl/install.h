/*
 * ccl/install.h — installing a collective's plan on the machine: the
 * inter-PE queues of every rank, set up through the fabric.
 *
 * kb__ccl_install first places every used port's receive ring (n_slots x
 * slot_size bytes in the plan's buffer kind) and builds the pe_ipcq set
 * (pe/ipcq.h) with a transport on the simulated device: ring and tile data
 * move as memory reads, fabric messages and memory writes
 * (docs/timing-model.md), credits as fabric messages between the PEs' DMA
 * nodes. Placing takes no simulated time, so an install whose rings do not
 * fit fails before it costs any. It then pushes each rank's install
 * message (kb__ccl_install_encode, kb__ccl_install_bytes bytes) host ->
 * io_cpu -> m_cpu of the rank's cube -> the rank's PE, as one
 * kb__device_command to every cube holding ranks: the command carries the
 * largest cube's share (the sum of its ranks' messages), and each m_cpu
 * works for the time its cube NOC link takes to carry each of its ranks'
 * messages to their PEs (sum over those ranks of ceil(bytes / B_noc)).
 *
 * Ring placement: the caller's allocator, or by default the top of the
 * memory: TCM from pe.tcm.size downwards (it must stay above the
 * scheduler reserve; kernels' tiles must leave that range free), cube SRAM
 * from its top downwards, shared by the cube's ranks, the PE's HBM slice
 * from its top downwards.
 *
 * Ownership: the caller owns the returned set (kb__ipcq_destroy) and must
 * keep the device alive while it is used. Call from the main stack (it runs
 * the event loop until the install completes).
 */
#ifndef KB_CCL_INSTALL_H
#define KB_CCL_INSTALL_H

#include <stdint.h>

#include "base/error.h"
#include "ccl/plan.h"
#include "host/device.h"
#include "pe/ipcq.h"
#include "pe/pe.h"

/* Where rings go: alloc returns the PA of `bytes` for rank's ring number
 * `ring` (0.. per rank) in memory kind. */
typedef struct kb__ccl_ring_alloc {
    int (*alloc)(void *self, kb__ccl_buffer kind, uint32_t rank, kb__ccl_loc loc, uint32_t ring,
                 uint64_t bytes, uint64_t *pa, kb__err *err);
    void *self;
} kb__ccl_ring_alloc;

typedef struct kb__ccl_install_info {
    kb__time t_start, t_end; /* simulated time of the install */
    uint64_t msg_bytes;      /* sum of the install messages */
    uint64_t cmd_bytes;      /* size of the command each m_cpu received */
    uint32_t cubes;          /* cubes targeted */
} kb__ccl_install_info;

/* Installs plan on device d: pes[r] is rank r's PE (NULL entries: no PE
 * attached, the queues still work for unit tests); alloc NULL: default
 * placement. *out is the queue set; info (may be NULL) the install's cost.
 * Errors: KB_EINVAL (a plan that does not fit the device, a slot too small
 * for the descriptor), KB_ERANGE (a ring outside its memory), KB_ENOMEM, or
 * the command's error. */
int kb__ccl_install(kb__device *d, const kb__ccl_plan *plan, kb__pe *const *pes,
                    const kb__ccl_ring_alloc *alloc, kb__ipcq_set **out, kb__ccl_install_info *info,
                    kb__err *err);

/* kb__ccl_install in two steps, so that one command can push the plans of
 * several installs: _place places the rings and builds the set (no
 * simulated time; the errors of kb__ccl_install but the command's);
 * _push sends the install messages of plans[0..n) as one command to every
 * cube holding a rank of any of them (each cube's share: the sum of its
 * ranks' messages), waits for it and fills info (zeroed; n 0: no command). */
int kb__ccl_install_place(kb__device *d, const kb__ccl_plan *plan, kb__pe *const *pes,
                          const kb__ccl_ring_alloc *alloc, kb__ipcq_set **out, kb__err *err);
int kb__ccl_install_push(kb__device *d, const kb__ccl_plan *const *plans, size_t n,
                         kb__ccl_install_info *info, kb__err *err);

/* The pe_ipcq configuration of plan on d's machine (exposed for tests). */
void kb__ccl_ipcq_cfg(const kb__device *d, const kb__ccl_plan *plan, kb__ipcq_cfg *cfg);

#endif
