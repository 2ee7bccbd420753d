/*
 * Install plan: for every topology and world size the rank -> PE map is a
 * bijection onto distinct PEs, the neighbour tables are symmetric, ring
 * neighbours are physically adjacent where the placement order promises
 * it, and the install message has the documented size and layout.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/plan.h"

static const uint32_t sizes[] = {2, 4, 8, 16, 32, 128, 256};

static kb__ccl_config *cfg(void)
{
    kb__ccl_config *c;
    kb__err err;
    const char *text = "algorithms:\n"
                       "  ring: {module: ring_allreduce, topology: ring_1d}\n"
                       "  mesh: {module: mesh_allreduce, topology: mesh_2d}\n"
                       "  tree: {module: tree_allreduce, topology: tree}\n";
    cr_assert_eq(kb__ccl_config_load_string(&c, "t.yaml", text, strlen(text), NULL, 0, &err), 0,
                 "%s", err.msg);
    return c;
}

static kb__ccl_plan *plan_for(kb__ccl_config *c, const kb__topo_params *p, size_t algo, uint32_t ws)
{
    kb__ccl_resolved r;
    kb__ccl_plan *pl;
    kb__err err;
    cr_assert_eq(kb__ccl_resolve(&c->algos[algo], p, ws, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_plan_build(&pl, p, &r, &err), 0, "%s", err.msg);
    return pl;
}

static void assert_bijection(const kb__ccl_plan *pl, const kb__topo_params *p)
{
    uint64_t total = kb__topo_pe_total(p);
    uint32_t per_cube = kb__topo_pes_per_cube(p), cubes = kb__topo_cubes_per_sip(p);
    char *seen = calloc(total, 1);
    for (uint32_t r = 0; r < pl->world_size; r++) {
        kb__ccl_loc l = pl->loc[r];
        cr_assert_lt(l.sip, p->system.sips);
        cr_assert_lt(l.cube, cubes);
        cr_assert_lt(l.pe, per_cube);
        uint64_t flat = ((uint64_t)l.sip * cubes + l.cube) * per_cube + l.pe;
        cr_assert_eq(seen[flat], 0, "rank %u shares a PE", r);
        seen[flat] = 1;
        cr_assert_eq(kb__ccl_plan_rank_at(pl, l), (int32_t)r);
    }
    free(seen);
}

static int peer(const kb__ccl_plan *pl, uint32_t r, kb__ccl_dir d)
{
    return pl->ports[r][d].peer;
}

static void assert_port_locations(const kb__ccl_plan *pl)
{
    for (uint32_t r = 0; r < pl->world_size; r++)
        for (int d = 0; d < KB__CCL_DIR_COUNT; d++) {
            const kb__ccl_port *pt = &pl->ports[r][d];
            if (pt->peer < 0) continue;
            kb__ccl_loc a = pl->loc[r], b = pl->loc[pt->peer];
            cr_assert(pt->loc.sip == b.sip && pt->loc.cube == b.cube && pt->loc.pe == b.pe);
            kb__ccl_path want = a.sip != b.sip     ? KB__CCL_PATH_CROSS_SIP
                                : a.cube != b.cube ? KB__CCL_PATH_CROSS_CUBE
                                                   : KB__CCL_PATH_SAME_CUBE;
            cr_assert_eq(pt->path, want);
        }
}

Test(ccl_plan, ring_prev_and_next_are_symmetric_for_every_size)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        kb__ccl_plan *pl = plan_for(c, &p, 0, sizes[i]);
        assert_bijection(pl, &p);
        assert_port_locations(pl);
        for (uint32_t r = 0; r < pl->world_size; r++) {
            int nx = peer(pl, r, KB__CCL_E), pv = peer(pl, r, KB__CCL_W);
            cr_assert_eq(nx, (int)((r + 1) % sizes[i]));
            cr_assert_eq(peer(pl, (uint32_t)nx, KB__CCL_W), (int)r, "ws %u rank %u", sizes[i], r);
            cr_assert_eq(peer(pl, (uint32_t)pv, KB__CCL_E), (int)r);
            cr_assert_eq(peer(pl, r, KB__CCL_N), -1);
        }
        kb__ccl_plan_destroy(pl);
    }
    kb__ccl_config_destroy(c);
}

Test(ccl_plan, mesh_ports_are_symmetric_and_follow_the_grid)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    for (size_t i = 1; i < sizeof sizes / sizeof *sizes; i++) { /* 2 is not a rectangle */
        kb__ccl_plan *pl = plan_for(c, &p, 1, sizes[i]);
        assert_bijection(pl, &p);
        assert_port_locations(pl);
        uint32_t rows = pl->r.grid_rows, cols = pl->r.grid_cols;
        cr_assert_eq(rows * cols, sizes[i]);
        cr_assert(rows >= 2 && rows <= cols);
        uint32_t links = 0;
        for (uint32_t r = 0; r < pl->world_size; r++) {
            int n = peer(pl, r, KB__CCL_N), s = peer(pl, r, KB__CCL_S);
            int e = peer(pl, r, KB__CCL_E), w = peer(pl, r, KB__CCL_W);
            if (n >= 0) cr_assert_eq(peer(pl, (uint32_t)n, KB__CCL_S), (int)r);
            if (s >= 0) cr_assert_eq(peer(pl, (uint32_t)s, KB__CCL_N), (int)r);
            if (e >= 0) cr_assert_eq(peer(pl, (uint32_t)e, KB__CCL_W), (int)r);
            if (w >= 0) cr_assert_eq(peer(pl, (uint32_t)w, KB__CCL_E), (int)r);
            cr_assert_eq(n >= 0, r / cols > 0);
            cr_assert_eq(w >= 0, r % cols > 0);
            links += (e >= 0) + (s >= 0);
        }
        cr_assert_eq(links, rows * (cols - 1) + cols * (rows - 1));
        kb__ccl_plan_destroy(pl);
    }
    kb__ccl_config_destroy(c);
}

