/*
 * kernbench/kernbench.h — the host API: machines, tensors, statistics.
 *
 * A kb_machine is one simulated accelerator (its event loop, fabric, device
 * memory and clock). Everything hangs off it: two machines in one process
 * are independent. Every call returns 0 or a negative KB_E* code
 * (kernbench/error.h); on failure outputs are zeroed and kb_last_error(m)
 * says what, where and which value. A failed call leaves the machine usable.
 *
 * Tensors are handles checked by generation: using a handle after kb_free()
 * is an error ("tensor 't3' (id 3) was freed"), never undefined behaviour.
 * Host calls that move data block until the simulated transfer completes
 * and advance the simulated clock by what the transfer cost on the fabric.
 *
 * Ownership: kb_open() creates, kb_close() destroys the machine and frees
 * every tensor still alive. Strings passed in are copied.
 * Not thread-safe: one thread per machine.
 */
#ifndef KERNBENCH_KERNBENCH_H
#define KERNBENCH_KERNBENCH_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/error.h"
#include "kernbench/tl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kb_machine kb_machine;

/* ---- machines ------------------------------------------------------------ */

/* How to build a machine. A zeroed struct means the built-in default. */
typedef struct kb_open_options {
    const char *topology_path;    /* YAML machine description; NULL = built in */
    const char *const *overrides; /* "key=value" (like --set), applied in order */
    size_t n_overrides;           /* number of entries in overrides */
    int no_data;                  /* 1: timing only (--no-data), no bytes move */
    const char *ccl_path;         /* ccl.yaml (collectives); NULL = built in. Overrides that
                                     start with "ccl." go to it instead of the topology */
    uint64_t max_memory;          /* host memory budget in bytes (tensor data, event queue,
                                     messages in flight); 0: the default, 3/4 of the host's
                                     available memory at open; KB_MAX_MEMORY_NONE: no limit */
} kb_open_options;

/* kb_open_options.max_memory: no budget. A call that would make the
 * simulation hold more than its budget fails with KB_EBUDGET and a message
 * naming what grew, by how much, the total held and the budget. */
#define KB_MAX_MEMORY_NONE UINT64_MAX

/* Opens a machine. opts may be NULL (built-in default). On failure *out is
 * NULL and, when errbuf is non-NULL, errbuf (errbuf_size bytes, always
 * NUL-terminated) holds the message: "topology.yaml:23:5: ...". */
KB_API int kb_open(kb_machine **out, const kb_open_options *opts, char *errbuf, size_t errbuf_size);

/* The host memory m's simulation holds now (tensor data, event queue,
 * messages in flight), the most it has held and its budget
 * (KB_MAX_MEMORY_NONE: none); any pointer may be NULL. 0, or KB_EINVAL
 * for a NULL m. */
KB_API int kb_memory_use(const kb_machine *m, uint64_t *used, uint64_t *peak, uint64_t *limit);

/* Frees every tensor still alive and the machine itself. NULL is a no-op.
 * Refused from inside a host rank (kb_spawn) or a kernel: the call would
 * free the stack it runs on, so it does nothing and kb_last_error says
 * KB_ESTATE ("kb_close: called from rank N; ..."). */
KB_API void kb_close(kb_machine *m);

/* The message of the last failed call on m ("" if none failed yet). The
 * string stays valid until the next call on m. */
KB_API const char *kb_last_error(const kb_machine *m);

/* Simulated time in picoseconds since the machine was opened. */
KB_API uint64_t kb_now_ps(const kb_machine *m);

/* A progress hook: now_ps the simulated clock, events the simulation events
 * run so far. It runs inside the simulation and must not call kb_ functions
 * on the machine; it may print or look at the wall clock. */
typedef void (*kb_progress_fn)(void *user, uint64_t now_ps, uint64_t events);
/* Calls fn each time the machine has run `every` more simulation events
 * (1 if 0; events come by the million in large runs, see
 * docs/PERFORMANCE.md), during any call that simulates; fn NULL turns it
 * off. The calls depend only on the simulation, never on wall time. */
KB_API int kb_set_progress(kb_machine *m, kb_progress_fn fn, void *user, uint64_t every);

