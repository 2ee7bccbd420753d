/*
 * The bench interface itself: option parsing and getters, checks and the
 * overall outcome, the registry. No machine is needed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernbench/bench.h"

Test(bench_opts, later_value_replaces_earlier)
{
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    cr_assert_eq(kb_bench_opts_add(&o, "m=3"), 0);
    cr_assert_eq(kb_bench_opts_add(&o, "m=5"), 0);
    int64_t v;
    cr_assert_eq(kb_bench_opt_i64(&o, "m", 1, 0, 10, &v), 0);
    cr_assert_eq(v, 5);
    cr_assert_eq(o.n, 1);
}

Test(bench_opts, missing_key_gives_the_default)
{
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    int64_t v;
    double d;
    int b;
    cr_assert_eq(kb_bench_opt_i64(&o, "m", 7, 0, 10, &v), 0);
    cr_assert_eq(kb_bench_opt_f64(&o, "x", 0.5, &d), 0);
    cr_assert_eq(kb_bench_opt_bool(&o, "on", 1, &b), 0);
    cr_assert(v == 7 && d == 0.5 && b == 1);
    cr_assert_str_eq(kb_bench_opt_str(&o, "s", "dflt"), "dflt");
}

Test(bench_opts, malformed_pairs_are_rejected)
{
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    cr_assert_eq(kb_bench_opts_add(&o, "novalue"), KB_EINVAL);
    cr_assert_not_null(strstr(o.error, "key=value"));
    cr_assert_eq(kb_bench_opts_add(&o, "=3"), KB_EINVAL);
    cr_assert_eq(o.n, 0);
}

Test(bench_opts, out_of_range_integer_names_key_value_and_range)
{
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    kb_bench_opts_add(&o, "pes=9");
    int64_t v;
    cr_assert_eq(kb_bench_opt_i64(&o, "pes", 8, 1, 8, &v), KB_EINVAL);
    cr_assert_eq(v, 8);
    cr_assert_not_null(strstr(o.error, "pes"));
    cr_assert_not_null(strstr(o.error, "from 1 to 8"));
    cr_assert_not_null(strstr(o.error, "'9'"));
}

Test(bench_opts, integers_take_a_size_unit)
{
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    kb_bench_opts_add(&o, "bytes=4MiB");
    kb_bench_opts_add(&o, "k=64KB");
    kb_bench_opts_add(&o, "bad=4Mi");
    int64_t v;
    cr_assert_eq(kb_bench_opt_i64(&o, "bytes", 0, 0, INT64_MAX, &v), 0);
    cr_assert_eq(v, 4 << 20);
    cr_assert_eq(kb_bench_opt_i64(&o, "k", 0, 0, INT64_MAX, &v), 0);
    cr_assert_eq(v, 64000);
    cr_assert_eq(kb_bench_opt_i64(&o, "bytes", 0, 0, 1 << 20, &v), KB_EINVAL);
    cr_assert_not_null(strstr(o.error, "'4MiB'"));
    cr_assert_eq(kb_bench_opt_i64(&o, "bad", 0, 0, INT64_MAX, &v), KB_EINVAL);
    cr_assert_not_null(strstr(o.error, "'4Mi'"));
}

Test(bench_result, notes_are_kept_in_order_and_cut)
{
    kb_bench_result r;
    memset(&r, 0, sizeof r);
    kb_bench_note(&r, "bound", "the link %s", "a -> b");
    char big[KB_BENCH_NOTE_MAX * 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    kb_bench_note(&r, "long", "%s", big);
    for (int i = 0; i < KB_BENCH_MAX_NOTES; i++)
        kb_bench_note(&r, "more", "%d", i);
    cr_assert_eq(r.n_notes, KB_BENCH_MAX_NOTES);
    cr_assert_str_eq(r.notes[0].name, "bound");
    cr_assert_str_eq(r.notes[0].text, "the link a -> b");
    cr_assert_eq(strlen(r.notes[1].text), KB_BENCH_NOTE_MAX - 1);
    cr_assert_str_eq(r.notes[KB_BENCH_MAX_NOTES - 1].text, "5");
}

Test(bench_opts, typed_getters_parse_their_types)
{
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    kb_bench_opts_add(&o, "x=2.5e-1");
    kb_bench_opts_add(&o, "f=off");
    kb_bench_opts_add(&o, "h=0x10");
    double d;
    int b;
    int64_t v;
    cr_assert_eq(kb_bench_opt_f64(&o, "x", 0, &d), 0);
    cr_assert_float_eq(d, 0.25, 1e-12);
    cr_assert_eq(kb_bench_opt_bool(&o, "f", 1, &b), 0);
    cr_assert_eq(b, 0);
    cr_assert_eq(kb_bench_opt_i64(&o, "h", 0, 0, 100, &v), 0);
    cr_assert_eq(v, 16);
    kb_bench_opts_add(&o, "f=maybe");
    cr_assert_eq(kb_bench_opt_bool(&o, "f", 1, &b), KB_EINVAL);
}

Test(bench_result, check_passes_at_tolerance_and_fails_above_or_nan)
{
    kb_bench_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(kb_bench_check(&r, "a", 1e-3, 1e-3), 1);
    cr_assert(kb_bench_passed(&r));
    cr_assert_eq(kb_bench_check(&r, "b", NAN, 1.0), 0);
    cr_assert_eq(kb_bench_check(&r, "c", 2e-3, 1e-3), 0);
    cr_assert_not(kb_bench_passed(&r));
    cr_assert_eq(r.n_checks, 3);
    cr_assert_not(r.checks[2].pass);
}

Test(bench_result, no_check_is_not_a_pass_unless_timing_only)
{
    kb_bench_result r;
    memset(&r, 0, sizeof r);
    cr_assert_not(kb_bench_passed(&r));
    r.no_data = 1;
    cr_assert(kb_bench_passed(&r));
}

Test(bench_registry, every_bench_is_found_by_its_name)
{
    cr_assert_geq(kb_bench_count(), 7);
    for (int i = 0; i < kb_bench_count(); i++)
        cr_assert_eq(kb_bench_find(kb_bench_at(i)->name), kb_bench_at(i));
    cr_assert_null(kb_bench_find("no_such_bench"));
    cr_assert_null(kb_bench_at(kb_bench_count()));
    cr_assert_not_null(kb_bench_default());
}

Test(bench_opts, integers_with_leading_zeros_are_decimal)
{
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    kb_bench_opts_add(&o, "m=010");
    kb_bench_opts_add(&o, "n=-007");
    kb_bench_opts_add(&o, "h=0x10");
    int64_t m, n, h;
    cr_assert_eq(kb_bench_opt_i64(&o, "m", 1, -100, 100, &m), 0);
    cr_assert_eq(kb_bench_opt_i64(&o, "n", 1, -100, 100, &n), 0);
    cr_assert_eq(kb_bench_opt_i64(&o, "h", 1, -100, 100, &h), 0);
    cr_assert_eq(m, 10, "010 read as %lld, not ten", (long long)m);
    cr_assert_eq(n, -7);
    cr_assert_eq(h, 16);
    kb_bench_opts_add(&o, "m=09");
    cr_assert_eq(kb_bench_opt_i64(&o, "m", 1, -100, 100, &m), 0);
    cr_assert_eq(m, 9);
}

/* ---- descriptors (a plug-in's kb_bench_plugin) ------------------------------ */

