/*
 * ccl/ccl_config.h — ccl.yaml: queue defaults and named collective algorithms.
 *
 * A ccl.yaml has two sections (docs/ccl.md has the full reference):
 *
 *   defaults:    buffer_kind, n_slots, slot_size, backpressure, vc_chunk_size,
 *                credit_size, world_size, algorithm: {COLLECTIVE: NAME, ...}
 *   algorithms:  NAME: {module, collective, topology, + any default above
 *                except `algorithm`}
 *
 * Loading checks everything that does not depend on the machine: unknown
 * keys (with a did-you-mean hint), types, slot_size a positive multiple of
 * 64, n_slots >= 1, world_size >= 1 when given, default algorithms that
 * exist and serve their collective. kb__ccl_resolve() then checks what
 * needs the machine: world size against the PE count and the topology's
 * shape, and whether the queues fit in the chosen memory. Every error reads
 *   FILE:LINE:COL: KEY.PATH: expected <what>, got '<text>' (or a sentence)
 * and names the place where the offending value was written: the algorithm's
 * own key, else the defaults' key, else "built-in ccl default".
 *
 * Overrides: "ccl.PATH=VALUE" (the "ccl." prefix names this file on the
 * command line); they overlay the file, key by key, and may add algorithms.
 *
 * Ownership: a kb__ccl_config owns its parsed tree (kept for error
 * locations), its algorithm table and every string. Immutable once loaded.
 * Cost: loading is linear in the file plus O(n log n) in its n algorithms
 * (sorted once by name); a lookup by name is O(log n).
 */
#ifndef KB_CCL_CCL_CONFIG_H
#define KB_CCL_CCL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "config/config.h"
#include "topo/params.h"

typedef enum kb__ccl_buffer {
    KB__CCL_BUF_TCM,  /* PE TCM: usable = pe.tcm.size - pe.tcm.reserved per PE */
    KB__CCL_BUF_SRAM, /* cube SRAM, shared by the ranks placed in the cube */
    KB__CCL_BUF_HBM,  /* the PE's own HBM slice */
    KB__CCL_BUF_COUNT
} kb__ccl_buffer;

typedef enum kb__ccl_backpressure {
    KB__CCL_BP_POLL,  /* sender re-checks credits every pe.ipcq.poll_interval_ns */
    KB__CCL_BP_SLEEP, /* sender sleeps until a credit arrives (pe.ipcq.wake_ns) */
    KB__CCL_BP_COUNT
} kb__ccl_backpressure;

typedef enum kb__ccl_topology {
    KB__CCL_RING_1D, /* prev/next on a ring (IPCQ ports W/E) */
    KB__CCL_MESH_2D, /* N/E/S/W on an R x C rank grid, no wrap-around */
    KB__CCL_TREE,    /* binary heap: parent (N), left (W), right (E) */
    KB__CCL_HIER,    /* groups of ranks (one per SIP): a ring inside each group (W/E)
                        and a ring between the peers of the groups (N/S) */
    KB__CCL_TOPOLOGY_COUNT
} kb__ccl_topology;

typedef enum kb__ccl_collective {
    KB__CCL_ALL_REDUCE,
    KB__CCL_REDUCE_SCATTER,
    KB__CCL_ALL_GATHER,
    KB__CCL_BROADCAST,
    KB__CCL_ALL_TO_ALL,
    KB__CCL_REDUCE,
    KB__CCL_ALL_TO_ALL_V, /* all_to_all with a matrix of counts (kb_ccl_sched.counts) */
    KB__CCL_SEND_RECV,    /* point-to-point test kernels (hello_send) */
    KB__CCL_COLLECTIVE_COUNT
} kb__ccl_collective;

/* The settings an algorithm may override; index of each in `at` arrays. */
typedef enum kb__ccl_field {
    KB__CCL_F_BUFFER_KIND,
    KB__CCL_F_N_SLOTS,
    KB__CCL_F_SLOT_SIZE,
    KB__CCL_F_BACKPRESSURE,
    KB__CCL_F_VC_CHUNK_SIZE,
    KB__CCL_F_CREDIT_SIZE,
    KB__CCL_F_WORLD_SIZE,
    KB__CCL_F_COUNT
} kb__ccl_field;

/* Names of algorithms (ccl.yaml keys under `algorithms`) and of modules
 * (kb_ccl_register): 1 to KB__CCL_NAME_MAX characters, letters, digits, '_'
 * and '-', the first a letter or '_'. Such a name is one path part of a
 * "--set ccl.algorithms.NAME..." override, one token on a command line, and
 * fits kb_ccl_report.algorithm whole. */
#define KB__CCL_NAME_MAX 63
/* The rule in words, for messages ("expected " KB__CCL_NAME_RULE); its 63
 * is KB__CCL_NAME_MAX. */
#define KB__CCL_NAME_RULE "1 to 63 letters, digits, '_' and '-', starting with a letter or '_'"

/* Slot sizes are whole multiples of this many bytes. */
#define KB__CCL_SLOT_ALIGN 64u