/* Machine shape: SIPs, cubes per SIP, PEs per cube. Any pointer may be NULL. */
KB_API int kb_machine_shape(const kb_machine *m, int *sips, int *cubes_per_sip, int *pes_per_cube);

/* Binds the host to SIP `sip` (like torch.cuda.set_device): tensors created
 * afterwards whose policy leaves the SIP level at its default (replicate,
 * num_sips 0) are placed on that SIP only. sip = -1 removes the binding.
 * KB_ERANGE if sip is not -1 and not a SIP of the machine. */
KB_API int kb_set_device(kb_machine *m, int sip);

/* The bound SIP, or -1 when none is bound. */
KB_API int kb_get_device(const kb_machine *m);

/* ---- tensors --------------------------------------------------------------- */

/* Element types; the values equal the library's internal dtype table. */
typedef enum kb_dtype {
    KB_F16 = 0,
    KB_BF16 = 1,
    KB_F32 = 2,
    KB_I32 = 3,
    KB_I8 = 4,
    KB_BOOL = 5,
    KB_I16 = 6,
    KB_U8 = 7,
    KB_U16 = 8,
    KB_U32 = 9,
    KB_DTYPE_COUNT = 10
} kb_dtype;

/* How one level of the machine divides a tensor. */
typedef enum kb_split {
    KB_REPLICATE = 0,  /* every unit at this level holds the whole part */
    KB_ROW_WISE = 1,   /* contiguous blocks of rows (dimension 0), balanced */
    KB_COLUMN_WISE = 2 /* contiguous blocks of columns (the last dimension: 1 of a 2-D
                          tensor, 2 of a 3-D one), balanced */
} kb_split;

/* Placement over {sip, cube, pe}: each level splits or replicates what the
 * level above gave it, over num_* units (0 = all units of that level from
 * the first on). Units are taken upwards from index 0, or for cubes and PEs
 * from first_cube / first_pe: the same cubes of every SIP and PEs of every
 * cube, so host ranks that share a SIP can keep their tensors apart. A
 * split that does not divide its dimension gives balanced shards: the first
 * (extent mod units) hold one more row or column (1823 rows over 256 PEs:
 * 31 shards of 8 rows, 225 of 7); each unit must get at least one. A 1-D tensor [n] is one row
 * [1, n], as in the original tool: column_wise splits its n elements;
 * row_wise over more than one unit is an error. */
typedef struct kb_policy {
    kb_split sip, cube, pe;
    int num_sips, num_cubes, num_pes;
    int first_cube, first_pe; /* first unit used (0: from the start) */
} kb_policy;

/* The default: a full copy per SIP (the original tool's default SIP level,
 * which kb_set_device scopes to one SIP), split by columns over every cube
 * of the SIP and again over every PE of the cube — column_wise so that the
 * default works for 1-D tensors too. */
#define KB_POLICY_DEFAULT ((kb_policy){KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 0, 0, 0, 0})

/* A tensor handle; id 0 is never a valid tensor. A handle belongs to the
 * machine that made it: any other machine refuses it (KB_EINVAL). */
typedef struct kb_tensor {
    uint64_t id;
} kb_tensor;

/* Creates a tensor in device HBM without initialising it (like torch.empty).
 * name: NULL gives "t<N>"; copied. ndim 1, 2 or 3 (4 and more:
 * KB_EUNSUPPORTED), every dim >= 1. A 3-D tensor [B, R, C] is split row_wise
 * along B and column_wise along C; R is never split (docs/sharding.md).
 * policy NULL = KB_POLICY_DEFAULT.
 * Allocates physical memory per shard, one VA range, installs MMU mappings
 * through the fabric (costs simulated time). On failure *out is {0}. */
KB_API int kb_empty(kb_machine *m, const char *name, int ndim, const int64_t *shape, kb_dtype dtype,
                    const kb_policy *policy, kb_tensor *out);

/* kb_empty, then every element set to 0 by a fill write through the fabric. */
KB_API int kb_zeros(kb_machine *m, const char *name, int ndim, const int64_t *shape, kb_dtype dtype,
                    const kb_policy *policy, kb_tensor *out);

