/*
 * ccl.yaml: the shipped file equals the built-in configuration, every kind
 * of bad input is reported at its file:line:col, machine-dependent checks
 * (world size, queue fit) name where the value came from, and --set
 * overrides apply key by key.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/algorithms/algorithms.h"
#include "ccl/ccl_config.h"
#include "support/files.h"

extern const char kb__embedded_ccl[];
extern const unsigned long kb__embedded_ccl_len;

static kb__ccl_config *load_ok(const char *text, const char *const *sets, size_t n_sets)
{
    kb__ccl_config *c;
    kb__err err;
    kb__err_clear(&err);
    int rc = kb__ccl_config_load_string(&c, "t.yaml", text, strlen(text), sets, n_sets, &err);
    cr_assert_eq(rc, 0, "load failed: %s", err.msg);
    return c;
}

/* Loads text expecting failure; the message must equal want. */
static void load_bad(const char *text, const char *set, const char *want)
{
    kb__ccl_config *c;
    kb__err err;
    kb__err_clear(&err);
    const char *sets[1] = {set};
    int rc =
        kb__ccl_config_load_string(&c, "bad.yaml", text, strlen(text), sets, set ? 1 : 0, &err);
    cr_assert_eq(rc, KB_ECONFIG, "expected KB_ECONFIG, got %d (%s)", rc, err.msg);
    cr_assert_null(c);
    cr_assert_str_eq(err.msg, want);
}

static int settings_equal(const kb__ccl_settings *a, const kb__ccl_settings *b)
{
    return a->buffer_kind == b->buffer_kind && a->n_slots == b->n_slots &&
           a->slot_size == b->slot_size && a->backpressure == b->backpressure &&
           a->vc_chunk_size == b->vc_chunk_size && a->credit_size == b->credit_size &&
           a->world_size == b->world_size;
}

Test(ccl_config, embedded_copy_equals_the_shipped_file)
{
    size_t len;
    char *file = kb_test_slurp(KB_SOURCE_DIR "/configs/ccl.yaml", &len);
    cr_assert_eq(kb__embedded_ccl_len, len);
    cr_assert_eq(memcmp(kb__embedded_ccl, file, len), 0);
    free(file);
}