static int run_nothing(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    (void)m, (void)o, (void)r;
    return 0;
}

static void bad_desc(const kb_bench *b, const char *expect)
{
    char msg[256] = "";
    cr_assert_eq(kb_bench_validate(b, msg, sizeof msg), KB_EINVAL, "accepted; wanted '%s'", expect);
    cr_assert(strstr(msg, expect), "'%s' lacks '%s'", msg, expect);
    kb_bench_result r;
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    /* the runner refuses it before reading it (any machine pointer: unused) */
    cr_assert_eq(kb_bench_run((kb_machine *)&o, b, &o, 1, &r), KB_EINVAL);
    cr_assert(strstr(r.error, expect), "runner: '%s' lacks '%s'", r.error, expect);
}

Test(bench_desc, malformed_descriptors_are_refused_naming_the_problem)
{
    static const kb_bench_opt_doc ok[] = {{"m", "1", "rows"}, {"n", "2", "cols"}};
    static const kb_bench_opt_doc no_key[] = {{NULL, "1", "x"}};
    static const kb_bench_opt_doc eq_key[] = {{"a=b", "1", "x"}};
    static const kb_bench_opt_doc empty_key[] = {{"", "1", "x"}};
    static const kb_bench_opt_doc ctl_key[] = {{"a\tb", "1", "x"}};
    static const kb_bench_opt_doc long_key[] = {{"k123456789012345678901234567890123", "1", "x"}};
    static const kb_bench_opt_doc twice[] = {{"m", "1", "x"}, {"m", "2", "y"}};
    static const kb_bench_opt_doc no_def[] = {{"m", NULL, "x"}};
    static const kb_bench_opt_doc no_help[] = {{"m", "1", NULL}};
    char long_name[KB_BENCH_NAME_MAX + 8];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const kb_bench good = {"good", NULL, ok, 2, run_nothing};
    cr_assert_eq(kb_bench_validate(&good, NULL, 0), 0);
    bad_desc(&(kb_bench){NULL, "s", ok, 2, run_nothing}, "name is NULL");
    bad_desc(&(kb_bench){"", "s", ok, 2, run_nothing}, "is not 1 to 63 printable");
    bad_desc(&(kb_bench){"a\nb", "s", ok, 2, run_nothing}, "is not 1 to 63 printable");
    bad_desc(&(kb_bench){long_name, "s", ok, 2, run_nothing}, "is not 1 to 63 printable");
    bad_desc(&(kb_bench){"b", "s", ok, 2, NULL}, "bench b: run is NULL");
    bad_desc(&(kb_bench){"b", "s", ok, -5, run_nothing}, "n_opts is -5 (expected 0 to 32)");
    bad_desc(&(kb_bench){"b", "s", ok, 1000, run_nothing}, "n_opts is 1000");
    bad_desc(&(kb_bench){"b", "s", NULL, 2, run_nothing}, "opts is NULL with n_opts 2");
    bad_desc(&(kb_bench){"b", "s", no_key, 1, run_nothing}, "option 0 has no key");
    bad_desc(&(kb_bench){"b", "s", eq_key, 1, run_nothing}, "key 'a=b' is not");
    bad_desc(&(kb_bench){"b", "s", empty_key, 1, run_nothing}, "key '' is not");
    bad_desc(&(kb_bench){"b", "s", ctl_key, 1, run_nothing}, "option 0 key");
    bad_desc(&(kb_bench){"b", "s", long_key, 1, run_nothing}, "1 to 31 printable");
    bad_desc(&(kb_bench){"b", "s", twice, 2, run_nothing}, "option m is listed twice (0 and 1)");
    bad_desc(&(kb_bench){"b", "s", no_def, 1, run_nothing}, "option m has no default");
    bad_desc(&(kb_bench){"b", "s", no_help, 1, run_nothing}, "option m has no help");
    char msg[64];
    cr_assert_eq(kb_bench_validate(NULL, msg, sizeof msg), KB_EINVAL);
    cr_assert_str_eq(msg, "bench descriptor is NULL");
}

Test(bench_desc, every_built_in_bench_is_a_valid_descriptor)
{
    for (int i = 0; i < kb_bench_count(); i++) {
        char msg[256] = "";
        cr_assert_eq(kb_bench_validate(kb_bench_at(i), msg, sizeof msg), 0, "%s", msg);
    }
}