Test(ccl_plan, tree_parent_and_children_are_symmetric)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        kb__ccl_plan *pl = plan_for(c, &p, 2, sizes[i]);
        assert_bijection(pl, &p);
        assert_port_locations(pl);
        uint32_t children = 0;
        for (uint32_t r = 0; r < pl->world_size; r++) {
            int par = peer(pl, r, KB__CCL_N);
            cr_assert_eq(par < 0, r == 0);
            if (par >= 0)
                cr_assert(peer(pl, (uint32_t)par, KB__CCL_W) == (int)r ||
                          peer(pl, (uint32_t)par, KB__CCL_E) == (int)r);
            for (int d = KB__CCL_E; d <= KB__CCL_W; d += 2) {
                int ch = peer(pl, r, (kb__ccl_dir)d);
                if (ch < 0) continue;
                children++;
                cr_assert_eq(peer(pl, (uint32_t)ch, KB__CCL_N), (int)r);
            }
        }
        cr_assert_eq(children, sizes[i] - 1); /* every rank but the root has one parent */
        kb__ccl_plan_destroy(pl);
    }
    kb__ccl_config_destroy(c);
}

/* The tree's shape built top-down from its definition (docs/ccl.md): the
 * subtree of ranks [lo, hi) has root lo, left [lo + 1, mid), right [mid,
 * hi), mid = lo + 1 + (hi - lo - 1) / 2. par[r] := parent, dep[r] :=
 * depth. */
static void range_tree(int lo, int hi, int parent, int depth, int *par, int *dep)
{
    if (lo >= hi) return;
    par[lo] = parent, dep[lo] = depth;
    int mid = lo + 1 + (hi - lo - 1) / 2;
    range_tree(lo + 1, mid, lo, depth + 1, par, dep);
    range_tree(mid, hi, lo, depth + 1, par, dep);
}