Test(ccl_config, shipped_file_parses_to_the_built_in_configuration)
{
    kb__ccl_config *file, *builtin;
    kb__err err;
    cr_assert_eq(kb__ccl_config_load(&file, KB_SOURCE_DIR "/configs/ccl.yaml", NULL, 0, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(kb__ccl_config_load(&builtin, NULL, NULL, 0, &err), 0, "%s", err.msg);
    kb__ccl_settings def;
    kb__ccl_settings_builtin(&def);
    cr_assert(settings_equal(&file->defaults, &def), "defaults section differs from the built-in");
    cr_assert_eq(file->n_algos, builtin->n_algos);
    cr_assert_geq(file->n_algos, 4);
    for (size_t i = 0; i < file->n_algos; i++) {
        cr_assert_str_eq(file->algos[i].name, builtin->algos[i].name);
        cr_assert_str_eq(file->algos[i].module, builtin->algos[i].module);
        cr_assert_eq(file->algos[i].topology, builtin->algos[i].topology);
        cr_assert(settings_equal(&file->algos[i].s, &builtin->algos[i].s));
    }
    for (int k = 0; k < KB__CCL_COLLECTIVE_COUNT; k++)
        cr_assert_eq(file->default_algo[k], builtin->default_algo[k]);
    const kb__ccl_algo *a;
    cr_assert_eq(kb__ccl_config_default(builtin, KB__CCL_ALL_REDUCE, &a, &err), 0);
    cr_assert_str_eq(a->name, "ring_allreduce");
    cr_assert_eq(a->topology, KB__CCL_RING_1D);
    kb__ccl_config_destroy(file);
    kb__ccl_config_destroy(builtin);
}

Test(ccl_config, empty_file_gives_the_built_in_defaults_and_no_algorithm)
{
    kb__ccl_config *c = load_ok("", NULL, 0);
    kb__ccl_settings def;
    kb__ccl_settings_builtin(&def);
    cr_assert(settings_equal(&c->defaults, &def));
    cr_assert_eq(c->n_algos, 0);
    const kb__ccl_algo *a;
    kb__err err;
    cr_assert_eq(kb__ccl_config_default(c, KB__CCL_ALL_REDUCE, &a, &err), KB_ENOTFOUND);
    cr_assert_str_eq(err.msg, "t.yaml names no default algorithm for all_reduce (add "
                              "defaults.algorithm.all_reduce: NAME)");
    kb__ccl_config_destroy(c);
}

Test(ccl_config, algorithm_inherits_defaults_and_overrides_its_own_keys)
{
    kb__ccl_config *c = load_ok("defaults:\n  n_slots: 6\n  buffer_kind: sram\n"
                                "algorithms:\n  r:\n    module: ring_allreduce\n"
                                "    topology: ring_1d\n    slot_size: 1KiB\n",
                                NULL, 0);
    cr_assert_eq(c->n_algos, 1);
    cr_assert_eq(c->algos[0].s.n_slots, 6);
    cr_assert_eq(c->algos[0].s.buffer_kind, KB__CCL_BUF_SRAM);
    cr_assert_eq(c->algos[0].s.slot_size, 1024);
    cr_assert_eq(c->algos[0].collective, KB__CCL_ALL_REDUCE);
    cr_assert_eq(c->algos[0].at[KB__CCL_F_N_SLOTS]->line, 2);
    cr_assert_eq(c->algos[0].at[KB__CCL_F_SLOT_SIZE]->line, 8);
    kb__ccl_config_destroy(c);
}

/* ---- bad input, one kind per test ---------------------------------------- */

#define ALG "algorithms:\n  a:\n    module: k\n    topology: ring_1d\n"

Test(ccl_config_errors, unknown_key_gets_did_you_mean)
{
    load_bad("defaults:\n  n_slot: 4\n", NULL,
             "bad.yaml:2:3: defaults.n_slot: unknown key 'n_slot'; did you mean 'n_slots'?");
}

Test(ccl_config_errors, unknown_top_level_key_lists_the_known_ones)
{
    load_bad(
        "queues: {}\n", NULL,
        "bad.yaml:1:1: queues: unknown key 'queues'; known keys here: defaults, algorithms, ccl");
}

Test(ccl_config_errors, slot_size_not_a_multiple_of_64)
{
    load_bad("defaults:\n  slot_size: 100\n", NULL,
             "bad.yaml:2:14: defaults.slot_size: expected a multiple of 64 bytes from 128 (the "
             "64-byte descriptor and some payload) to 2GiB, got '100'");
}

Test(ccl_config_errors, slot_size_of_only_a_descriptor)
{
    load_bad("defaults:\n  slot_size: 64\n", NULL,
             "bad.yaml:2:14: defaults.slot_size: expected a multiple of 64 bytes from 128 (the "
             "64-byte descriptor and some payload) to 2GiB, got '64'");
}

/* Every chunk and credit is a fabric message: sizes that would make a run
 * crawl are refused when loading. */
Test(ccl_config_errors, vc_chunk_and_credit_sizes_are_bounded)
{
    load_bad("defaults:\n  vc_chunk_size: 32\n", NULL,
             "bad.yaml:2:18: defaults.vc_chunk_size: expected a size from 64 bytes to 2GiB, got "
             "'32'");
    load_bad("defaults:\n  credit_size: 2MiB\n", NULL,
             "bad.yaml:2:16: defaults.credit_size: expected a size from 1 byte to 1MiB, got "
             "'2MiB'");
    kb__ccl_config *c = load_ok("defaults:\n  vc_chunk_size: 64\n  credit_size: 1MiB\n", NULL, 0);
    cr_assert_eq(c->defaults.vc_chunk_size, 64);
    cr_assert_eq(c->defaults.credit_size, 1u << 20);
    kb__ccl_config_destroy(c);
}

/* Built-in modules are known when loading: one named over another topology
 * or collective than it implements points at the key that disagrees. */
Test(ccl_config_errors, built_in_module_over_the_wrong_topology_or_collective)
{
    load_bad("algorithms:\n  x:\n    module: mesh_allreduce\n    topology: ring_1d\n", NULL,
             "bad.yaml:4:15: algorithms.x.topology: module 'mesh_allreduce' implements "
             "all_reduce over mesh_2d, the algorithm is all_reduce over ring_1d");
    load_bad("algorithms:\n  x:\n    module: ring_broadcast\n    topology: ring_1d\n", NULL,
             "bad.yaml:3:13: algorithms.x.module: module 'ring_broadcast' implements broadcast "
             "over ring_1d, the algorithm is all_reduce over ring_1d");
}

Test(ccl_config_errors, n_slots_below_one)
{
    load_bad(ALG "    n_slots: 0\n", NULL,
             "bad.yaml:5:14: algorithms.a.n_slots: expected an integer from 1 to 65536, got '0'");
}

Test(ccl_config_errors, buffer_kind_typo)
{
    load_bad("defaults:\n  buffer_kind: tcn\n", NULL,
             "bad.yaml:2:16: defaults.buffer_kind: expected one of tcm, sram, hbm, got 'tcn'; "
             "did you mean 'tcm'?");
}

Test(ccl_config_errors, unknown_topology)
{
    load_bad("algorithms:\n  a:\n    module: k\n    topology: torus\n", NULL,
             "bad.yaml:4:15: algorithms.a.topology: expected one of ring_1d, mesh_2d, tree, hierarchical, got "
             "'torus'");
}

Test(ccl_config_errors, algorithm_without_module)
{
    load_bad("algorithms:\n  a:\n    topology: tree\n", NULL,
             "bad.yaml:3:5: algorithms.a: algorithm 'a' needs a 'module' (the kernel name)");
}

Test(ccl_config_errors, default_algorithm_unknown_gets_did_you_mean)
{
    load_bad(
        "defaults:\n  algorithm:\n    all_reduce: b\n" ALG, NULL,
        "bad.yaml:3:17: defaults.algorithm.all_reduce: unknown algorithm 'b'; did you mean 'a'?");
}

Test(ccl_config_errors, default_algorithm_of_another_collective)
{
    load_bad("defaults:\n  algorithm:\n    broadcast: a\n" ALG, NULL,
             "bad.yaml:3:16: defaults.algorithm.broadcast: algorithm 'a' implements all_reduce, "
             "not broadcast");
}

Test(ccl_config_errors, world_size_zero)
{
    load_bad("defaults:\n  world_size: 0\n", NULL,
             "bad.yaml:2:15: defaults.world_size: expected an integer from 1 to 65536, got '0'");
}

Test(ccl_config_errors, section_that_is_not_a_mapping)
{
    load_bad("defaults: 5\n", NULL, "bad.yaml:1:11: defaults: expected a mapping");
}

Test(ccl_config_errors, backpressure_of_the_wrong_type)
{
    load_bad(ALG "    backpressure: [poll]\n", NULL,
             "bad.yaml:5:19: algorithms.a.backpressure: expected one of poll, sleep, got a "
             "sequence");
}

Test(ccl_config_errors, malformed_yaml_names_the_place)
{
    kb__ccl_config *c;
    kb__err err;
    const char *text = "defaults:\n  n_slots: [4\n";
    int rc = kb__ccl_config_load_string(&c, "bad.yaml", text, strlen(text), NULL, 0, &err);
    cr_assert_eq(rc, KB_ECONFIG);
    cr_assert(!strncmp(err.msg, "bad.yaml:", 9), "%s", err.msg);
}

/* ---- overrides ------------------------------------------------------------ */

Test(ccl_config_set, defaults_override_reaches_algorithms_without_their_own_value)
{
    const char *sets[] = {"ccl.defaults.n_slots=8"};
    kb__ccl_config *c;
    kb__err err;
    cr_assert_eq(kb__ccl_config_load(&c, NULL, sets, 1, &err), 0, "%s", err.msg);
    const kb__ccl_algo *ring, *hello;
    cr_assert_eq(kb__ccl_config_find(c, "ring_allreduce", &ring, &err), 0);
    cr_assert_eq(kb__ccl_config_find(c, "hello_send", &hello, &err), 0);
    cr_assert_eq(c->defaults.n_slots, 8);
    cr_assert_eq(ring->s.n_slots, 8);
    cr_assert_eq(hello->s.n_slots, 2); /* its own key wins */
    kb__ccl_config_destroy(c);
}

Test(ccl_config_set, algorithm_key_override_and_new_algorithm)
{
    const char *sets[] = {"ccl.algorithms.hello_send.n_slots=3",
                          "ccl.algorithms.mine={module: tree_allreduce, topology: tree}"};
    kb__ccl_config *c;
    kb__err err;
    cr_assert_eq(kb__ccl_config_load(&c, NULL, sets, 2, &err), 0, "%s", err.msg);
    const kb__ccl_algo *hello, *mine;
    cr_assert_eq(kb__ccl_config_find(c, "hello_send", &hello, &err), 0);
    cr_assert_eq(hello->s.n_slots, 3);
    cr_assert_str_eq(hello->module, "hello_send");
    cr_assert_eq(kb__ccl_config_find(c, "mine", &mine, &err), 0, "%s", err.msg);
    cr_assert_eq(mine->topology, KB__CCL_TREE);
    kb__ccl_config_destroy(c);
}

Test(ccl_config_set, bad_override_names_the_assignment)
{
    load_bad(ALG, "ccl.algorithms.a.n_slots=0",
             "--set ccl.algorithms.a.n_slots=0: ccl.algorithms.a.n_slots: expected an integer "
             "from 1 to 65536, got '0'");
}

Test(ccl_config_set, override_without_the_ccl_prefix_is_refused)
{
    load_bad(ALG, "defaults.n_slots=2",
             "--set defaults.n_slots=2: ccl.yaml overrides start with 'ccl.' (e.g. --set "
             "ccl.defaults.n_slots=8)");
}

Test(ccl_config, unknown_algorithm_lookup_gets_did_you_mean)
{
    kb__ccl_config *c;
    kb__err err;
    cr_assert_eq(kb__ccl_config_load(&c, NULL, NULL, 0, &err), 0);
    const kb__ccl_algo *a;
    cr_assert_eq(kb__ccl_config_find(c, "ring_allreduse", &a, &err), KB_ENOTFOUND);
    cr_assert_null(a);
    cr_assert(strstr(err.msg, "unknown collective algorithm 'ring_allreduse'; did you mean "
                              "'ring_allreduce'?"),
              "%s", err.msg);
    kb__ccl_config_destroy(c);
}

/* ---- algorithm names ------------------------------------------------------ */

#define NAME_RULE                                                                                  \
    "expected an algorithm name of 1 to 63 letters, digits, '_' and '-', starting "                \
    "with a letter or '_', got "

Test(ccl_names, one_rule_for_every_name)
{
    static const char *const good[] = {"a", "_", "_x", "Z9", "ring-8", "a_b-c_", "ring_allreduce"};
    static const char *const bad[] = {"",    "9ring", "-x", "a.b",  "a b",
                                      "a/b", "a:b",   "é",  "a\tb", "ring_allreduce "};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_assert(kb__ccl_name_ok(good[i]), "'%s'", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!kb__ccl_name_ok(bad[i]), "'%s'", bad[i]);
    cr_assert(!kb__ccl_name_ok(NULL));
    char name[KB__CCL_NAME_MAX + 2];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    cr_assert(!kb__ccl_name_ok(name), "64 characters");
    name[KB__CCL_NAME_MAX] = '\0';
    cr_assert(kb__ccl_name_ok(name), "63 characters");
}

Test(ccl_names, built_in_modules_and_algorithms_follow_the_rule)
{
    char list[1024];
    kb__ccl_module_list(list, sizeof list);
    for (char *save, *m = strtok_r(list, ", ", &save); m; m = strtok_r(NULL, ", ", &save))
        cr_assert(kb__ccl_name_ok(m), "built-in module '%s'", m);
    kb__ccl_config *c = load_ok(kb__embedded_ccl, NULL, 0);
    for (size_t i = 0; i < c->n_algos; i++)
        cr_assert(kb__ccl_name_ok(c->algos[i].name), "'%s'", c->algos[i].name);
    kb__ccl_config_destroy(c);
}

Test(ccl_names, names_that_follow_the_rule_load)
{
    kb__ccl_config *c =
        load_ok("algorithms:\n"
                "  _x: {module: k, topology: tree}\n"
                "  ring-8: {module: k, topology: ring_1d}\n"
                "  Z9: {module: k, topology: tree}\n"
                "  aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: "
                "{module: k, topology: tree}\n",
                NULL, 0);
    cr_assert_eq(c->n_algos, 4);
    cr_assert_str_eq(c->algos[1].name, "ring-8");
    cr_assert_eq(strlen(c->algos[3].name), 63);
    kb__ccl_config_destroy(c);
}

Test(ccl_names, a_bad_name_in_the_file_is_an_error_at_the_name)
{
    load_bad("algorithms:\n  ok: {module: k, topology: tree}\n  9ring: {module: k, topology: "
             "tree}\n",
             NULL, "bad.yaml:3:3: algorithms.9ring: " NAME_RULE "'9ring'");
    load_bad("algorithms:\n  a.b:\n    module: k\n    topology: tree\n", NULL,
             "bad.yaml:2:3: algorithms.a.b: " NAME_RULE "'a.b'");
    load_bad("algorithms:\n  \"my ring\": {module: k, topology: tree}\n", NULL,
             "bad.yaml:2:3: algorithms.my ring: " NAME_RULE "'my ring'");
    load_bad("algorithms:\n  -x: {module: k, topology: tree}\n", NULL,
             "bad.yaml:2:3: algorithms.-x: " NAME_RULE "'-x'");
    load_bad("algorithms:\n  \"\": {module: k, topology: tree}\n", NULL,
             "bad.yaml:2:3: algorithms.: " NAME_RULE "''");
    /* one character too many; the message shows the first 60 */
    load_bad("algorithms:\n  aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: "
             "{module: k, topology: tree}\n",
             NULL,
             "bad.yaml:2:3: algorithms.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
             "aaaa: " NAME_RULE
             "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'");
}

Test(ccl_names, a_bad_name_added_by_an_override_names_the_override)
{
    load_bad(ALG, "ccl.algorithms.9x={module: k, topology: tree}",
             "--set ccl.algorithms.9x={module: k, topology: tree}: ccl.algorithms.9x: " NAME_RULE
             "'9x'");
    load_bad(ALG, "ccl.algorithms={\"a b\": {module: k, topology: tree}}",
             "--set ccl.algorithms={\"a b\": {module: k, topology: tree}}: ccl.algorithms.a "
             "b: " NAME_RULE "'a b'");
    load_bad("", "ccl.algorithms.x-1.module=k",
             "--set ccl.algorithms.x-1.module=k: ccl.algorithms.x-1: algorithm 'x-1' needs a "
             "'topology' (ring_1d, mesh_2d, tree or hierarchical)");
}

/* ---- many algorithms -------------------------------------------------------- */

/* A ccl.yaml of n algorithms, entry i (on line i + 2) named algo_<i>, or
 * algo_<dup_of> when i == dup_at; then tail. */
static char *many_algos(size_t n, size_t dup_at, size_t dup_of, const char *tail)
{
    size_t size = n * 64 + strlen(tail) + 16, len = 0;
    char *text = malloc(size);
    cr_assert_not_null(text);
    len += (size_t)snprintf(text, size, "algorithms:\n");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, size - len,
                                "  algo_%zu: {module: ring_allreduce, topology: ring_1d}\n",
                                i == dup_at ? dup_of : i);
    snprintf(text + len, size - len, "%s", tail);
    return text;
}

Test(ccl_config_many, twenty_thousand_algorithms_load_in_file_order_and_are_found_by_name)
{
    char *text =
        many_algos(20000, SIZE_MAX, 0, "defaults:\n  algorithm: {all_reduce: algo_19999}\n");
    kb__ccl_config *c = load_ok(text, NULL, 0);
    free(text);
    cr_assert_eq(c->n_algos, 20000);
    char name[32];
    kb__err err;
    const kb__ccl_algo *a;
    for (size_t i = 0; i < 20000; i += 997) {
        snprintf(name, sizeof name, "algo_%zu", i);
        cr_assert_str_eq(c->algos[i].name, name);
        cr_assert_eq(kb__ccl_config_find(c, name, &a, &err), 0, "%s", err.msg);
        cr_assert_eq(a, &c->algos[i]);
    }
    cr_assert_eq(kb__ccl_config_find(c, "algo_19999", &a, &err), 0, "%s", err.msg);
    cr_assert_eq(a, &c->algos[19999]);
    cr_assert_eq(a->node->line, 20001);
    cr_assert_eq(kb__ccl_config_default(c, KB__CCL_ALL_REDUCE, &a, &err), 0);
    cr_assert_eq(a, &c->algos[19999]);
    cr_assert_eq(kb__ccl_config_find(c, "algo_20000", &a, &err), KB_ENOTFOUND);
    cr_assert(!strncmp(err.msg, "unknown collective algorithm 'algo_20000'", 41), "%s", err.msg);
    kb__ccl_config_destroy(c);
}

Test(ccl_config_many, did_you_mean_looks_at_every_algorithm)
{
    /* the closest name is the last of 200: a hint from the first 64 only
     * would name another algorithm */
    char *text = many_algos(200, SIZE_MAX, 0, "");
    kb__ccl_config *c = load_ok(text, NULL, 0);
    free(text);
    kb__err err;
    const kb__ccl_algo *a;
    cr_assert_eq(kb__ccl_config_find(c, "algo_1999", &a, &err), KB_ENOTFOUND);
    cr_assert(strstr(err.msg, "did you mean 'algo_199'?"), "%s", err.msg);
    /* the list keeps whole names and counts the rest */
    cr_assert(strstr(err.msg, "(ccl.yaml defines: algo_0, algo_1, "), "%s", err.msg);
    const char *more = strstr(err.msg, ", ... and ");
    cr_assert(more, "%s", err.msg);
    int shown = 0;
    for (const char *p = strstr(err.msg, "defines: "); p && p < more; p = strstr(p + 1, "algo_"))
        shown++;
    char tail[32];
    snprintf(tail, sizeof tail, ", ... and %d more)", 200 - (shown - 1));
    cr_assert(strstr(err.msg, tail), "%d shown, want '%s': %s", shown - 1, tail, err.msg);
    kb__ccl_config_destroy(c);
}

Test(ccl_config_many, a_duplicate_among_many_is_reported_at_its_second_occurrence)
{
    char *text = many_algos(20000, 15000, 17, "");
    load_bad(text, NULL,
             "bad.yaml:15002:3: algorithms.algo_17: duplicate key 'algo_17' (first "
             "at line 19)");
    free(text);
}

Test(ccl_config_many, thousands_of_overrides_change_and_add_algorithms)
{
    enum { FILE_ALGOS = 5000, NEW = 2000 };
    char *text = many_algos(FILE_ALGOS, SIZE_MAX, 0, "");
    static char sets_buf[NEW + 2][96];
    const char *sets[NEW + 2];
    for (int i = 0; i < NEW; i++) {
        snprintf(sets_buf[i], sizeof sets_buf[i],
                 "ccl.algorithms.extra_%d={module: tree_allreduce, topology: tree}", i);
        sets[i] = sets_buf[i];
    }
    sets[NEW] = "ccl.algorithms.algo_4999.n_slots=7";
    sets[NEW + 1] = "ccl.algorithms={algo_0: {n_slots: 9}, extra_1999: {n_slots: 5}, "
                    "last: {module: k, topology: ring_1d}}";
    kb__ccl_config *c = load_ok(text, sets, NEW + 2);
    free(text);
    cr_assert_eq(c->n_algos, FILE_ALGOS + NEW + 1);
    cr_assert_eq(c->algos[0].s.n_slots, 9);
    cr_assert_eq(c->algos[0].at[KB__CCL_F_N_SLOTS]->line, 0);
    cr_assert_eq(c->algos[4999].s.n_slots, 7);
    cr_assert_eq(c->algos[4998].s.n_slots, 4);
    cr_assert_str_eq(c->algos[FILE_ALGOS].name, "extra_0");
    cr_assert_str_eq(c->algos[FILE_ALGOS + NEW - 1].name, "extra_1999");
    cr_assert_eq(c->algos[FILE_ALGOS + NEW - 1].s.n_slots, 5);
    cr_assert_eq(c->algos[FILE_ALGOS + NEW - 1].topology, KB__CCL_TREE);
    cr_assert_str_eq(c->algos[FILE_ALGOS + NEW].name, "last");
    const kb__ccl_algo *a;
    kb__err err;
    cr_assert_eq(kb__ccl_config_find(c, "extra_1000", &a, &err), 0, "%s", err.msg);
    cr_assert_eq(a, &c->algos[FILE_ALGOS + 1000]);
    cr_assert_eq(kb__ccl_config_find(c, "last", &a, &err), 0, "%s", err.msg);
    kb__ccl_config_destroy(c);
}

/* ---- resolve against the machine ------------------------------------------ */

static const kb__ccl_algo *only(kb__ccl_config *c)
{
    cr_assert_eq(c->n_algos, 1);
    return &c->algos[0];
}

Test(ccl_resolve, default_world_size_is_every_pe_and_ipcq_sizes_come_from_the_machine)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = load_ok(ALG, NULL, 0);
    kb__ccl_resolved r;
    kb__err err;
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 0, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.s.world_size, kb__topo_pe_total(&p));
    cr_assert_eq(r.s.vc_chunk_size, p.pe.ipcq_vc_chunk_bytes);
    cr_assert_eq(r.s.credit_size, p.pe.ipcq_credit_bytes);
    cr_assert_eq(r.queue_bytes, 2ull * r.s.n_slots * r.s.slot_size);
    cr_assert_eq(r.capacity_bytes, p.pe.tcm_size - p.pe.tcm_reserved);
    kb__ccl_config_destroy(c);
}

