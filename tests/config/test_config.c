/*
 * Config tree: positions, key paths, errors of malformed input, typed
 * getters with units, and --set overrides.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

static kb__cfg *parse_ok(const char *text)
{
    kb__cfg *cfg;
    kb__err err;
    kb__err_clear(&err);
    int rc = kb__cfg_parse_string(&cfg, "t.yaml", text, strlen(text), &err);
    cr_assert_eq(rc, 0, "parse failed: %s", err.msg);
    return cfg;
}

static void set_ok(kb__cfg *cfg, const char *a);

static void parse_fails(const char *text, const char *expect)
{
    kb__cfg *cfg;
    kb__err err;
    kb__err_clear(&err);
    int rc = kb__cfg_parse_string(&cfg, "t.yaml", text, strlen(text), &err);
    cr_assert_eq(rc, KB_ECONFIG, "expected an error for:\n%s", text);
    cr_assert_null(cfg);
    cr_assert(strstr(err.msg, expect), "message '%s' lacks '%s'", err.msg, expect);
}

Test(config, nodes_keep_line_column_and_dotted_path)
{
    kb__cfg *cfg = parse_ok("cube:\n  hbm:\n    efficiency: 0.8\nlinks: [a, b, c]\n");
    const kb__cfg_node *n = kb__cfg_lookup(kb__cfg_root(cfg), "cube.hbm.efficiency");
    cr_assert_not_null(n);
    cr_assert_str_eq(n->path, "cube.hbm.efficiency");
    cr_assert_eq(n->line, 3);
    cr_assert_eq(n->col, 17);
    cr_assert_eq(n->key_line, 3);
    cr_assert_eq(n->key_col, 5);
    cr_assert_str_eq(n->file, "t.yaml");
    const kb__cfg_node *links = kb__cfg_child(kb__cfg_root(cfg), "links");
    cr_assert_eq(links->type, KB__CFG_SEQ);
    cr_assert_eq(links->n_kids, 3);
    cr_assert_str_eq(links->kids[2]->path, "links[2]");
    cr_assert_str_eq(links->kids[2]->text, "c");
    kb__cfg_destroy(cfg);
}

Test(config, map_keys_keep_file_order)
{
    kb__cfg *cfg = parse_ok("z: 1\na: 2\nm: 3\n");
    const kb__cfg_node *r = kb__cfg_root(cfg);
    cr_assert_eq(r->n_kids, 3);
    cr_assert_str_eq(r->kids[0]->key, "z");
    cr_assert_str_eq(r->kids[1]->key, "a");
    cr_assert_str_eq(r->kids[2]->key, "m");
    kb__cfg_destroy(cfg);
}

Test(config, empty_document_is_an_empty_map)
{
    kb__cfg *cfg = parse_ok("# nothing\n");
    cr_assert_eq(kb__cfg_root(cfg)->type, KB__CFG_MAP);
    cr_assert_eq(kb__cfg_root(cfg)->n_kids, 0);
    kb__cfg_destroy(cfg);
}

Test(config, malformed_yaml_names_file_line_col_and_problem)
{
    parse_fails("a: 1\nb: [1, 2\n", "t.yaml:3:1: while parsing a flow sequence");
}

Test(config, duplicate_key_is_an_error_at_the_second_key)
{
    parse_fails("pe:\n  tcm: 1\n  tcm: 2\n",
                "t.yaml:3:3: pe.tcm: duplicate key 'tcm' (first at line 2)");
}

/* "m:" with n keys k0..k<n-1> (k<i> on line i + 2, value i), then tail. */
static char *big_map(int n, const char *tail)
{
    size_t size = (size_t)n * 24 + strlen(tail) + 8, len = 0;
    char *text = malloc(size);
    cr_assert_not_null(text);
    len += (size_t)snprintf(text, size, "m:\n");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, size - len, "  k%d: %d\n", i, i);
    snprintf(text + len, size - len, "%s", tail);
    return text;
}

