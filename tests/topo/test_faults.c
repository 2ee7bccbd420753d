/*
 * test_faults.c — the `faults:` section: what it accepts, how it is written
 * back, what it refuses (each message names the key, the value and what
 * exists), and how the machine graph bakes it into its links.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"

static int load(kb__topo_params *p, const char *const *sets, size_t n, kb__err *err)
{
    kb__err_clear(err);
    return kb__topo_params_load(p, NULL, sets, n, err);
}

static const char *const ALL[] = {
    ("faults.slow_pes=[{sip: 0, cube: 3, pe: 5, factor: 0.5}, {sip: 1, cube: 0, pe: 0, factor: "
     "0.25}]"),
    "faults.slow_hbm=[{sip: 1, cube: 15, slice: 7, factor: 0.125}]",
    "faults.slow_links=[{from: sip0.cube0.router, to: sip0.cube1.router, factor: 0.3}]",
    "faults.down_links=[{from: sip0.cube6.router, to: sip0.cube5.router}]",
    "faults.late_ranks=[{rank: 1, delay_ns: 2.5us}]",
};

Test(faults, every_list_is_read_with_its_values)
{
    kb__topo_params p;
    kb__err err;
    cr_assert_eq(load(&p, ALL, 5, &err), 0, "%s", err.msg);
    const kb__topo_faults *f = &p.faults;
    cr_assert_eq(f->n_pes, 2);
    cr_assert_eq(f->pes[0].sip, 0);
    cr_assert_eq(f->pes[0].cube, 3);
    cr_assert_eq(f->pes[0].unit, 5);
    cr_assert_eq(f->pes[0].factor, 0.5);
    cr_assert_eq(f->pes[1].factor, 0.25);
    cr_assert_eq(f->n_hbm, 1);
    cr_assert_eq(f->hbm[0].unit, 7);
    cr_assert_eq(f->n_links, 2);
    cr_assert_str_eq(f->links[0].from, "sip0.cube0.router");
    cr_assert_eq(f->links[0].factor, 0.3);
    cr_assert_str_eq(f->links[1].from, "sip0.cube6.router");
    cr_assert_eq(f->links[1].factor, 0, "down");
    cr_assert_eq(f->n_ranks, 1);
    cr_assert_eq(f->ranks[0].delay_ns, 2500.0);
    cr_assert_eq(kb__topo_fault_pe_factor(&p, 0, 3, 5), 0.5);
    cr_assert_eq(kb__topo_fault_pe_factor(&p, 0, 3, 4), 1.0);
    cr_assert_eq(kb__topo_fault_hbm_factor(&p, 1, 15, 7), 0.125);
    cr_assert_eq(kb__topo_fault_rank_delay_ns(&p, 1), 2500.0);
    cr_assert_eq(kb__topo_fault_rank_delay_ns(&p, 0), 0.0);
}

Test(faults, the_text_loads_back_to_the_same_faults)
{
    kb__topo_params p, q;
    kb__err err;
    cr_assert_eq(load(&p, ALL, 5, &err), 0, "%s", err.msg);
    char *text;
    cr_assert_eq(kb__topo_params_text(&p, &text, &err), 0);
    /* every line is a --set argument */
    const char *lines[512];
    size_t n = 0;
    for (char *s = strtok(text, "\n"); s && n < 512; s = strtok(NULL, "\n"))
        lines[n++] = s;
    cr_assert_eq(load(&q, lines, n, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(&p.faults, &q.faults, sizeof p.faults), 0);
    free(text);
}

Test(faults, a_machine_without_faults_writes_no_faults_line)
{
    kb__topo_params p;
    kb__err err;
    cr_assert_eq(load(&p, NULL, 0, &err), 0, "%s", err.msg);
    char *text;
    cr_assert_eq(kb__topo_params_text(&p, &text, &err), 0);
    cr_assert_null(strstr(text, "faults"), "the built-in machine's text (and hash) is unchanged");
    free(text);
    cr_assert_not(kb__topo_faults_any(&p));
    const char *empty[] = {"faults.slow_pes=[]", "faults.down_links=[]"};
    cr_assert_eq(load(&p, empty, 2, &err), 0, "%s", err.msg);
    cr_assert_not(kb__topo_faults_any(&p));
    const char *yaml = "faults:\n  late_ranks:\n";
    cr_assert_eq(kb__topo_params_load_string(&p, "m.yaml", yaml, strlen(yaml), NULL, 0, &err), 0,
                 "%s", err.msg);
    cr_assert_not(kb__topo_faults_any(&p));
}