/* kb_empty, then every element set to value (converted to dtype, round to
 * nearest even; integers saturate) by a fill write through the fabric. */
KB_API int kb_full(kb_machine *m, const char *name, int ndim, const int64_t *shape, kb_dtype dtype,
                   const kb_policy *policy, double value, kb_tensor *out);

/* Scatters a row-major host array of the tensor's full shape into every
 * shard (every replica). src_dtype may differ from the tensor's dtype:
 * elements are converted (round to nearest even). nbytes must equal
 * elements × size of src_dtype (KB_EINVAL naming both otherwise). */
KB_API int kb_copy_from_host(kb_machine *m, kb_tensor t, const void *src, size_t nbytes,
                             kb_dtype src_dtype);

/* Gathers the tensor into a row-major host array of dst_dtype (the first
 * replica of each part is read). nbytes is checked as for kb_copy_from_host. */
KB_API int kb_copy_to_host(kb_machine *m, kb_tensor t, void *dst, size_t nbytes,
                           kb_dtype dst_dtype);

/* The same for rows [row0, row0 + nrows) only: src / dst is a row-major host
 * array of nrows full rows (nbytes = nrows × columns × element size), and
 * only the shards holding those rows are written (every replica) or read.
 * A 1-D tensor is one row (row0 0, nrows 1); a row of a 3-D tensor [B, R, C]
 * is one index of B (R × C elements). KB_ERANGE when nrows < 1 or the
 * rows are not inside the tensor, KB_EINVAL for a wrong nbytes. */
KB_API int kb_copy_rows_from_host(kb_machine *m, kb_tensor t, int64_t row0, int64_t nrows,
                                  const void *src, size_t nbytes, kb_dtype src_dtype);
KB_API int kb_copy_rows_to_host(kb_machine *m, kb_tensor t, int64_t row0, int64_t nrows, void *dst,
                                size_t nbytes, kb_dtype dst_dtype);

/* Removes the MMU mappings (through the fabric), returns the VA range and
 * every shard's physical memory. The handle is invalid afterwards. */
KB_API int kb_free(kb_machine *m, kb_tensor t);

/* What a tensor is. */
typedef struct kb_tensor_info {
    char name[64];    /* possibly truncated */
    int ndim;         /* 1, 2 or 3 */
    int64_t shape[3]; /* entries past ndim are 0 (3 entries since 0.3) */
    kb_dtype dtype;
    kb_policy policy;  /* as given, counts resolved (never 0) */
    int sip_scope;     /* SIP the tensor was scoped to by kb_set_device, or -1 */
    uint64_t nbytes;   /* elements × element size */
    uint64_t va;       /* start of the tensor's virtual range */
    uint64_t va_bytes; /* length of the range (page-aligned regions) */
    int n_shards;      /* every replica counts */
} kb_tensor_info;

KB_API int kb_tensor_get_info(kb_machine *m, kb_tensor t, kb_tensor_info *out);

/* One shard of a tensor. */
typedef struct kb_shard_info {
    int sip, cube, pe; /* owner PE (global SIP, cube in SIP, PE in cube) */
    int replica;       /* 0 for the first copy of this part */
    int64_t offset[3]; /* global index of the shard's first element along each dimension */
    int64_t shape[3];  /* local shape, entries past ndim 0 (3 entries of each since 0.3; a
                          3-D shard holds all of dimension 1: offset[1] 0) */
    uint64_t nbytes;   /* local elements × element size */
    uint64_t pa;       /* physical address of the shard (HBM slice of the PE) */
    uint64_t va;       /* virtual address of the shard's region */
} kb_shard_info;

/* Shard i (0 <= i < n_shards) in shard order. KB_ERANGE for a bad index. */
KB_API int kb_tensor_get_shard(kb_machine *m, kb_tensor t, int i, kb_shard_info *out);

/* Writes a printable summary (name, shape, dtype, policy, VA range, then one
 * line per shard: owner, offsets, local shape, PA, VA) into buf like
 * snprintf: at most size bytes, NUL-terminated when size > 0. *needed (may
 * be NULL) gets the full length + 1, so a second call can fit it. */