Test(ccl_plan, tree_is_the_range_tree_and_crosses_the_sip_link_once)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        kb__ccl_plan *pl = plan_for(c, &p, 2, sizes[i]);
        int par[256], dep[256], height = 0, cross_sip = 0;
        range_tree(0, (int)sizes[i], -1, 0, par, dep);
        for (uint32_t r = 0; r < sizes[i]; r++) {
            cr_assert_eq(peer(pl, r, KB__CCL_N), par[r], "%u ranks: rank %u", sizes[i], r);
            cr_assert_eq(kb__ccl_tree_at(sizes[i], r).depth, (uint32_t)dep[r]);
            height = dep[r] > height ? dep[r] : height;
            cross_sip += par[r] >= 0 && pl->loc[r].sip != pl->loc[par[r]].sip;
        }
        cr_assert_eq(kb__ccl_tree_height(sizes[i]), (uint32_t)height);
        cr_assert_eq(cross_sip, sizes[i] > 128 ? 1 : 0, "%u ranks: %d tree edges cross SIPs",
                     sizes[i], cross_sip);
        kb__ccl_plan_destroy(pl);
    }
    kb__ccl_config_destroy(c);
}

static uint32_t dist(const kb__topo_params *p, uint32_t a, uint32_t b)
{
    uint32_t C = p->sip.mesh_cols;
    return (uint32_t)(abs((int)(a % C) - (int)(b % C)) + abs((int)(a / C) - (int)(b / C)));
}

/* Ring steps rank -> rank+1: how many leave the cube / the SIP, and every
 * step inside the order (not the wrap-around of a partial SIP) crosses at
 * most one UCIe link. */
Test(ccl_plan, ring_steps_cross_cubes_only_where_the_order_must)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    uint32_t per_cube = kb__topo_pes_per_cube(&p), per_sip = per_cube * kb__topo_cubes_per_sip(&p);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint32_t ws = sizes[i];
        kb__ccl_plan *pl = plan_for(c, &p, 0, ws);
        uint32_t cubes_used = (ws + per_cube - 1) / per_cube;
        uint32_t sips_used = (ws + per_sip - 1) / per_sip;
        uint32_t want_sip = sips_used > 1 ? sips_used : 0;
        uint32_t want_cube = cubes_used > 1 ? cubes_used - want_sip : 0;
        uint32_t got_cube = 0, got_sip = 0;
        for (uint32_t r = 0; r < ws; r++) {
            const kb__ccl_port *nx = &pl->ports[r][KB__CCL_E];
            kb__ccl_loc a = pl->loc[r], b = nx->loc;
            got_sip += a.sip != b.sip;
            got_cube += a.sip == b.sip && a.cube != b.cube;
            int wrap = r == ws - 1;
            int full_sips = ws % per_sip == 0;
            if (a.sip == b.sip && (!wrap || full_sips))
                cr_assert_leq(dist(&p, a.cube, b.cube), 1, "ws %u: rank %u -> %u", ws, r, r + 1);
            if (a.sip != b.sip) /* leaves next to the attach cube, enters at it */
                cr_assert_eq(
                    dist(&p, a.cube, p.io.attach_cube) + dist(&p, p.io.attach_cube, b.cube), 1);
            if (a.sip == b.sip) cr_assert_eq(nx->ucie_hops, dist(&p, a.cube, b.cube));
        }
        cr_assert_eq(got_sip, want_sip, "ws %u", ws);
        cr_assert_eq(got_cube, want_cube, "ws %u", ws);
        kb__ccl_plan_destroy(pl);
    }
    kb__ccl_config_destroy(c);
}

/* Independent check of the cube order on several mesh shapes: a
 * permutation, consecutive cubes adjacent, and the wrap-around adjacent
 * exactly when the mesh has a Hamiltonian cycle (an even side, >= 2 x 2). */