/* Each bad input, and what its message must name. */
static const struct {
    const char *set;
    const char *want[3];
} BAD[] = {
    {"faults.slow_pes=[{sip: 2, cube: 0, pe: 0, factor: 0.5}]",
     {"faults.slow_pes[0].sip", "no sip 2", "SIPs 0..1"}},
    {"faults.slow_pes=[{sip: 0, cube: 16, pe: 0, factor: 0.5}]",
     {"faults.slow_pes[0].cube", "no cube 16", "cubes per SIP 0..15"}},
    {"faults.slow_pes=[{sip: 0, cube: 0, pe: 8, factor: 0.5}]",
     {"faults.slow_pes[0].pe", "no pe 8", "PEs per cube 0..7"}},
    {"faults.slow_hbm=[{sip: 0, cube: 0, slice: 8, factor: 0.5}]",
     {"slice", "no slice 8", "HBM slices per cube 0..7"}},
    {"faults.slow_pes=[{sip: 0, cube: 0, pe: 0, factor: 1.5}]",
     {"faults.slow_pes[0].factor", "between 0.001 and 1", "'1.5'"}},
    {"faults.slow_links=[{from: sip0.cube0.router, to: sip0.cube1.router, factor: 0}]",
     {"factor", "faults.down_links", NULL}},
    {"faults.slow_pes=[{sip: 0, cube: 0, pe: 0, factor: fast}]",
     {"faults.slow_pes[0].factor", "expected a number", "'fast'"}},
    {"faults.slow_pes=[{sip: 0, cube: 0, pe: 0}]",
     {"faults.slow_pes[0]", "missing key 'factor'", "sip, cube, pe, factor"}},
    {"faults.slow_pes=[{sip: 0, cube: 0, pe: 0, factr: 0.5}]",
     {"faults.slow_pes[0].factr", "unknown key 'factr'", "did you mean 'factor'"}},
    {"faults.slow_pe=[]", {"faults.slow_pe", "unknown key 'slow_pe'", "did you mean 'slow_pes'"}},
    {"faults.down_links=[{from: sip0.cube5.rooter, to: sip0.cube6.router}]",
     {"faults.down_links[0].from", "no node 'sip0.cube5.rooter'", "'sip0.cube5.router'"}},
    {"faults.down_links=[{from: sip9.cube99.router, to: sip0.cube6.router}]",
     {"no node 'sip9.cube99.router'", "SIPs 0..1", "cubes 0..15"}},
    {"faults.down_links=[{from: sip0.cube5.router, to: sip0.cube7.router}]",
     {"faults.down_links[0]", "no link between sip0.cube5.router and sip0.cube7.router",
      "sip0.cube6.router"}},
    {"faults.down_links=[{from: sip0.cube0.router, to: sip0.cube1.router}, {from: "
     "sip0.cube1.router, to: sip0.cube0.router}]",
     {"faults.down_links[1]", "already listed", NULL}},
    {"faults.slow_pes=[{sip: 0, cube: 0, pe: 1, factor: 0.5}, {sip: 0, cube: 0, pe: 1, factor: "
     "0.7}]",
     {"faults.slow_pes[1]", "sip0.cube0.pe1 is already listed", NULL}},
    {"faults.late_ranks=[{rank: 70000, delay_ns: 1us}]",
     {"faults.late_ranks[0].rank", "no rank 70000", NULL}},
    {"faults.late_ranks=[{rank: 0, delay_ns: soon}]", {"faults.late_ranks[0].delay_ns", NULL}},
    {"faults.late_ranks=[{rank: 0, delay_ns: 1us}, {rank: 0, delay_ns: 2us}]",
     {"rank 0 is already listed", NULL}},
    {"faults=3", {"faults", "expected a section", NULL}},
    {"faults.slow_pes={sip: 0}", {"faults.slow_pes", "expected a sequence", NULL}},
    {"faults.slow_pes=[3]", {"faults.slow_pes[0]", "expected a mapping", NULL}},
    {"faultz.x=1", {"unknown key 'faultz'", "did you mean 'faults'", NULL}},
};