typedef struct kb__ccl_settings {
    kb__ccl_buffer buffer_kind;
    uint32_t n_slots;   /* >= 1 */
    uint64_t slot_size; /* bytes, a positive multiple of KB__CCL_SLOT_ALIGN */
    kb__ccl_backpressure backpressure;
    uint64_t vc_chunk_size; /* bytes; 0 = the machine's pe.ipcq.vc_chunk_bytes */
    uint64_t credit_size;   /* bytes; 0 = the machine's pe.ipcq.credit_bytes */
    uint32_t world_size;    /* ranks; 0 = every PE of the machine */
} kb__ccl_settings;

typedef struct kb__ccl_algo {
    char *name;   /* key under `algorithms` */
    char *module; /* the collective kernel that implements it */
    kb__ccl_collective collective;
    kb__ccl_topology topology;
    kb__ccl_settings s;                      /* defaults overlaid with its own keys */
    const kb__cfg_node *node;                /* its map in the tree */
    const kb__cfg_node *at[KB__CCL_F_COUNT]; /* where each setting was written; NULL: built-in */
} kb__ccl_algo;

typedef struct kb__ccl_config {
    kb__cfg *cfg; /* owned: the parsed file plus overrides */
    kb__ccl_settings defaults;
    int32_t default_algo[KB__CCL_COLLECTIVE_COUNT]; /* index into algos, -1: none */
    kb__ccl_algo *algos;                            /* [n_algos], in file order */
    size_t n_algos;
    kb__ccl_algo **sorted; /* [n_algos], the same ordered by name (lookups) */
} kb__ccl_config;

/* An algorithm made concrete for one machine and world size. */
typedef struct kb__ccl_resolved {
    const kb__ccl_algo *algo;
    kb__ccl_settings s;            /* vc_chunk_size, credit_size, world_size filled in */
    uint32_t grid_rows, grid_cols; /* mesh_2d rank grid; 1 x world_size otherwise */
    uint32_t max_neighbours;       /* receive queues per rank: ring 2, mesh 4, tree 3,
                                      hierarchical 4 */
    uint64_t queue_bytes;          /* n_slots x slot_size x max_neighbours, per rank */
    uint64_t capacity_bytes;       /* what one rank may use in the buffer kind */
} kb__ccl_resolved;

/* Names as written in the YAML ("tcm", "ring_1d", "all_reduce", ...). */
const char *kb__ccl_buffer_name(kb__ccl_buffer b);
const char *kb__ccl_backpressure_name(kb__ccl_backpressure b);
const char *kb__ccl_topology_name(kb__ccl_topology t);
const char *kb__ccl_collective_name(kb__ccl_collective c);
/* The collective or topology a name as written in the YAML stands for, or
 * -1 (also for NULL). */
int kb__ccl_collective_of(const char *name);
int kb__ccl_topology_of(const char *name);

/* 1 when name (NULL: no) follows the name rule above, else 0. The one
 * check of it: ccl.yaml and its overrides, kb_ccl_register and the
 * ccl_allreduce bench's --opt algorithm all call this. */
int kb__ccl_name_ok(const char *name);

/* The built-in `defaults` section (what an empty ccl.yaml gives). */
void kb__ccl_settings_builtin(kb__ccl_settings *s);

/* Loads file (NULL: the built-in configs/ccl.yaml embedded in the library),
 * applies sets[0..n_sets) ("ccl.PATH=VALUE") and validates. *out is NULL on
 * failure. Errors: KB_EIO, KB_ECONFIG, KB_ENOMEM. */
int kb__ccl_config_load(kb__ccl_config **out, const char *file, const char *const *sets,
                        size_t n_sets, kb__err *err);

/* Same from a buffer of len bytes; name stands for the file in messages. */
int kb__ccl_config_load_string(kb__ccl_config **out, const char *name, const char *text, size_t len,
                               const char *const *sets, size_t n_sets, kb__err *err);

/* Frees c and everything it owns; NULL is fine. */
void kb__ccl_config_destroy(kb__ccl_config *c);

/* The resolved configuration as "path=value" lines: defaults, default
 * algorithms, then every algorithm with all its settings (ccl_text.c).
 * *out: the caller frees. Errors: KB_ENOMEM. */
int kb__ccl_config_text(const kb__ccl_config *c, char **out, kb__err *err);

/* The algorithm called name; KB_ENOTFOUND with a did-you-mean hint and the
 * list of known names otherwise (*out NULL). */
int kb__ccl_config_find(const kb__ccl_config *c, const char *name, const kb__ccl_algo **out,
                        kb__err *err);

/* The default algorithm of a collective; KB_ENOTFOUND when ccl.yaml names
 * none (the message says which key to add). */
int kb__ccl_config_default(const kb__ccl_config *c, kb__ccl_collective coll,
                           const kb__ccl_algo **out, kb__err *err);

/* Makes algo concrete for machine p: world size = world_size_override when
 * non-zero, else the algorithm's, else every PE. Checks the world size (>= 1,
 * <= PEs, the topology's shape: mesh_2d needs R x C with R, C >= 2) and that
 * n_slots x slot_size x neighbours fits the buffer kind's per-rank capacity.
 * Errors are KB_ECONFIG naming where the value came from. */
int kb__ccl_resolve(const kb__ccl_algo *algo, const kb__topo_params *p,
                    uint32_t world_size_override, kb__ccl_resolved *out, kb__err *err);

/* The most square rank grid for n ranks: rows = the largest divisor of n
 * that is <= sqrt(n), cols = n / rows. */
void kb__ccl_grid_shape(uint32_t n, uint32_t *rows, uint32_t *cols);

#endif