Test(ccl_plan, cube_order_is_a_cycle_of_adjacent_cubes_when_one_exists)
{
    static const uint32_t shapes[][2] = {{4, 4}, {2, 3}, {3, 2}, {3, 3},
                                         {1, 4}, {2, 2}, {4, 6}, {5, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        uint32_t R = shapes[s][0], C = shapes[s][1], n = R * C, order[64];
        int seen[64] = {0};
        for (uint32_t attach = 0; attach < n; attach += n - 1) {
            int cyc = kb__ccl_cube_order(R, C, attach, order);
            int expect_cycle = R >= 2 && C >= 2 && (R % 2 == 0 || C % 2 == 0);
            cr_assert_eq(cyc, expect_cycle, "%ux%u", R, C);
            memset(seen, 0, sizeof seen);
            for (uint32_t i = 0; i < n; i++) {
                cr_assert_lt(order[i], n);
                cr_assert_eq(seen[order[i]]++, 0);
                uint32_t a = order[i], b = order[(i + 1) % n];
                int adj = abs((int)(a % C) - (int)(b % C)) + abs((int)(a / C) - (int)(b / C)) == 1;
                if (i + 1 < n || cyc) cr_assert(adj, "%ux%u: %u -> %u", R, C, a, b);
            }
            if (cyc) cr_assert_eq(order[0], attach);
        }
    }
}

Test(ccl_plan, install_message_has_a_header_and_one_entry_per_used_port)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    kb__ccl_plan *pl = plan_for(c, &p, 2, 16); /* tree: 1..3 ports per rank */
    uint64_t total = 0;
    uint8_t buf[256];
    int par[16], dep[16];
    range_tree(0, 16, -1, 0, par, dep);
    for (uint32_t r = 0; r < 16; r++) {
        uint32_t used = r > 0;
        for (uint32_t q = 0; q < 16; q++)
            used += par[q] == (int)r;
        size_t want = KB__CCL_INSTALL_HEADER_BYTES + used * KB__CCL_INSTALL_PORT_BYTES;
        cr_assert_eq(kb__ccl_install_bytes(pl, r), want);
        cr_assert_eq(kb__ccl_install_encode(pl, r, buf, sizeof buf), want);
        cr_assert_eq(kb__ccl_install_encode(pl, r, buf, want - 1), 0);
        uint32_t magic = buf[0] | buf[1] << 8 | buf[2] << 16 | (uint32_t)buf[3] << 24;
        cr_assert_eq(magic, KB__CCL_INSTALL_MAGIC);
        cr_assert_eq((uint32_t)(buf[8] | buf[9] << 8), r);
        cr_assert_eq(buf[12] | buf[13] << 8, 16);
        cr_assert_eq(buf[33], used);
        if (r > 0) { /* the first entry is the parent on port N */
            const uint8_t *e = buf + KB__CCL_INSTALL_HEADER_BYTES;
            cr_assert_eq(e[0], KB__CCL_N);
            cr_assert_eq(e[4] | e[5] << 8, par[r]);
        }
        total += want;
    }
    cr_assert_eq(kb__ccl_install_total_bytes(pl), total);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
}

Test(ccl_plan, format_lists_every_rank_with_its_ports)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    kb__ccl_plan *pl = plan_for(c, &p, 0, 16);
    size_t len = kb__ccl_plan_format(pl, NULL, 0);
    char *buf = malloc(len + 1);
    cr_assert_eq(kb__ccl_plan_format(pl, buf, len + 1), len);
    cr_assert_eq(strlen(buf), len);
    cr_assert(strstr(buf, "ccl plan: ring (module ring_allreduce, ring_1d, 16 ranks)"), "%s", buf);
    cr_assert(strstr(buf, "rank    0  sip0.cube0.pe0  E=next:1(sip0.cube0.pe1, same cube)  "
                          "W=prev:15(sip0.cube1.pe7, cross-cube)"),
              "%s", buf);
    size_t lines = 0;
    for (char *q = buf; *q; q++)
        lines += *q == '\n';
    cr_assert_eq(lines, 17);
    char small[8];
    cr_assert_eq(kb__ccl_plan_format(pl, small, sizeof small), len);
    cr_assert_eq(strlen(small), sizeof small - 1);
    free(buf);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
}

Test(ccl_plan, world_of_one_rank_has_no_ports)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *c = cfg();
    for (size_t a = 0; a < 3; a++) {
        kb__ccl_plan *pl = plan_for(c, &p, a, 1);
        for (int d = 0; d < KB__CCL_DIR_COUNT; d++)
            cr_assert_eq(pl->ports[0][d].peer, -1);
        cr_assert_eq(kb__ccl_install_bytes(pl, 0), KB__CCL_INSTALL_HEADER_BYTES);
        kb__ccl_plan_destroy(pl);
    }
    kb__ccl_config_destroy(c);
}