Test(faults, every_bad_entry_is_refused_naming_key_value_and_what_exists)
{
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        kb__topo_params p;
        kb__err err;
        cr_assert_eq(load(&p, &BAD[i].set, 1, &err), KB_ECONFIG, "%s: accepted", BAD[i].set);
        cr_expect(strstr(err.msg, "--set ") == err.msg, "%s: %s", BAD[i].set, err.msg);
        for (int k = 0; k < 3 && BAD[i].want[k]; k++)
            cr_expect(strstr(err.msg, BAD[i].want[k]), "%s: '%s' not in: %s", BAD[i].set,
                      BAD[i].want[k], err.msg);
    }
}

Test(faults, more_entries_than_the_limit_are_refused)
{
    char set[8192] = "faults.late_ranks=[";
    for (int i = 0; i <= KB__FAULTS_MAX; i++)
        snprintf(set + strlen(set), sizeof set - strlen(set), "%s{rank: %d, delay_ns: 1}",
                 i ? ", " : "", i);
    strcat(set, "]");
    const char *s = set;
    kb__topo_params p;
    kb__err err;
    cr_assert_eq(load(&p, &s, 1, &err), KB_ECONFIG);
    cr_assert(strstr(err.msg, "at most 32 entries"), "%s", err.msg);
}

Test(faults, a_file_error_names_file_line_and_column)
{
    const char *yaml = "faults:\n  slow_pes:\n    - {sip: 0, cube: 99, pe: 0, factor: 0.5}\n";
    kb__topo_params p;
    kb__err err;
    cr_assert_eq(kb__topo_params_load_string(&p, "m.yaml", yaml, strlen(yaml), NULL, 0, &err),
                 KB_ECONFIG);
    cr_assert(strstr(err.msg, "m.yaml:3:") == err.msg, "%s", err.msg);
    cr_assert(strstr(err.msg, "faults.slow_pes[0].cube"), "%s", err.msg);
}

/* The graph of the built-in machine with sets applied. */
static kb__topo *graph(const char *const *sets, size_t n)
{
    kb__topo_params p;
    kb__err err;
    kb__topo *t;
    cr_assert_eq(load(&p, sets, n, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__topo_build(&t, &p, &err), 0, "%s", err.msg);
    return t;
}

static uint32_t link_between(const kb__topo *t, const char *a, const char *b)
{
    int32_t x = kb__topo_find(t, a), y = kb__topo_find(t, b);
    cr_assert(x >= 0 && y >= 0);
    int32_t id = kb__topo_link_id(t, (uint32_t)x, (uint32_t)y);
    cr_assert_geq(id, 0);
    return (uint32_t)id;
}

Test(faults, the_graph_bakes_slow_and_down_links_into_both_directions_and_nothing_else)
{
    kb__topo *ok = graph(NULL, 0), *t = graph(ALL, 5);
    const kb__topo_params *p = &t->params;
    cr_assert_eq(ok->n_links, t->n_links, "a down link stays in the graph");
    uint32_t slow = link_between(t, "sip0.cube0.router", "sip0.cube1.router");
    uint32_t down = link_between(t, "sip0.cube6.router", "sip0.cube5.router");
    uint32_t hbm = link_between(t, "sip1.cube15.xbar", "sip1.cube15.hbm7");
    for (uint32_t i = 0; i < t->n_links; i++) {
        const kb__topo_link *l = &t->links[i], *o = &ok->links[i];
        uint32_t pair = i < l->reverse ? i : l->reverse;
        double want = o->bw_gbs;
        if (pair == (slow < t->links[slow].reverse ? slow : t->links[slow].reverse))
            want = p->sip.ucie.bw_gbs * 0.3;
        if (pair == (hbm < t->links[hbm].reverse ? hbm : t->links[hbm].reverse))
            want = p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency * 0.125;
        cr_assert_eq(l->bw_gbs, want, "link %u (%s -> %s)", i, t->nodes[l->from].name,
                     t->nodes[l->to].name);
        int is_down = pair == (down < t->links[down].reverse ? down : t->links[down].reverse);
        cr_assert_eq(l->down, is_down, "link %u", i);
        cr_assert_eq(l->overhead_ps, o->overhead_ps, "a fault changes no overhead");
        cr_assert_eq(l->wire_ps, o->wire_ps);
    }
    kb__topo_destroy(ok);
    kb__topo_destroy(t);
}