Test(config, large_maps_find_every_key_and_keep_their_order_under_overrides)
{
    char *text = big_map(1000, "");
    kb__cfg *cfg = parse_ok(text);
    free(text);
    const kb__cfg_node *m = kb__cfg_child(kb__cfg_root(cfg), "m");
    cr_assert_eq(m->n_kids, 1000);
    char key[16], want[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        snprintf(want, sizeof want, "%d", i);
        const kb__cfg_node *n = kb__cfg_child(m, key);
        cr_assert(n && n == m->kids[i], "%s", key);
        cr_assert_str_eq(n->text, want);
        cr_assert_eq(n->key_line, i + 2);
    }
    cr_assert_null(kb__cfg_child(m, "k1000"));
    cr_assert_null(kb__cfg_child(m, "k"));
    /* a replaced value keeps its place; a merged map appends new keys */
    set_ok(cfg, "m.k500=x");
    set_ok(cfg, "m={k999: y, k1000: z, k0: {a: 1}}");
    cr_assert_eq(m->n_kids, 1001);
    cr_assert_str_eq(m->kids[500]->text, "x");
    cr_assert_eq(kb__cfg_child(m, "k500"), m->kids[500]);
    cr_assert_str_eq(kb__cfg_child(m, "k999")->text, "y");
    cr_assert_eq(kb__cfg_child(m, "k1000"), m->kids[1000]);
    cr_assert_str_eq(m->kids[1000]->path, "m.k1000");
    cr_assert_str_eq(kb__cfg_lookup(kb__cfg_root(cfg), "m.k0.a")->text, "1");
    cr_assert_str_eq(kb__cfg_child(m, "k1")->text, "1");
    kb__cfg_destroy(cfg);
}

Test(config, duplicate_key_in_a_large_map_is_reported_at_the_second_key)
{
    char *text = big_map(1000, "  k3: 0\n");
    parse_fails(text, "t.yaml:1002:3: m.k3: duplicate key 'k3' (first at line 5)");
    free(text);
}

Test(config, items_of_a_long_sequence_are_numbered)
{
    size_t size = 1000 * 8 + 16, len = 0;
    char *text = malloc(size);
    len += (size_t)snprintf(text, size, "s: [");
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(text + len, size - len, "%s%d", i ? ", " : "", i);
    snprintf(text + len, size - len, "]\n");
    kb__cfg *cfg = parse_ok(text);
    free(text);
    const kb__cfg_node *s = kb__cfg_child(kb__cfg_root(cfg), "s");
    cr_assert_eq(s->n_kids, 1000);
    cr_assert_str_eq(s->kids[0]->path, "s[0]");
    cr_assert_str_eq(s->kids[999]->path, "s[999]");
    cr_assert_str_eq(s->kids[999]->text, "999");
    kb__cfg_destroy(cfg);
}

Test(config, top_level_sequence_is_rejected)
{
    parse_fails("- 1\n- 2\n", "t.yaml:1:1: top level: expected a mapping at the top level");
}

Test(config, aliases_are_rejected)
{
    parse_fails("a: &x 1\nb: *x\n", "t.yaml:2:4: aliases (*x) are not supported");
}

Test(config, nesting_deeper_than_the_limit_is_rejected)
{
    char text[4 * KB__CFG_MAX_DEPTH + 64] = "";
    for (int i = 0; i < KB__CFG_MAX_DEPTH + 2; i++)
        strcat(text, "{a: ");
    parse_fails(text, "nesting deeper than");
}

Test(config, parse_file_reports_missing_file)
{
    kb__cfg *cfg;
    kb__err err;
    cr_assert_eq(kb__cfg_parse_file(&cfg, "/nonexistent/x.yaml", &err), KB_EIO);
    cr_assert(strstr(err.msg, "/nonexistent/x.yaml: cannot open"));
}

Test(config, parse_file_reports_a_directory)
{
    kb__cfg *cfg;
    kb__err err;
    cr_assert_eq(kb__cfg_parse_file(&cfg, "/", &err), KB_EIO);
    cr_assert_str_eq(err.msg, "/: cannot read: Is a directory");
}

/* An endless file is cut at KB__CFG_FILE_MAX, not read until memory runs out. */
Test(config, parse_file_stops_at_the_size_limit)
{
    kb__cfg *cfg;
    kb__err err;
    cr_assert_eq(kb__cfg_parse_file(&cfg, "/dev/zero", &err), KB_ECONFIG);
    cr_assert_str_eq(err.msg, "/dev/zero: larger than 16 MiB; not a configuration file");
    cr_assert_null(cfg);
}

/* ---- units ---------------------------------------------------------------- */

Test(config_units, sizes_with_decimal_and_binary_units)
{
    uint64_t b;
    cr_assert(kb__cfg_text_size("4096", &b) && b == 4096);
    cr_assert(kb__cfg_text_size("4KiB", &b) && b == 4 * 1024);
    cr_assert(kb__cfg_text_size("16MiB", &b) && b == 16ull << 20);
    cr_assert(kb__cfg_text_size("48GB", &b) && b == 48ull * 1000 * 1000 * 1000);
    cr_assert(kb__cfg_text_size("2 TiB", &b) && b == 2ull << 40);
    cr_assert(kb__cfg_text_size("7B", &b) && b == 7);
    cr_assert(!kb__cfg_text_size("-4MiB", &b));
    cr_assert(!kb__cfg_text_size("1.5GiB", &b));
    cr_assert(!kb__cfg_text_size("4kib", &b));
    cr_assert(!kb__cfg_text_size("4 ", &b));
    cr_assert(!kb__cfg_text_size("99999999TiB", &b));
}