KB_API int kb_tensor_describe(kb_machine *m, kb_tensor t, char *buf, size_t size, size_t *needed);

/* Size in bytes of one element of dtype (0 for an unknown dtype). */
KB_API size_t kb_dtype_size(kb_dtype dtype);

/* "f16", "bf16", "f32", "i32", "i8", "bool"; "?" for others. */
KB_API const char *kb_dtype_name(kb_dtype dtype);

/* ---- kernel launches ------------------------------------------------------- */

/* A launch argument: a tensor (each program sees its PE's local shard), an
 * integer or a float. */
typedef enum kb_arg_kind { KB_ARG_TENSOR, KB_ARG_I64, KB_ARG_F64 } kb_arg_kind;
typedef struct kb_arg {
    kb_arg_kind kind;
    kb_tensor tensor;
    int64_t i64;
    double f64;
} kb_arg;
static inline kb_arg kb_arg_tensor(kb_tensor t)
{
    kb_arg a = {KB_ARG_TENSOR, t, 0, 0};
    return a;
}
static inline kb_arg kb_arg_i64(int64_t v)
{
    kb_arg a = {KB_ARG_I64, {0}, v, 0};
    return a;
}
static inline kb_arg kb_arg_f64(double v)
{
    kb_arg a = {KB_ARG_F64, {0}, 0, v};
    return a;
}

typedef struct kb_launch_opts {
    uint32_t grid[3]; /* programs per axis; {0,0,0} = one program per PE that owns a shard of
                         the first tensor argument */
    int sip;          /* -1: every SIP holding shards of the tensor arguments; else only that SIP */
} kb_launch_opts;

/* A launch's id; id 0 is never a launch. Like a tensor handle it belongs to
 * the machine that made it: any other machine refuses it (KB_EINVAL). */
typedef struct kb_launch_id {
    uint64_t id;
} kb_launch_id;

/* Launches kernel fn (named kernel_name in messages) over the grid: one
 * launch message per SIP (host -> PCIe -> io_cpu), one global start time
 * for every target PE, fan-out per cube to m_cpu and to each pe_cpu;
 * completions aggregate back the same way (docs/runtime.md, "Launch").
 * Program i runs on the i-th PE owning a shard of the first tensor
 * argument, round robin (i mod PEs); a tensor argument shows that PE's
 * shard. Returns at once (simulated time does not advance); the launch runs
 * when the simulation runs (kb_wait, kb_sync, or any blocking host call).
 * opts NULL = defaults ({0,0,0}, sip -1). *out (may be NULL) identifies it.
 * Errors (nothing launched): KB_EINVAL (arguments, grid), KB_ENOTFOUND (a
 * freed tensor), KB_ERANGE (sip), KB_ENOMEM. */
KB_API int kb_launch(kb_machine *m, const char *kernel_name, tl_kernel_fn fn,
                     const kb_launch_opts *opts, const kb_arg *args, int n_args, kb_launch_id *out);
/* Runs the simulation until launch id completed (its completion reached the
 * host); returns its status: 0, or the first kernel error, whose message
 * ("kernel gemm, program 5 on sip0/cube2/pe1: ...") kb_last_error gives.
 * The launch is forgotten afterwards (a second wait: KB_ENOTFOUND). An id
 * another machine made is KB_EINVAL ("kb_wait: launch id 1 was made by
 * another machine ..."), and no launch of m is touched. */
KB_API int kb_wait(kb_machine *m, kb_launch_id id);
/* Waits for every outstanding launch; returns the first error (in launch
 * order), 0 if none failed. From a host rank (kernbench/dist.h) both calls
 * concern that rank's own launches only (KB_EINVAL for another's). */
KB_API int kb_sync(kb_machine *m);

/* ---- statistics ------------------------------------------------------------ */

/* Kinds of host/device messages whose bytes are counted. */
typedef enum kb_msg_kind {
    KB_MSG_WRITE = 0, /* host -> device memory (data or fill) */
    KB_MSG_READ = 1,  /* device memory -> host */
    KB_MSG_DMA = 2,   /* PE DMA */
    KB_MSG_MMU = 3,   /* MMU map / unmap commands */
    KB_MSG_KIND_COUNT = 4
} kb_msg_kind;

