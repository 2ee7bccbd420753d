/*
 * kernbench/bench.h — benches: the interface shared by built-in benches and
 * plug-ins, their options, their results, and how to run one.
 *
 * A bench is a kb_bench descriptor: a name, a one-line summary, the options
 * it accepts, and a run function. The run function gets an open machine,
 * the parsed `--opt key=value` pairs and a result object. It creates its
 * tensors, launches kernels, copies results back, compares them with a host
 * reference and records each comparison with kb_bench_check() (PASS when
 * max error <= tolerance). It may mark the region whose simulated time and
 * counters are reported with kb_bench_measure_begin()/_end(); without marks
 * the whole run is measured.
 *
 * A plug-in is a shared object that defines one symbol,
 *
 *     KB_BENCH_PLUGIN const kb_bench kb_bench_plugin = {...};
 *
 * (name in KB_BENCH_PLUGIN_SYMBOL). `kernbench run --bench ./x.so` loads it
 * with dlopen; the kernbench executable provides every kb_ and tl_ symbol,
 * so build the plug-in with only the headers (cc -shared -fPIC). A plug-in
 * must be built against the same version of this header (the structs below
 * are shared by value): KB_BENCH_PLUGIN records KB_BENCH_ABI_VERSION in the
 * plug-in and a mismatch is refused when it is loaded.
 *
 * Ownership: options and results are plain structs owned by the caller; no
 * call allocates. Not thread-safe (one thread per machine).
 */
#ifndef KERNBENCH_BENCH_H
#define KERNBENCH_BENCH_H

#include <stdint.h>

#include "kernbench/kernbench.h"
#include "kernbench/tl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The plug-in ABI: the layout of kb_bench and of the structs a bench
 * shares with kernbench by value (kb_bench_opts, kb_bench_result,
 * kb_stats). Raised whenever one of them changes; `kernbench run` refuses
 * a plug-in built against another version, naming both. */
#define KB_BENCH_ABI_VERSION 3
#define KB_BENCH_ABI_SYMBOL  "kb_bench_plugin_abi"

/* Marks the descriptor a plug-in exports (visible from the shared object),
 * and exports beside it the ABI version the plug-in is built against. */
#define KB_BENCH_PLUGIN                                                                            \
    __attribute__((visibility("default"))) const unsigned kb_bench_plugin_abi =                   \
        KB_BENCH_ABI_VERSION;                                                                      \
    __attribute__((visibility("default")))
#define KB_BENCH_PLUGIN_SYMBOL "kb_bench_plugin"

#define KB_BENCH_MAX_OPTS    32
#define KB_BENCH_MAX_CHECKS  32
#define KB_BENCH_MAX_FIGURES 64
#define KB_BENCH_MAX_NOTES   8
#define KB_BENCH_NOTE_MAX    1024
#define KB_BENCH_KEY_MAX     32
#define KB_BENCH_VALUE_MAX   128
#define KB_BENCH_NAME_MAX    64
#define KB_BENCH_MSG_MAX     1024
#define KB_BENCH_MAX_LINKS   8

/* ---- options (--opt key=value) ------------------------------------------- */

typedef struct kb_bench_opts {
    int n;
    struct {
        char key[KB_BENCH_KEY_MAX];
        char value[KB_BENCH_VALUE_MAX];
    } kv[KB_BENCH_MAX_OPTS];
    char error[KB_BENCH_MSG_MAX]; /* set by a getter that rejects a value */
} kb_bench_opts;

/* Empties o. */
KB_API void kb_bench_opts_init(kb_bench_opts *o);

/* Adds "key=value" (a later value for the same key replaces the earlier).
 * KB_EINVAL (message in o->error) without '=', with an empty key, a key or
 * value too long, or more than KB_BENCH_MAX_OPTS keys. */
KB_API int kb_bench_opts_add(kb_bench_opts *o, const char *key_eq_value);

/* Typed getters: *out gets the value given for key, or def when the key
 * was not given. An integer is decimal (010 is ten, never octal), 0x
 * hex, or a size with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB:
 * "4MiB"). A value that does not
 * parse, or an integer outside [lo, hi], gives KB_EINVAL with o->error
 * naming key, value and the accepted range; *out is then def. */
KB_API int kb_bench_opt_i64(kb_bench_opts *o, const char *key, int64_t def, int64_t lo, int64_t hi,
                            int64_t *out);
KB_API int kb_bench_opt_f64(kb_bench_opts *o, const char *key, double def, double *out);
/* "1", "true", "yes", "on" / "0", "false", "no", "off". */
KB_API int kb_bench_opt_bool(kb_bench_opts *o, const char *key, int def, int *out);
/* The raw text (borrowed from o), or def. Never fails. */
KB_API const char *kb_bench_opt_str(const kb_bench_opts *o, const char *key, const char *def);

/* ---- results ------------------------------------------------------------- */

typedef struct kb_bench_check_rec {
    char name[KB_BENCH_NAME_MAX];
    double max_err; /* largest |device - reference| seen (NaN counts as failing) */
    double tol;     /* PASS when max_err <= tol */
    int pass;
} kb_bench_check_rec;

typedef struct kb_bench_figure_rec {
    char name[KB_BENCH_NAME_MAX];
    double value;
    char unit[16];
} kb_bench_figure_rec;

typedef struct kb_bench_note_rec {
    char name[KB_BENCH_NAME_MAX];
    char text[KB_BENCH_NOTE_MAX];
} kb_bench_note_rec;

