/*
 * report/report.h — the results writer: every JSON record kernbench writes
 * (topo, probe, run, sweep, kernbench-perf) is built and written here, on
 * jansson; the CSV writer (csv.h) sits beside it. docs/results.md is the
 * schema.
 *
 * A record is a JSON object that describes itself: the envelope
 * (kb__report_new) carries the schema name and version, the kernbench
 * version (and `git describe` of the checkout it was built from), the
 * command and its command line; the command adds every option with its
 * value (defaults included), the --set list, the fabric model and the
 * configuration hashes (kb__report_config), then its figures.
 *
 * Units: every number is added through kb__report_real/_uint, which
 * records the number's unit in the record's "unit_of" map under the
 * field's name ("sim_ps": "ps"), or under "MAP.KEY" for a number in a map
 * whose keys are data ("figures.collective": "us"), or under the name of
 * an array or map all of whose numbers share a unit ("done_ps": "ps").
 * A name keeps one unit throughout a record (a second, different unit
 * for it fails the record). Simulated time is in ps (integers), host wall
 * time in s, sizes in B, bandwidths in GB/s (1e9 B/s), dimensionless
 * figures have unit "1".
 *
 * Invariants: a kb__report that failed (out of memory, a unit clash)
 * stays failed and is never written. Files are written whole or not at
 * all: a run that fails before writing leaves no file behind
 * (kb__report_check_path creates nothing it does not remove).
 * Cost: a record is a small tree (kilobytes); writing serialises it once.
 */
#ifndef KB_REPORT_REPORT_H
#define KB_REPORT_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define KB__REPORT_SCHEMA         "kernbench.result"
#define KB__REPORT_SCHEMA_VERSION 1

typedef struct kb__report {
    json_t *root;    /* the record (owned) */
    json_t *unit_of; /* root's "unit_of" map (borrowed from root) */
    kb__err err;     /* err.code != 0: the record failed and is not written */
} kb__report;

/* Starts record r for `command` ("run", "probe", ...) with the envelope;
 * the command line is program (when not NULL) and argv[0..argc). On
 * failure r->err is set and later calls do nothing. */
void kb__report_init(kb__report *r, const char *command, const char *program, int argc,
                     char *const *argv);
void kb__report_fini(kb__report *r);

/* Adds value (a new reference is taken over, NULL fails the record) under
 * key of obj (NULL: the record's root), or at the end of obj when obj is
 * an array (key unused). */
void kb__report_set(kb__report *r, json_t *obj, const char *key, json_t *value);
/* A string (NULL gives null), a boolean. */
void kb__report_str(kb__report *r, json_t *obj, const char *key, const char *s);
void kb__report_bool(kb__report *r, json_t *obj, const char *key, int b);
/* A number with its unit, recorded in "unit_of" under unit_key (NULL: key).
 * A non-finite real is written as null. */
void kb__report_real(kb__report *r, json_t *obj, const char *key, const char *unit_key, double v,
                     const char *unit);
void kb__report_uint(kb__report *r, json_t *obj, const char *key, const char *unit_key, uint64_t v,
                     const char *unit);
/* Records unit for unit_key without adding a number (arrays of numbers). */
void kb__report_unit(kb__report *r, const char *unit_key, const char *unit);
/* A new empty object or array added under key of obj; NULL once failed. */
json_t *kb__report_object(kb__report *r, json_t *obj, const char *key);
json_t *kb__report_array(kb__report *r, json_t *obj, const char *key);

/* "sets" (the --set list, in order), "fabric_model" (the machine's
 * fabric.model parameter when the build has one, else "packet") and
 * "config_hash" {"machine": "fnv1a64:...", "ccl": ... or null}: hashes of
 * the resolved machine text (kb__topo_params_text) and of the resolved
 * ccl configuration (kb__ccl_config_text; ccl NULL: null). */
struct kb__topo_params;
struct kb__ccl_config;
void kb__report_config(kb__report *r, const struct kb__topo_params *p,
                       const struct kb__ccl_config *ccl, const char *const *sets, size_t n_sets);

/* The record as text: pretty (indented, one key a line) or compact (one
 * line, for JSON lines), newline-terminated. Caller frees. NULL when the
 * record failed (r->err says why) or out of memory. */
char *kb__report_text(const kb__report *r, int compact);

/* Checks before a run that path (NULL or "-": stdout) can be written,
 * without leaving a file behind. 0, or KB_EIO with the message in err. */
int kb__report_check_path(const char *path, kb__err *err);
/* Writes text to path (NULL or "-": stdout) whole; a partial file is
 * removed. 0, or KB_EIO with the message in err. */
int kb__report_write_text(const char *path, const char *text, kb__err *err);
/* kb__report_text + kb__report_write_text. */
int kb__report_write(const kb__report *r, const char *path, int compact, kb__err *err);

/* FNV-1a, 64 bits, of len bytes: "fnv1a64:%016x" into buf (>= 25 bytes). */
void kb__report_hash(const void *data, size_t len, char *buf, size_t size);

/* Checks that rec follows the documented schema (docs/results.md): the
 * envelope's fields and types, and that every number has a unit in
 * "unit_of" by the rule above. 0, or KB_EINVAL naming the field. */
int kb__report_validate(const json_t *rec, kb__err *err);

#endif