/* Classes of links whose traffic is counted (the machine graph's classes).
 * These are the classes this header names; a machine may count more (a
 * later version's link kinds): kb_link_class_count says how many, and
 * kb_stats_link_bytes / kb_link_class_name take any class below it. */
typedef enum kb_link_class {
    KB_LINK_PCIE = 0,    /* host <-> pcie_ep */
    KB_LINK_IO_NOC = 1,  /* inside the IO chiplet */
    KB_LINK_IO_UCIE = 2, /* IO chiplet <-> its attach cube */
    KB_LINK_UCIE = 3,    /* cube <-> neighbouring cube in a SIP mesh */
    KB_LINK_XBAR = 4,    /* cube xbar <-> router, NOC, SRAM, m_cpu, m_dma */
    KB_LINK_HBM = 5,     /* xbar <-> HBM slice */
    KB_LINK_NOC = 6,     /* cube NOC <-> PE DMA */
    KB_LINK_TCM = 7,     /* PE DMA <-> TCM */
    KB_LINK_SIP = 8,     /* SIP <-> SIP (IO chiplets) */
    KB_LINK_CLASS_COUNT = 9
} kb_link_class;

/* PE units whose busy time is counted. */
typedef enum kb_unit {
    KB_UNIT_DMA = 0,
    KB_UNIT_GEMM = 1,
    KB_UNIT_MATH = 2,
    KB_UNIT_COUNT = 3
} kb_unit;

typedef struct kb_stats {
    uint64_t now_ps;                          /* simulated clock */
    uint64_t elapsed_ps;                      /* since the last reset */
    uint64_t messages[KB_MSG_KIND_COUNT];     /* messages sent, per kind */
    uint64_t bytes[KB_MSG_KIND_COUNT];        /* payload bytes, per kind */
    uint64_t link_bytes[KB_LINK_CLASS_COUNT]; /* bytes that crossed links of the classes
                                                 named here (every class:
                                                 kb_stats_link_bytes) */
    /* Service time of each unit summed over ops and PEs (DMA: over its
     * channels, so it may exceed elapsed time), and the largest per-PE sum. */
    uint64_t unit_busy_ps[KB_UNIT_COUNT];
    uint64_t unit_busy_max_ps[KB_UNIT_COUNT];
    uint64_t pes_used;      /* PEs that ran at least one program */
    uint64_t programs;      /* programs run */
    uint64_t launches;      /* launches completed */
    uint64_t gemm_flops;    /* 2·M·N·K per tl_dot */
    uint64_t math_elements; /* elements processed by MATH ops (first pass of each op) */
} kb_stats;

/* Counters since the machine was opened or since the last kb_stats_reset. */
KB_API int kb_stats_get(const kb_machine *m, kb_stats *out);
/* Zeroes the counters; the clock keeps running (elapsed_ps restarts). */
KB_API int kb_stats_reset(kb_machine *m);

/* Number of link classes m counts (>= KB_LINK_CLASS_COUNT; every class id
 * below it is valid), or KB_EINVAL for a NULL machine. */
KB_API int kb_link_class_count(const kb_machine *m);
/* *bytes := the bytes that crossed links of class cls since the last
 * kb_stats_reset (kb_stats.link_bytes[cls] for the classes this header
 * names). KB_EINVAL (NULL machine or bytes), KB_ERANGE for a class outside
 * 0 .. kb_link_class_count(m) - 1. */
KB_API int kb_stats_link_bytes(const kb_machine *m, int cls, uint64_t *bytes);

/* One link direction and its traffic since the last reset. */
typedef struct kb_link_info {
    char name[96]; /* "sip0.cube0.xbar -> sip0.cube0.hbm0" */
    kb_link_class cls;
    uint64_t bytes;   /* bytes of every packet served */
    uint64_t busy_ps; /* summed service time */
} kb_link_info;

/* Fills out[0..n) with the busiest link directions (by busy time, then
 * bytes, then link id) since the last reset; returns how many were filled
 * (at most n; links with no traffic are left out), or a negative code. */
