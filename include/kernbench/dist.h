/*
 * kernbench/dist.h — host ranks and collectives (torch.distributed names).
 *
 * Two kinds of rank: a *host rank* is a worker kb_spawn runs, like one
 * process per device (rank = SIP by default); a *collective rank* is a PE
 * that runs a collective kernel. A collective call works on the shards of
 * its tensors: every shard is one collective rank's buffer (docs/ccl.md).
 * From one driver, kb_all_reduce(m, t, op) reduces over all of t's shards;
 * from spawned ranks, every rank passes its own tensor and the collective
 * covers the shards of all of them. Results are bitwise identical in every
 * buffer.
 *
 * Every call returns 0 or a negative KB_E* code, message in kb_last_error.
 */
#ifndef KERNBENCH_DIST_H
#define KERNBENCH_DIST_H

#include "kernbench/kernbench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kb_reduce_op { KB_SUM = 0, KB_MAX = 1, KB_MIN = 2, KB_AVG = 3 } kb_reduce_op;

/* Reloads the machine's collective configuration: ccl_path (NULL = the
 * built-in configs/ccl.yaml) with sets[0..n_sets) applied ("ccl.PATH=VALUE",
 * as --set). The queues installed for the previous configuration are freed;
 * the next collective installs its own. On failure (KB_EIO, KB_ECONFIG
 * naming FILE:LINE:COL or the --set argument, KB_ENOMEM) the previous
 * configuration stays in force. */
KB_API int kb_ccl_configure(kb_machine *m, const char *ccl_path, const char *const *sets,
                            size_t n_sets);

#ifdef __cplusplus
}
#endif

#endif
