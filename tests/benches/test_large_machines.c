/*
 * Machines of 8, 16 and 64 SIPs (system.sips, docs/topology.md): every
 * collective bench runs on them under the flow model without data, on a
 * world of 16 ranks; the machines have 128 PEs and two SIP link directions
 * per SIP (a ring of SIPs). The hierarchical all-reduce over every PE of
 * the 8- and 16-SIP machines runs in tests/benches/test_predictions.c,
 * against its α-β prediction.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "fabric/fabric.h"
#include "kernbench/kernbench.h"
#include "runtime/machine.h"
#include "support/bench_run.h"

static const char *const collective_benches[] = {
    "ccl_allreduce", "ccl_reduce_scatter", "ccl_all_gather", "ccl_broadcast",
    "ccl_reduce",    "ccl_all_to_all",     "hello_send"};

Test(large_machines, have_128_pes_and_two_sip_link_directions_per_sip)
{
    static const int sips[] = {8, 16, 64};
    for (int i = 0; i < 3; i++) {
        char s[32];
        snprintf(s, sizeof s, "system.sips=%d", sips[i]);
        const char *sets[] = {s, "fabric.model=flow"};
        kb_open_options o = {NULL, sets, 2, 1, NULL, 0};
        kb_machine *m = NULL;
        char eb[512];
        cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%d SIPs: %s", sips[i], eb);
        cr_assert_eq(m->n_pes, 128u * (uint32_t)sips[i]);
        const kb__fabric *fab = m->dev->fab;
        uint32_t sip_links = 0;
        for (uint32_t l = 0; l < kb__fabric_link_count(fab); l++)
            sip_links += kb__fabric_link(fab, l)->cls == KB__LINK_SIP_LINK;
        cr_assert_eq(sip_links, 2u * (uint32_t)sips[i], "%d SIPs: %u SIP link directions", sips[i],
                     sip_links);
        kb_close(m);
    }
}

Test(large_machines, every_collective_bench_runs_on_8_16_and_64_sips, .timeout = 120)
{
    static const int sips[] = {8, 16, 64};
    for (int i = 0; i < 3; i++)
        for (size_t b = 0; b < sizeof collective_benches / sizeof collective_benches[0]; b++) {
            char s[32];
            snprintf(s, sizeof s, "system.sips=%d", sips[i]);
            const char *sets[] = {s, "fabric.model=flow", NULL};
            const char *kv[] = {"world=16", "bytes=65536", NULL};
            kb_bench_result r;
            int rc = kb_test_bench_run(collective_benches[b], sets, 1, &r, kv);
            cr_assert_eq(rc, 0, "%s on %d SIPs: %s", collective_benches[b], sips[i], r.error);
            cr_assert(kb_bench_passed(&r), "%s on %d SIPs", collective_benches[b], sips[i]);
            cr_assert_eq(r.stats.pes_used, 16u, "%s on %d SIPs", collective_benches[b], sips[i]);
            cr_assert_gt(kb_bench_sim_ps(&r), 0);
        }
}