Test(config_units, times_default_to_ns)
{
    double ns;
    cr_assert(kb__cfg_text_time_ns("8", &ns) && ns == 8);
    cr_assert(kb__cfg_text_time_ns("8ns", &ns) && ns == 8);
    cr_assert(kb__cfg_text_time_ns("2.5us", &ns) && ns == 2500);
    cr_assert(kb__cfg_text_time_ns("500ps", &ns) && ns == 0.5);
    cr_assert(kb__cfg_text_time_ns("1ms", &ns) && ns == 1e6);
    cr_assert(kb__cfg_text_time_ns("2s", &ns) && ns == 2e9);
    cr_assert(!kb__cfg_text_time_ns("8 sec", &ns));
    cr_assert(!kb__cfg_text_time_ns("inf", &ns));
    cr_assert(!kb__cfg_text_time_ns("nan", &ns));
    cr_assert(!kb__cfg_text_time_ns("0x10", &ns));
}

Test(config_units, bandwidth_defaults_to_gb_per_s)
{
    double g;
    cr_assert(kb__cfg_text_bw_gbs("256", &g) && g == 256);
    cr_assert(kb__cfg_text_bw_gbs("256GB/s", &g) && g == 256);
    cr_assert(kb__cfg_text_bw_gbs("1TB/s", &g) && g == 1000);
    cr_assert(kb__cfg_text_bw_gbs("500MB/s", &g) && g == 0.5);
    cr_assert(!kb__cfg_text_bw_gbs("256GiB/s", &g));
}

Test(config_units, mesh_needs_two_positive_dimensions)
{
    uint32_t r, c;
    cr_assert(kb__cfg_text_mesh("4x4", &r, &c) && r == 4 && c == 4);
    cr_assert(kb__cfg_text_mesh("2x8", &r, &c) && r == 2 && c == 8);
    cr_assert(!kb__cfg_text_mesh("0x4", &r, &c));
    cr_assert(!kb__cfg_text_mesh("4x", &r, &c));
    cr_assert(!kb__cfg_text_mesh("4by4", &r, &c));
    cr_assert(!kb__cfg_text_mesh("4x4x4", &r, &c));
}

Test(config_units, integers_reject_signs_fractions_and_overflow)
{
    uint64_t u;
    int64_t i;
    cr_assert(kb__cfg_text_u64("18446744073709551615", &u) && u == UINT64_MAX);
    cr_assert(!kb__cfg_text_u64("18446744073709551616", &u));
    cr_assert(!kb__cfg_text_u64("-1", &u));
    cr_assert(!kb__cfg_text_u64("1.0", &u));
    cr_assert(kb__cfg_text_i64("-9223372036854775808", &i) && i == INT64_MIN);
    cr_assert(!kb__cfg_text_i64("9223372036854775808", &i));
}

Test(config_units, getter_error_names_where_path_what_and_text)
{
    kb__cfg *cfg = parse_ok("cube:\n  pe_layout:\n    pe_per_corner: two\n");
    const kb__cfg_node *n = kb__cfg_lookup(kb__cfg_root(cfg), "cube.pe_layout.pe_per_corner");
    uint64_t v;
    kb__err err;
    cr_assert_eq(kb__cfg_u64(n, &v, &err), KB_ECONFIG);
    cr_assert_str_eq(err.msg, "t.yaml:3:20: cube.pe_layout.pe_per_corner: expected a "
                              "non-negative integer, got 'two'");
    kb__cfg_destroy(cfg);
}

Test(config_units, bool_and_enum_getters)
{
    kb__cfg *cfg = parse_ok("a: yes\nb: false\nc: ringg\n");
    const kb__cfg_node *r = kb__cfg_root(cfg);
    int v;
    kb__err err;
    cr_assert_eq(kb__cfg_bool(kb__cfg_child(r, "a"), &v, &err), 0);
    cr_assert_eq(v, 1);
    cr_assert_eq(kb__cfg_bool(kb__cfg_child(r, "b"), &v, &err), 0);
    cr_assert_eq(v, 0);
    static const char *const algos[] = {"ring", "mesh2d", "tree"};
    cr_assert_eq(kb__cfg_enum(kb__cfg_child(r, "c"), algos, 3, &v, &err), KB_ECONFIG);
    cr_assert(strstr(err.msg, "t.yaml:3:4: c: expected one of ring, mesh2d, tree, got 'ringg'; "
                              "did you mean 'ring'?"),
              "%s", err.msg);
    kb__cfg_destroy(cfg);
}

