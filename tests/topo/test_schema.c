/*
 * Topology schema: the built-in machine equals configs/topology.yaml, the
 * file and docs cover every parameter, and bad input is reported with the
 * exact FILE:LINE:COL, key path and a useful hint.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pe/pe_timing.h"
#include "topo/kinds.h"
#include "topo/params.h"
#include "support/files.h"

extern const char kb__embedded_topology[];
extern const unsigned long kb__embedded_topology_len;

static size_t field_size(const kb__param *e)
{
    switch (e->type) {
    case KB__PT_U32:
        return 4;
    case KB__PT_MESH:
        return 8;
    case KB__PT_KIND:
        return 2;
    default:
        return 8;
    }
}

static void assert_same_params(const kb__topo_params *a, const kb__topo_params *b)
{
    for (size_t i = 0; i < kb__topo_schema_count(); i++) {
        const kb__param *e = kb__topo_schema_get(i);
        cr_assert_eq(
            memcmp((const char *)a + e->offset, (const char *)b + e->offset, field_size(e)), 0,
            "%s differs", e->path);
    }
}

Test(schema, default_file_gives_exactly_the_builtin_machine)
{
    kb__topo_params from_file, builtin;
    kb__err err;
    kb__err_clear(&err);
    cr_assert_eq(
        kb__topo_params_load(&from_file, KB_SOURCE_DIR "/configs/topology.yaml", NULL, 0, &err), 0,
        "%s", err.msg);
    kb__topo_params_default(&builtin);
    assert_same_params(&from_file, &builtin);
}

Test(schema, default_file_spells_out_every_parameter)
{
    kb__cfg *cfg;
    kb__err err;
    cr_assert_eq(kb__cfg_parse_file(&cfg, KB_SOURCE_DIR "/configs/topology.yaml", &err), 0);
    for (size_t i = 0; i < kb__topo_schema_count(); i++) {
        const char *path = kb__topo_schema_get(i)->path;
        cr_assert_not_null(kb__cfg_lookup(kb__cfg_root(cfg), path), "%s missing", path);
    }
    kb__cfg_destroy(cfg);
}

Test(schema, embedded_copy_equals_the_file_bytes)
{
    size_t len;
    char *file = kb_test_slurp(KB_SOURCE_DIR "/configs/topology.yaml", &len);
    cr_assert_eq(kb__embedded_topology_len, len);
    cr_assert_eq(memcmp(kb__embedded_topology, file, len), 0);
    free(file);
}

Test(schema, docs_describe_every_parameter_and_kind)
{
    size_t len;
    char *doc = kb_test_slurp(KB_SOURCE_DIR "/docs/topology.md", &len);
    char want[160];
    for (size_t i = 0; i < kb__topo_schema_count(); i++) {
        snprintf(want, sizeof want, "| `%s` |", kb__topo_schema_get(i)->path);
        cr_assert(strstr(doc, want), "docs/topology.md lacks a row for %s", want);
    }
    for (size_t i = 0; i < kb__kind_count(); i++) {
        snprintf(want, sizeof want, "| `%s` |", kb__kind_get(i)->name);
        cr_assert(strstr(doc, want), "docs/topology.md lacks kind %s", want);
    }
    free(doc);
}

Test(schema, every_default_lies_in_its_range)
{
    kb__topo_params p;
    kb__err err;
    /* Loading with no file validates the defaults through the same checks. */
    cr_assert_eq(kb__topo_params_load(&p, NULL, NULL, 0, &err), 0, "%s", err.msg);
}

static kb__topo_params load_text(const char *text, int *rc, kb__err *err)
{
    kb__topo_params p;
    kb__err_clear(err);
    *rc = kb__topo_params_load_string(&p, "m.yaml", text, strlen(text), NULL, 0, err);
    return p;
}

