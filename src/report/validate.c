/*
 * validate.c — checks a record against the documented schema
 * (docs/results.md): the envelope every record carries, and the unit rule:
 * a number under key K in a map or array named P has its unit in
 * "unit_of" under K, "P.K" or P.
 *
 * Used by the schema tests on the output of every command, and by sweep
 * --resume on the records it reads back.
 * Cost: one walk of the record.
 */
#include <string.h>

#include "report/report.h"

static int bad(kb__err *err, const char *field, const char *what)
{
    return kb__err_set(err, KB_EINVAL, "record: %s: %s", field, what);
}

static int want(const json_t *rec, const char *key, json_type type, int nullable, kb__err *err)
{
    const json_t *v = json_object_get(rec, key);
    if (!v) return bad(err, key, "missing");
    if (json_typeof(v) == type || (nullable && json_is_null(v))) return 0;
    return bad(err, key, "has the wrong type");
}

static int strings(const json_t *a, const char *key, kb__err *err)
{
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) if (!json_is_string(v)) return bad(
        err, key, "holds a value that is not a string");
    return 0;
}

static int envelope(const json_t *rec, kb__err *err)
{
    if (!json_is_object(rec)) return bad(err, "(top)", "not an object");
    if (want(rec, "schema", JSON_STRING, 0, err)) return err->code;
    if (strcmp(json_string_value(json_object_get(rec, "schema")), KB__REPORT_SCHEMA))
        return bad(err, "schema", "not " KB__REPORT_SCHEMA);
    json_t *ver = json_object_get(rec, "schema_version");
    if (!json_is_integer(ver) || json_integer_value(ver) < 1 ||
        json_integer_value(ver) > KB__REPORT_SCHEMA_VERSION)
        return bad(err, "schema_version", "not a version this build reads");
    const json_t *kb = json_object_get(rec, "kernbench");
    if (!json_is_object(kb)) return bad(err, "kernbench", "missing or not an object");
    if (want(kb, "version", JSON_STRING, 0, err) || want(kb, "git", JSON_STRING, 1, err))
        return kb__err_prefix(err, "kernbench.");
    if (want(rec, "command", JSON_STRING, 0, err) ||
        want(rec, "command_line", JSON_ARRAY, 0, err) ||
        strings(json_object_get(rec, "command_line"), "command_line", err) ||
        want(rec, "unit_of", JSON_OBJECT, 0, err))
        return err->code;
    /* a sweep point that failed before its command began a record: the
     * envelope above, its point and its error */
    if (json_is_string(json_object_get(rec, "error")) && !json_object_get(rec, "options")) return 0;
    if (want(rec, "options", JSON_OBJECT, 0, err) || want(rec, "sets", JSON_ARRAY, 0, err) ||
        strings(json_object_get(rec, "sets"), "sets", err) ||
        want(rec, "fabric_model", JSON_STRING, 0, err) ||
        want(rec, "config_hash", JSON_OBJECT, 0, err))
        return err->code;
    const json_t *h = json_object_get(rec, "config_hash");
    if (want(h, "machine", JSON_STRING, 1, err) || want(h, "ccl", JSON_STRING, 1, err))
        return kb__err_prefix(err, "config_hash.");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)json_object_get(rec, "unit_of"), key,
                        v) if (!json_is_string(v)) return bad(err, "unit_of",
                                                              "holds a unit that is not a string");
    return 0;
}

static int has_unit(const json_t *units, const char *key, const char *parent)
{
    if (json_object_get(units, key)) return 1;
    if (!parent) return 0;
    char both[256];
    snprintf(both, sizeof both, "%s.%s", parent, key);
    return json_object_get(units, both) || json_object_get(units, parent);
}

/* v sits under key in the map or array named parent (NULL at the top). */
static int walk(const json_t *units, const json_t *v, const char *key, const char *parent,
                kb__err *err)
{
    size_t i;
    const char *k;
    const json_t *kid;
    switch (json_typeof(v)) {
    case JSON_INTEGER:
    case JSON_REAL:
        if (has_unit(units, key, parent)) return 0;
        return kb__err_set(err, KB_EINVAL, "record: number %s%s%s has no unit in unit_of",
                           parent ? parent : "", parent ? "." : "", key);
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, k,
                            kid) if (walk(units, kid, k, key, err)) return err->code;
        return 0;
    case JSON_ARRAY:
        json_array_foreach(v, i, kid) if (walk(units, kid, key, parent, err)) return err->code;
        return 0;
    default:
        return 0;
    }
}

int kb__report_validate(const json_t *rec, kb__err *err)
{
    if (envelope(rec, err)) return err->code;
    const json_t *units = json_object_get(rec, "unit_of");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)rec, k, v)
    {
        if (!strcmp(k, "schema_version") || !strcmp(k, "unit_of") || !strcmp(k, "options"))
            continue;
        if (walk(units, v, k, NULL, err)) return err->code;
    }
    return 0;
}