Test(config_units, suggest_only_close_names)
{
    static const char *const keys[] = {"router", "xbar", "hbm", "sram", "noc"};
    cr_assert_str_eq(kb__cfg_suggest("hbmm", keys, 5), "hbm");
    cr_assert_str_eq(kb__cfg_suggest("ruoter", keys, 5), "router");
    cr_assert_null(kb__cfg_suggest("completely_else", keys, 5));
    cr_assert_eq(kb__cfg_edit_distance("kitten", "sitting"), 3);
}

/* ---- --set ---------------------------------------------------------------- */

static void set_ok(kb__cfg *cfg, const char *a)
{
    kb__err err;
    kb__err_clear(&err);
    cr_assert_eq(kb__cfg_apply_set(cfg, a, &err), 0, "%s: %s", a, err.msg);
}

Test(config_set, replaces_a_value_and_records_the_origin)
{
    kb__cfg *cfg = parse_ok("cube:\n  hbm:\n    efficiency: 0.8\n");
    set_ok(cfg, "cube.hbm.efficiency=0.9");
    const kb__cfg_node *n = kb__cfg_lookup(kb__cfg_root(cfg), "cube.hbm.efficiency");
    cr_assert_str_eq(n->text, "0.9");
    cr_assert_str_eq(n->file, "--set cube.hbm.efficiency=0.9");
    cr_assert_eq(n->line, 0);
    char where[128];
    cr_assert_str_eq(kb__cfg_where(n, 0, where, sizeof where), "--set cube.hbm.efficiency=0.9");
    cr_assert_eq(kb__cfg_lookup(kb__cfg_root(cfg), "cube.hbm")->n_kids, 1);
    kb__cfg_destroy(cfg);
}

Test(config_set, creates_missing_sections)
{
    kb__cfg *cfg;
    kb__err err;
    cr_assert_eq(kb__cfg_create_empty(&cfg, "defaults", &err), 0);
    set_ok(cfg, "pe.gemm.rows=128");
    const kb__cfg_node *n = kb__cfg_lookup(kb__cfg_root(cfg), "pe.gemm.rows");
    cr_assert_not_null(n);
    cr_assert_str_eq(n->path, "pe.gemm.rows");
    cr_assert_str_eq(n->text, "128");
    kb__cfg_destroy(cfg);
}

Test(config_set, flow_map_merges_into_a_section)
{
    kb__cfg *cfg = parse_ok("sip:\n  ucie:\n    bw_gbs: 256\n    length_mm: 5\n");
    set_ok(cfg, "sip.ucie={bw_gbs: 128, overhead_ns: 4}");
    const kb__cfg_node *u = kb__cfg_lookup(kb__cfg_root(cfg), "sip.ucie");
    cr_assert_eq(u->n_kids, 3);
    cr_assert_str_eq(kb__cfg_child(u, "bw_gbs")->text, "128");
    cr_assert_str_eq(kb__cfg_child(u, "length_mm")->text, "5");
    cr_assert_eq(kb__cfg_child(u, "length_mm")->line, 4);
    cr_assert_str_eq(kb__cfg_child(u, "overhead_ns")->path, "sip.ucie.overhead_ns");
    kb__cfg_destroy(cfg);
}

Test(config_set, later_override_wins)
{
    kb__cfg *cfg = parse_ok("a: 1\n");
    set_ok(cfg, "a=2");
    set_ok(cfg, "a=3");
    cr_assert_str_eq(kb__cfg_child(kb__cfg_root(cfg), "a")->text, "3");
    kb__cfg_destroy(cfg);
}

static void set_fails(const char *a, const char *expect)
{
    kb__cfg *cfg = parse_ok("cube:\n  hbm:\n    efficiency: 0.8\n");
    kb__err err;
    kb__err_clear(&err);
    cr_assert_eq(kb__cfg_apply_set(cfg, a, &err), KB_ECONFIG, "%s", a);
    cr_assert(strstr(err.msg, expect), "message '%s' lacks '%s'", err.msg, expect);
    kb__cfg_destroy(cfg);
}

Test(config_set, malformed_assignments_name_the_argument)
{
    set_fails("cube.hbm.efficiency", "--set cube.hbm.efficiency: expected PATH=VALUE");
    set_fails("cube..hbm=1", "--set cube..hbm=1: expected PATH=VALUE");
    set_fails("cube.hbm.efficiency=", "--set cube.hbm.efficiency=: expected a value");
    set_fails("cube.hbm.efficiency.x=1", "--set cube.hbm.efficiency.x=1: cube.hbm.efficiency is "
                                         "a value, not a section");
    set_fails("a={b: [1", "--set a={b: [1: value is not valid YAML: while parsing a flow sequence");
}