Test(ccl_resolve, world_size_above_the_pe_count_points_at_the_file)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = load_ok(ALG "    world_size: 300\n", NULL, 0);
    kb__ccl_resolved r;
    kb__err err;
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 0, &r, &err), KB_ECONFIG);
    char want[256];
    snprintf(want, sizeof want,
             "t.yaml:5:17: algorithms.a.world_size: world size 300 is impossible on this "
             "machine: expected 1 to %llu ranks (its PE count)",
             (unsigned long long)kb__topo_pe_total(&p));
    cr_assert_str_eq(err.msg, want);
    kb__ccl_config_destroy(c);
}

Test(ccl_resolve, mesh_world_size_must_form_a_rectangle)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c =
        load_ok("algorithms:\n  m:\n    module: k\n    topology: mesh_2d\n", NULL, 0);
    kb__ccl_resolved r;
    kb__err err;
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 7, &r, &err), KB_ECONFIG);
    cr_assert_str_eq(err.msg, "algorithm 'm': world_size (requested by the caller): mesh_2d needs "
                              "a world size R x C with R, C >= 2 (a rectangle of ranks); 7 is "
                              "not (nearest: 6 or 8)");
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 12, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.grid_rows, 3);
    cr_assert_eq(r.grid_cols, 4);
    kb__ccl_config_destroy(c);
}

