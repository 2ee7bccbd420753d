/*
 * test_report.c — the results writer: records carry their envelope and a
 * unit for every number, a failed record is never written, files are
 * written whole or not at all, and every command's --json output validates
 * against the documented schema (docs/results.md).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccl/ccl_config.h"
#include "report/report.h"
#include "topo/params.h"

static char *argv0[] = {"run", "--json", NULL};

static void minimal(kb__report *r)
{
    kb__report_init(r, "run", "kernbench", 2, argv0);
    kb__report_object(r, NULL, "options");
    kb__report_config(r, NULL, NULL, NULL, 0);
}

Test(report, a_built_record_validates)
{
    kb__report r;
    minimal(&r);
    json_t *o = kb__report_object(&r, NULL, "cases");
    kb__report_uint(&r, o, "latency_ps", NULL, 1234, "ps");
    kb__report_real(&r, o, "eff_gbs", NULL, 12.5, "GB/s");
    kb__err err = {0};
    cr_assert_eq(r.err.code, 0, "%s", r.err.msg);
    cr_assert_eq(kb__report_validate(r.root, &err), 0, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(r.unit_of, "latency_ps")), "ps");
    json_t *line = json_object_get(r.root, "command_line");
    cr_assert_str_eq(json_string_value(json_array_get(line, 0)), "kernbench");
    cr_assert_str_eq(json_string_value(json_array_get(line, 2)), "--json");
    kb__report_fini(&r);
}

Test(report, a_number_without_a_unit_is_refused)
{
    kb__report r;
    minimal(&r);
    kb__report_set(&r, NULL, "sim_time", json_integer(5));
    kb__err err = {0};
    cr_assert_eq(kb__report_validate(r.root, &err), KB_EINVAL);
    cr_assert_not_null(strstr(err.msg, "sim_time"), "%s", err.msg);
    kb__report_fini(&r);
}

Test(report, a_missing_envelope_field_is_named)
{
    kb__report r;
    minimal(&r);
    json_object_del(r.root, "config_hash");
    kb__err err = {0};
    cr_assert_eq(kb__report_validate(r.root, &err), KB_EINVAL);
    cr_assert_not_null(strstr(err.msg, "config_hash"), "%s", err.msg);
    kb__report_fini(&r);
}

Test(report, one_name_with_two_units_fails_the_record)
{
    kb__report r;
    minimal(&r);
    kb__report_uint(&r, NULL, "t", NULL, 1, "ps");
    kb__report_real(&r, NULL, "t2", "t", 1.0, "us");
    cr_assert_eq(r.err.code, KB_EINVAL);
    cr_assert_null(kb__report_text(&r, 0));
    kb__err err = {0};
    char path[] = "/tmp/kb_report_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    cr_assert_neq(kb__report_write(&r, path, 0, &err), 0);
    cr_assert_neq(access(path, F_OK), 0, "a failed record left a file");
    kb__report_fini(&r);
}

Test(report, checking_a_path_leaves_no_file)
{
    char path[] = "/tmp/kb_report_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    kb__err err = {0};
    cr_assert_eq(kb__report_check_path(path, &err), 0, "%s", err.msg);
    cr_assert_neq(access(path, F_OK), 0);
    cr_assert_eq(kb__report_check_path("/no/such/dir/x.json", &err), KB_EIO);
    cr_assert_not_null(strstr(err.msg, "/no/such/dir/x.json: cannot write"));
}

Test(report, non_utf8_text_is_kept_valid)
{
    kb__report r;
    minimal(&r);
    kb__report_str(&r, NULL, "path", "a\xff\xc3\xa9");
    cr_assert_str_eq(json_string_value(json_object_get(r.root, "path")), "a\xef\xbf\xbd\xc3\xa9");
    kb__report_fini(&r);
}

/* The hash is over the resolved values: the built-in machine and the
 * shipped file that spells it out hash alike; one --set changes it. */
Test(report, machine_hash_follows_the_resolved_values)
{
    kb__topo_params a, b, c;
    kb__err err = {0};
    kb__topo_params_default(&a);
    cr_assert_eq(kb__topo_params_load(&b, KB_SOURCE_DIR "/configs/topology.yaml", NULL, 0, &err), 0,
                 "%s", err.msg);
    const char *set[] = {"pe.dma.channels=3"};
    cr_assert_eq(kb__topo_params_load(&c, NULL, set, 1, &err), 0, "%s", err.msg);
    char *ta, *tb, *tc;
    cr_assert_eq(kb__topo_params_text(&a, &ta, &err), 0);
    cr_assert_eq(kb__topo_params_text(&b, &tb, &err), 0);
    cr_assert_eq(kb__topo_params_text(&c, &tc, &err), 0);
    char ha[32], hb[32], hc[32];
    kb__report_hash(ta, strlen(ta), ha, sizeof ha);
    kb__report_hash(tb, strlen(tb), hb, sizeof hb);
    kb__report_hash(tc, strlen(tc), hc, sizeof hc);
    cr_assert_str_eq(ha, hb);
    cr_assert_str_neq(ha, hc);
    cr_assert_not_null(strstr(tc, "pe.dma.channels=3\n"));
    free(ta), free(tb), free(tc);
}

/* Every line of the text is a --set: applied to the built-in machine they
 * give back the same text (values round-trip bit for bit). */