KB_API int kb_busiest_links(kb_machine *m, kb_link_info *out, int n);

/* Writes what the simulation does from now on to path as a Chrome /
 * Perfetto trace (JSON object format; open it in ui.perfetto.dev or
 * chrome://tracing): each PE is a process with a track per unit (DMA, GEMM,
 * MATH: every operation as a span from its start to its end, with its
 * program and work) and one for its kernel programs; the host is a process
 * with a track for collective calls and one for launches. KB_EIO naming the
 * file if it cannot be written, KB_ESTATE if a trace is already on. */
KB_API int kb_trace_start(kb_machine *m, const char *path);

/* Counters of a trace: each link's and each memory's busy fraction per
 * bucket of simulated time, as counter tracks of a "links" and a
 * "memories" process. */
#define KB_TRACE_COUNTER_BUCKET_PS 1000000ull /* the default bucket, 1 us */
#define KB_TRACE_NO_COUNTERS       UINT64_MAX /* counter_bucket_ps: no counters */
/* A trace stops recording when its file reaches max_bytes (checked every
 * 256 records, so it may pass the limit by that much): the file ends with an
 * instant event "trace stopped: size limit reached" at that simulated time
 * and stays valid JSON; kb_trace_cut tells the caller. */
#define KB_TRACE_MAX_BYTES_DEFAULT (1ull << 30) /* 1 GiB */
#define KB_TRACE_NO_LIMIT          UINT64_MAX
typedef struct kb_trace_opts {
    uint64_t counter_bucket_ps; /* 0: KB_TRACE_COUNTER_BUCKET_PS; KB_TRACE_NO_COUNTERS: none */
    uint64_t max_bytes;         /* 0: KB_TRACE_MAX_BYTES_DEFAULT; KB_TRACE_NO_LIMIT: none */
} kb_trace_opts;
/* kb_trace_start with options (NULL: the defaults, as kb_trace_start). */
KB_API int kb_trace_start_opts(kb_machine *m, const char *path, const kb_trace_opts *opts);
/* Ends the trace and closes its file (kb_close does it too); 0 when none is
 * on, KB_EIO naming the file if a write failed. */
KB_API int kb_trace_stop(kb_machine *m);
/* 1 when the last trace of m stopped recording at its size limit (then
 * *at_ps, when at_ps is not NULL, is the simulated time it stopped at and
 * *records the records it had written), else 0. Valid until the next
 * kb_trace_start. */
KB_API int kb_trace_cut(const kb_machine *m, uint64_t *at_ps, uint64_t *records);

/* Spans of the program's own on the calling host rank's track of the
 * trace (process "ranks", one thread per rank, "rank R"; the driver's go
 * on rank 0's). kb_trace_span_begin opens a span named name (copied, up
 * to 63 bytes) at the current simulated time; kb_trace_span_end closes
 * the rank's innermost open span and writes it. Spans nest, up to
 * KB_TRACE_SPAN_DEPTH open per rank. kb_trace_span_add writes a finished
 * span [start_ps, end_ps] at once (a phase timed already). Spans are
 * written only while a trace is on (kb_trace_start); the begin / end
 * pairing is kept either way. KB_EINVAL: name NULL or empty, end_ps <
 * start_ps; KB_ESTATE: an end with no span open, a begin with
 * KB_TRACE_SPAN_DEPTH open. Cost: a copy of the name; with a trace on, one
 * line of the file per span. */
#define KB_TRACE_SPAN_DEPTH 32
KB_API int kb_trace_span_begin(kb_machine *m, const char *name);
KB_API int kb_trace_span_end(kb_machine *m);
KB_API int kb_trace_span_add(kb_machine *m, const char *name, uint64_t start_ps, uint64_t end_ps);

/* "dma", "gemm", "math"; "?" for others. */
KB_API const char *kb_unit_name(kb_unit u);

/* Name of a message kind / link class ("write", "PCIE", ...; any class
 * below kb_link_class_count); "?" else. */
KB_API const char *kb_msg_kind_name(kb_msg_kind k);
KB_API const char *kb_link_class_name(kb_link_class c);

#ifdef __cplusplus
}
#endif
#endif