Test(ccl_resolve, queues_that_do_not_fit_tcm_point_at_slot_size)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = load_ok(ALG "    n_slots: 100\n    slot_size: 64KiB\n", NULL, 0);
    kb__ccl_resolved r;
    kb__err err;
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 8, &r, &err), KB_ECONFIG);
    char want[512];
    unsigned long long need = 100ull * 65536 * 2, cap = p.pe.tcm_size - p.pe.tcm_reserved;
    cr_assert_gt(need, cap);
    snprintf(want, sizeof want,
             "t.yaml:6:16: algorithms.a.slot_size: receive queues do not fit: n_slots 100 x "
             "slot_size 65536 x 2 neighbours (ring_1d) = %llu bytes per rank, but tcm buffers "
             "hold %llu bytes (usable TCM per PE (pe.tcm.size - pe.tcm.reserved))",
             need, cap);
    cr_assert_str_eq(err.msg, want);
    kb__ccl_config_destroy(c);
}

/* The file's slot_size fits; an override of n_slots makes the queues too big:
 * the message points at the override the user typed, not at the file. */
Test(ccl_resolve, queues_that_do_not_fit_point_at_the_override)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    const char *set = "ccl.algorithms.a.n_slots=1000";
    kb__ccl_config *c = load_ok(ALG "    n_slots: 2\n    slot_size: 64KiB\n", &set, 1);
    kb__ccl_resolved r;
    kb__err err;
    cr_assert_gt(1000ull * 65536 * 2, p.pe.tcm_size - p.pe.tcm_reserved);
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 8, &r, &err), KB_ECONFIG);
    cr_assert(strstr(err.msg, "--set ccl.algorithms.a.n_slots=1000") == err.msg, "%s", err.msg);
    cr_assert(strstr(err.msg, "receive queues do not fit: n_slots 1000 x slot_size 65536"), "%s",
              err.msg);
    kb__ccl_config_destroy(c);
}

Test(ccl_resolve, sram_is_shared_by_the_ranks_of_a_cube)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    /* 8 ranks x 4 neighbours x n_slots x 64 KiB must exceed 32 MiB: n = 17 */
    uint64_t per_rank = p.cube.sram_size / kb__topo_pes_per_cube(&p);
    uint64_t slots = per_rank / (4 * 65536) + 1;
    char text[256];
    snprintf(text, sizeof text,
             "algorithms:\n  m:\n    module: k\n    topology: mesh_2d\n    buffer_kind: sram\n"
             "    slot_size: 64KiB\n    n_slots: %llu\n",
             (unsigned long long)slots);
    kb__ccl_config *c = load_ok(text, NULL, 0);
    kb__ccl_resolved r;
    kb__err err;
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 16, &r, &err), KB_ECONFIG);
    cr_assert(strstr(err.msg, "t.yaml:6:16: algorithms.m.slot_size: receive queues do not fit"),
              "%s", err.msg);
    /* a world of 4 ranks shares the SRAM among 4 only, so it fits */
    cr_assert_eq(kb__ccl_resolve(only(c), &p, 4, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.capacity_bytes, p.cube.sram_size / 4);
    kb__ccl_config_destroy(c);
}