Test(report, machine_text_loads_back_to_itself)
{
    kb__topo_params p, q;
    kb__err err = {0};
    const char *set[] = {"pe.gemm.clock_ghz=1.1", "sip.ucie.bw_gbs=333.3"};
    cr_assert_eq(kb__topo_params_load(&p, NULL, set, 2, &err), 0, "%s", err.msg);
    char *t, *u;
    cr_assert_eq(kb__topo_params_text(&p, &t, &err), 0);
    const char *lines[512];
    size_t n = 0;
    char *copy = strdup(t);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l && n < 512;
         l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    cr_assert_eq(kb__topo_params_load(&q, NULL, lines, n, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__topo_params_text(&q, &u, &err), 0);
    cr_assert_str_eq(t, u);
    free(t), free(u), free(copy);
}

Test(report, ccl_hash_follows_the_resolved_values)
{
    kb__ccl_config *a, *b;
    kb__err err = {0};
    cr_assert_eq(kb__ccl_config_load(&a, NULL, NULL, 0, &err), 0, "%s", err.msg);
    const char *set[] = {"ccl.defaults.n_slots=16"};
    cr_assert_eq(kb__ccl_config_load(&b, NULL, set, 1, &err), 0, "%s", err.msg);
    char *ta, *tb;
    cr_assert_eq(kb__ccl_config_text(a, &ta, &err), 0);
    cr_assert_eq(kb__ccl_config_text(b, &tb, &err), 0);
    cr_assert_str_neq(ta, tb);
    cr_assert_not_null(strstr(tb, "defaults.n_slots=16\n"));
    free(ta), free(tb);
    kb__ccl_config_destroy(a);
    kb__ccl_config_destroy(b);
}

/* ---- every command's output against the schema ---------------------------- */

static json_t *command_json(const char *cmd, int *status)
{
    char line[1024];
    snprintf(line, sizeof line, "OPENBLAS_NUM_THREADS=1 %s 2>/dev/null", cmd);
    FILE *p = popen(line, "r");
    cr_assert_not_null(p);
    json_error_t je;
    json_t *j = json_loadf(p, 0, &je);
    *status = pclose(p);
    cr_assert_not_null(j, "%s: not JSON: %s (line %d)", cmd, je.text, je.line);
    return j;
}

static void validates(const char *cmd, const char *command)
{
    int status;
    json_t *j = command_json(cmd, &status);
    kb__err err = {0};
    cr_assert_eq(kb__report_validate(j, &err), 0, "%s: %s", cmd, err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(j, "command")), command);
    json_decref(j);
}

#define KB KB_BINARY_DIR "/kernbench"

Test(report, topo_json_validates)
{
    validates(KB " topo --json", "topo");
}
Test(report, list_json_validates)
{
    validates(KB " list --json", "list");
}
Test(report, probe_json_validates)
{
    validates(KB " probe --case pe-remote-cube-hbm --route --sweep --contend 2 --json", "probe");
}
Test(report, run_json_validates)
{
    validates(KB " run --bench ccl_allreduce --opt world=4 --opt bytes=16KiB --json", "run");
}
Test(report, perf_json_validates)
{
    validates(KB_BINARY_DIR "/kernbench-perf --only switch,qkv_gemm --json", "perf");
}

Test(report, run_record_lists_every_option_with_defaults)
{
    int status;
    json_t *j = command_json(KB " run --bench ccl_allreduce --opt world=4 --opt bytes=16KiB "
                                "--set ccl.defaults.n_slots=8 --json",
                             &status);
    json_t *o = json_object_get(j, "options"), *b = json_object_get(j, "bench_options");
    cr_assert_str_eq(json_string_value(json_object_get(o, "device")), "all");
    cr_assert(json_is_null(json_object_get(o, "topology")));
    cr_assert(json_is_false(json_object_get(o, "no-data")));
    cr_assert_str_eq(json_string_value(json_object_get(b, "world")), "4");
    cr_assert_not_null(json_object_get(b, "algorithm"), "a bench option left at its default");
    json_t *sets = json_object_get(j, "sets");
    cr_assert_str_eq(json_string_value(json_array_get(sets, 0)), "ccl.defaults.n_slots=8");
    cr_assert_str_eq(json_string_value(json_object_get(j, "fabric_model")), "packet");
    const char *h = json_string_value(json_object_get(json_object_get(j, "config_hash"), "ccl"));
    cr_assert(h && !strncmp(h, "fnv1a64:", 8));
    json_decref(j);
}

Test(report, a_failed_run_leaves_no_json_file)
{
    char path[] = "/tmp/kb_report_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "OPENBLAS_NUM_THREADS=1 " KB " run --bench vector_add --opt block=3 --json %s "
             ">/dev/null 2>&1",
             path);
    int status = system(cmd);
    cr_assert_neq(status, 0, "a bad --opt should fail");
    cr_assert_neq(access(path, F_OK), 0, "the failed run left %s behind", path);
}

/* Every line of a sweep, a failing point's included, is a valid record. */
Test(report, sweep_lines_validate)
{
    FILE *p = popen("OPENBLAS_NUM_THREADS=1 " KB " sweep run --bench ccl_allreduce --sweep "
                    "world=2,4 --sweep bytes=4KiB,6 --jobs 2 --json - 2>/dev/null",
                    "r");
    cr_assert_not_null(p);
    char line[1 << 16];
    int n = 0, failed = 0;
    while (fgets(line, sizeof line, p)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        cr_assert_not_null(j, "line %d: %s", n + 1, je.text);
        kb__err err = {0};
        cr_assert_eq(kb__report_validate(j, &err), 0, "line %d: %s", n + 1, err.msg);
        cr_assert(json_is_object(json_object_get(j, "point")));
        failed += json_integer_value(json_object_get(j, "status")) != 0;
        json_decref(j);
        n++;
    }
    pclose(p);
    cr_assert_eq(n, 4);
    cr_assert_eq(failed, 2, "the two points with bytes=6 fail");
}