typedef struct kb_bench_result {
    kb_machine *m; /* the machine the bench runs on (set by kb_bench_run) */
    int no_data;   /* timing only: checks are skipped (see kb_bench_run) */
    int n_checks;  /* checks recorded (may exceed the array) */
    int any_fail;  /* some check failed */
    kb_bench_check_rec checks[KB_BENCH_MAX_CHECKS];
    int n_figures;
    kb_bench_figure_rec figures[KB_BENCH_MAX_FIGURES];
    int measuring, measured;   /* inside / after a measured region */
    uint64_t begin_ps, end_ps; /* simulated clock at the region's ends */
    kb_stats stats;            /* counters over the region */
    int n_links;               /* busiest link directions over the region */
    kb_link_info links[KB_BENCH_MAX_LINKS];
    int usage_error; /* the failure was a bad option */
    char error[KB_BENCH_MSG_MAX];
    double measured_wall_s; /* host wall-clock seconds the measured region took (not in the
                               report, which stays the same run to run) */
    int n_notes;
    kb_bench_note_rec notes[KB_BENCH_MAX_NOTES];
} kb_bench_result;

/* Records a check; returns 1 for PASS, 0 for FAIL (max_err > tol or NaN).
 * Beyond KB_BENCH_MAX_CHECKS the check still decides the return value and
 * the overall outcome but is not listed. */
KB_API int kb_bench_check(kb_bench_result *r, const char *name, double max_err, double tol);

/* Records an extra figure the report shows (e.g. "tiles", 64, ""). */
KB_API void kb_bench_figure(kb_bench_result *r, const char *name, double value, const char *unit);
/* Records a line of text the report shows after the figures (e.g.
 * "bottleneck", "the link sip0.cube0.xbar -> sip0.cube0.noc"); printf
 * format, cut at KB_BENCH_NOTE_MAX - 1 bytes; beyond KB_BENCH_MAX_NOTES
 * notes are dropped. */
KB_API void kb_bench_note(kb_bench_result *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Starts the measured region: resets the machine's statistics and notes
 * the simulated and the host clock. Call after the inputs are on the
 * device. */
KB_API void kb_bench_measure_begin(kb_bench_result *r);
/* Ends it: snapshots the statistics (r->stats), the busiest links
 * (r->links), the clock and the wall time taken (r->measured_wall_s). */
KB_API void kb_bench_measure_end(kb_bench_result *r);

/* Stores a message for the runner to print; returns code. */
KB_API int kb_bench_fail(kb_bench_result *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for an option value the bench cannot use (a size that does not
 * divide, a world with no placement, a name it does not know): sets
 * r->usage_error, so `kernbench run` exits 2; returns KB_EINVAL. Name the
 * option as typed in the message ("--opt block=3: ..."). */
KB_API int kb_bench_bad_option(kb_bench_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* 1 when the run succeeded and every check passed (with at least one
 * check, except under no_data). */
KB_API int kb_bench_passed(const kb_bench_result *r);

/* Simulated time of the measured region, in picoseconds. */
KB_API uint64_t kb_bench_sim_ps(const kb_bench_result *r);

/* ---- benches --------------------------------------------------------------- */

typedef struct kb_bench_opt_doc {
    const char *key;
    const char *def;  /* default, as text */
    const char *help; /* one line */
} kb_bench_opt_doc;

typedef struct kb_bench {
    const char *name;
    const char *summary;
    const kb_bench_opt_doc *opts; /* the options run() reads; may be NULL */
    int n_opts;
    /* Returns 0, or a negative KB_E* code with a message in r->error
     * (kb_bench_fail), in o->error (a getter) or on the machine
     * (kb_last_error). A FAIL check is not an error. */
    int (*run)(kb_machine *m, kb_bench_opts *o, kb_bench_result *r);
} kb_bench;

/* The built-in benches: count, i-th (NULL out of range), by name (NULL if
 * none). The default bench of a bare `kernbench run` is kb_bench_default(). */
KB_API int kb_bench_count(void);
KB_API const kb_bench *kb_bench_at(int i);
KB_API const kb_bench *kb_bench_find(const char *name);
KB_API const kb_bench *kb_bench_default(void);

/* Checks a descriptor (a plug-in's, say) before anything reads it: name
 * set, 1..KB_BENCH_NAME_MAX-1 printable characters; run set; n_opts in
 * [0, KB_BENCH_MAX_OPTS]; opts set when n_opts > 0; each option's key
 * 1..KB_BENCH_KEY_MAX-1 printable characters without '=' or spaces, keys
 * distinct, def and help set (summary may be NULL). Returns 0, or KB_EINVAL
 * with the first problem in msg (msg_size bytes; msg may be NULL). */
KB_API int kb_bench_validate(const kb_bench *b, char *msg, size_t msg_size);

/* Runs b on m. Checks the descriptor (kb_bench_validate) and the option keys against b->opts first
 * (an unknown key is KB_EINVAL with r->usage_error set and a message listing the known keys).
 * no_data: pass 1 when m was opened with no_data (timing only): the bench runs the same simulated
 * steps (so simulated time is the same) but does not compute references; checks are not recorded. r
 * is initialised here. On failure r->error holds the message. Returns 0 when the run completed
 * (checks may still FAIL: see kb_bench_passed). */
KB_API int kb_bench_run(kb_machine *m, const kb_bench *b, kb_bench_opts *o, int no_data,
                        kb_bench_result *r);

#ifdef __cplusplus
}
#endif
#endif