Test(schema, file_values_override_defaults_and_others_stay)
{
    int rc;
    kb__err err;
    kb__topo_params p = load_text("pe:\n  gemm:\n    rows: 128\n    clock_ghz: 1.5\n"
                                  "host:\n  pcie: {bw_gbs: 1TB/s, overhead_ns: 0.25us}\n",
                                  &rc, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    kb__topo_params d;
    kb__topo_params_default(&d);
    cr_assert_eq(p.pe.gemm_rows, 128);
    cr_assert_eq(p.pe.gemm_clock_ghz, 1.5);
    cr_assert_eq(p.host.pcie.bw_gbs, 1000);
    cr_assert_eq(p.host.pcie.overhead_ns, 250);
    cr_assert_eq(p.pe.gemm_cols, d.pe.gemm_cols);
    cr_assert_eq(p.host.pcie.length_mm, d.host.pcie.length_mm);
}

Test(schema, overrides_apply_in_order_after_the_file)
{
    kb__topo_params p;
    kb__err err;
    const char *sets[] = {"cube.hbm.efficiency=0.5", "sip.cube_mesh=2x8",
                          "cube.hbm.efficiency=0.25", "pe.tcm={size: 8MiB, reserved: 1MiB}"};
    cr_assert_eq(kb__topo_params_load(&p, KB_SOURCE_DIR "/configs/topology.yaml", sets, 4, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(p.cube.hbm_efficiency, 0.25);
    cr_assert_eq(p.sip.mesh_rows, 2);
    cr_assert_eq(p.sip.mesh_cols, 8);
    cr_assert_eq(p.pe.tcm_size, 8u << 20);
    cr_assert_eq(p.pe.tcm_reserved, 1u << 20);
    cr_assert_eq(p.pe.tcm_bw_gbs, 512);
}

Test(schema, kinds_choose_implementations_by_name)
{
    int rc;
    kb__err err;
    kb__topo_params p = load_text("cube:\n  router: {kind: transit}\n", &rc, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(p.cube.router_kind, kb__kind_find("transit"));
    cr_assert_eq(p.cube.xbar_kind, kb__kind_default(KB__ROLE_XBAR));
    cr_assert_eq(p.pe.dma_kind, kb__kind_find("dma"));
}

/* ---- errors: exact location, path and message ----------------------------- */

static void fails(const char *text, const char *expect)
{
    int rc;
    kb__err err;
    load_text(text, &rc, &err);
    cr_assert_eq(rc, KB_ECONFIG, "no error for:\n%s", text);
    cr_assert_str_eq(err.msg, expect);
}

static void set_fails(const char *set, const char *expect)
{
    kb__topo_params p;
    kb__err err;
    kb__err_clear(&err);
    const char *sets[] = {set};
    cr_assert_eq(kb__topo_params_load(&p, NULL, sets, 1, &err), KB_ECONFIG, "%s", set);
    cr_assert_str_eq(err.msg, expect);
}

Test(schema_errors, wrong_type)
{
    fails("cube:\n  pe_layout:\n    pe_per_corner: two\n",
          "m.yaml:3:20: cube.pe_layout.pe_per_corner: expected a non-negative integer, got 'two'");
}

Test(schema_errors, negative_size)
{
    fails("pe:\n  tcm:\n    size: -4MiB\n",
          "m.yaml:3:11: pe.tcm.size: expected a size in bytes (a whole number, optionally with "
          "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB), got '-4MiB'");
}

Test(schema_errors, negative_time)
{
    fails("cube:\n  router:\n    overhead_ns: -2\n",
          "m.yaml:3:18: cube.router.overhead_ns: must be >= 0, got '-2'");
}

Test(schema_errors, zero_bandwidth)
{
    fails("sip:\n  ucie: {bw_gbs: 0}\n", "m.yaml:2:18: sip.ucie.bw_gbs: must be > 0, got '0'");
}

Test(schema_errors, unknown_key_with_did_you_mean)
{
    fails("cube:\n  hbmm:\n    slices: 8\n",
          "m.yaml:2:3: cube.hbmm: unknown key 'hbmm'; did you mean 'hbm'?");
}

Test(schema_errors, unknown_key_without_a_close_name_lists_the_keys)
{
    fails("fabric:\n  zzzzzzzzzz: 1\n",
          "m.yaml:2:3: fabric.zzzzzzzzzz: unknown key 'zzzzzzzzzz'; known keys here: "
          "packet_bytes, header_bytes, ns_per_mm, model, ring_warmup");
}

Test(schema_errors, section_with_the_wrong_type)
{
    fails("cube: 5\n", "m.yaml:1:7: cube: expected a section (a mapping of keys), got '5'");
    fails("pe:\n  gemm: [1, 2]\n",
          "m.yaml:2:9: pe.gemm: expected a section (a mapping of keys), got a sequence");
}

Test(schema_errors, empty_section_keeps_defaults)
{
    int rc;
    kb__err err;
    kb__topo_params p = load_text("cube:\npe:\n  gemm:\n", &rc, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(p.pe.gemm_rows, 64);
}

Test(schema_errors, malformed_yaml)
{
    fails("cube:\n  hbm: {slices: 8\n",
          "m.yaml:3:1: while parsing a flow mapping did not find expected ',' or '}'");
}

Test(schema_errors, malformed_and_empty_mesh)
{
    fails("sip:\n  cube_mesh: 4by4\n",
          "m.yaml:2:14: sip.cube_mesh: expected a mesh 'RxC' with R, C >= 1, got '4by4'");
    fails("sip:\n  cube_mesh: 0x4\n",
          "m.yaml:2:14: sip.cube_mesh: expected a mesh 'RxC' with R, C >= 1, got '0x4'");
}

Test(schema_errors, capacity_not_divisible_by_slices)
{
    fails("cube:\n  hbm:\n    capacity: 1001\n",
          "m.yaml:3:15: cube.hbm.capacity: cube.hbm.capacity (1001 bytes) must divide evenly "
          "over 8 slices");
}

Test(schema_errors, efficiency_above_one)
{
    fails("cube:\n  hbm:\n    efficiency: 1.5\n",
          "m.yaml:3:17: cube.hbm.efficiency: must be <= 1, got '1.5'");
}

Test(schema_errors, bad_unit)
{
    fails("host:\n  pcie:\n    bw_gbs: 64GiB/s\n",
          "m.yaml:3:13: host.pcie.bw_gbs: expected a bandwidth (a number of GB/s, or with KB/s, "
          "MB/s, GB/s or TB/s), got '64GiB/s'");
    fails("host:\n  dispatch_ns: 5 sec\n",
          "m.yaml:2:16: host.dispatch_ns: expected a time (a number of ns, or with ps, ns, us, "
          "ms or s), got '5 sec'");
}

Test(schema_errors, duplicate_key)
{
    fails("pe:\n  dma:\n    channels: 2\n    channels: 4\n",
          "m.yaml:4:5: pe.dma.channels: duplicate key 'channels' (first at line 3)");
}

Test(schema_errors, unknown_kind_with_did_you_mean)
{
    fails("cube:\n  router:\n    kind: routr\n",
          "m.yaml:3:11: cube.router.kind: unknown kind 'routr'; did you mean 'router'?");
}

Test(schema_errors, unknown_fabric_model_lists_the_models)
{
    fails("fabric:\n  model: zzzz\n",
          "m.yaml:2:10: fabric.model: unknown kind 'zzzz'; kinds for fabric: packet, flow");
}

Test(schema_errors, a_component_kind_is_no_fabric_model)
{
    fails("fabric:\n  model: router\n",
          "m.yaml:2:10: fabric.model: kind 'router' cannot serve as fabric; kinds that can: "
          "packet, flow");
}

Test(schema, fabric_model_is_chosen_by_name)
{
    int rc;
    kb__err err;
    kb__topo_params p = load_text("fabric:\n  model: flow\n", &rc, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(p.fabric.model, kb__kind_find("flow"));
    p = load_text("fabric:\n  ns_per_mm: 0.01\n", &rc, &err);
    cr_assert_eq(p.fabric.model, kb__kind_find("packet"), "packet is the default");
}

Test(schema_errors, kind_that_cannot_serve_the_role)
{
    fails("cube:\n  hbm:\n    kind: transit\n",
          "m.yaml:3:11: cube.hbm.kind: kind 'transit' cannot serve as hbm_ctrl; kinds that can: "
          "hbm_ctrl");
}

Test(schema_errors, cross_rules_point_at_the_key_written)
{
    fails("cube:\n  hbm:\n    slices: 6\n",
          "m.yaml:3:13: cube.hbm.slices: cube.hbm.slices (6) must equal PEs per cube (corners x "
          "pe_per_corner = 8)");
    fails("io_chiplet:\n  attach_cube: 16\n",
          "m.yaml:2:16: io_chiplet.attach_cube: io_chiplet.attach_cube (16) must be < cubes per "
          "SIP (16)");
    fails("pe:\n  tcm:\n    reserved: 16MiB\n",
          "m.yaml:3:15: pe.tcm.reserved: pe.tcm.reserved (16777216 bytes) must be < pe.tcm.size "
          "(16777216 bytes)");
    fails("pe:\n  mmu:\n    page_size: 3000\n",
          "m.yaml:3:16: pe.mmu.page_size: must be a power of two, got 3000");
    fails("cube:\n  pe_layout:\n    pe_per_corner: 0\n",
          "m.yaml:3:20: cube.pe_layout.pe_per_corner: must be >= 1, got '0'");
}

Test(schema_errors, bad_set_path_names_the_argument_with_did_you_mean)
{
    set_fails("cube.hbm.efficiency_x=0.9",
              "--set cube.hbm.efficiency_x=0.9: cube.hbm.efficiency_x: unknown key "
              "'efficiency_x'; did you mean 'efficiency'?");
    set_fails("cube.hbmm.slices=8",
              "--set cube.hbmm.slices=8: cube.hbmm: unknown key 'hbmm'; did you mean 'hbm'?");
}

Test(schema_errors, bad_set_value_names_the_argument)
{
    set_fails("cube.hbm.efficiency=lots",
              "--set cube.hbm.efficiency=lots: cube.hbm.efficiency: expected a number, got "
              "'lots'");
    set_fails("sip.cube_mesh=4x0",
              "--set sip.cube_mesh=4x0: sip.cube_mesh: expected a mesh 'RxC' with R, C >= 1, got "
              "'4x0'");
    set_fails("cube.hbm.slices=4",
              "--set cube.hbm.slices=4: cube.hbm.slices: cube.hbm.slices (4) must equal PEs per "
              "cube (corners x pe_per_corner = 8)");
}

Test(schema, a_switch_takes_on_or_off_and_nothing_else)
{
    int rc;
    kb__err err;
    kb__topo_params d;
    kb__topo_params_default(&d);
    cr_assert_eq(d.pe.cpu_pipeline, 1, "pe.cpu.pipeline defaults to on");
    kb__topo_params p = load_text("pe:\n  cpu:\n    pipeline: off\n", &rc, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(p.pe.cpu_pipeline, 0);
    kb__pe_params pp;
    cr_assert_eq(kb__pe_params_from_topo(&p, &pp, &err), 0, "%s", err.msg);
    cr_assert(!pp.cpu.pipeline);
    fails("pe:\n  cpu:\n    pipeline: yes\n",
          "m.yaml:3:15: pe.cpu.pipeline: expected on or off, got 'yes'");
    fails("pe:\n  cpu:\n    pipeline: [on]\n",
          "m.yaml:3:15: pe.cpu.pipeline: expected on or off, got a sequence");
}
