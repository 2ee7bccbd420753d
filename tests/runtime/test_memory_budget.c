/*
 * test_memory_budget.c — the host memory budget (kb_open_options.max_memory,
 * base/budget.h): the accounting follows the bytes written, a simulation
 * that would pass the budget stops with KB_EBUDGET and a message naming
 * what grew, by how much, the total and the budget, and the machine is
 * still usable (and closes without a leak) afterwards.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/budget.h"
#include "kernbench/dist.h"
#include "kernbench/kernbench.h"
#include "support/machine.h"

#define MIB  (1ull << 20)
#define SLAB (2 * MIB) /* the store's slab (mem/store.h) */

static const char *const small[] = {"sip.cube_mesh=1x2", "cube.pe_layout.corners=2",
                                    "cube.pe_layout.pe_per_corner=1", "cube.hbm.slices=2"};

static kb_machine *open_budget(uint64_t max_memory)
{
    kb_open_options o = {.overrides = small, .n_overrides = 4, .max_memory = max_memory};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    return m;
}

/* Writes n bytes (a pattern) into a new f32 tensor; returns kb_copy's status. */
static int write_tensor(kb_machine *m, uint64_t n, kb_tensor *t)
{
    int64_t shape = (int64_t)(n / 4);
    cr_assert_eq(kb_empty(m, "t", 1, &shape, KB_F32, NULL, t), 0, "%s", kb_last_error(m));
    float *h = malloc(n);
    cr_assert_not_null(h);
    for (int64_t i = 0; i < shape; i++)
        h[i] = (float)i;
    int rc = kb_copy_from_host(m, *t, h, n, KB_F32);
    free(h);
    return rc;
}

Test(memory_budget, tensor_data_is_counted_by_the_slabs_it_takes)
{
    kb_machine *m = open_budget(KB_MAX_MEMORY_NONE);
    uint64_t used0, used1, peak, limit;
    cr_assert_eq(kb_memory_use(m, &used0, &peak, &limit), 0);
    cr_assert_eq(limit, KB_MAX_MEMORY_NONE);
    cr_assert_gt(used0, 0, "an empty machine holds its event queue");
    kb_tensor t;
    int sips;
    cr_assert_eq(kb_machine_shape(m, &sips, NULL, NULL), 0);
    cr_assert_geq(sips, 1);
    /* the default placement keeps a full copy per SIP */
    const uint64_t n = 24 * MIB * (uint64_t)sips;
    cr_assert_eq(write_tensor(m, n / (uint64_t)sips, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_memory_use(m, &used1, &peak, NULL), 0);
    /* the written bytes, in 2 MiB slabs (the pages of every slice the
     * tensor spreads over), plus what the copy queued */
    cr_assert_geq(used1 - used0, n, "%llu bytes counted for %llu written",
                  (unsigned long long)(used1 - used0), (unsigned long long)n);
    cr_assert_leq(used1 - used0, n + 8 * SLAB + MIB, "%llu bytes counted for %llu written",
                  (unsigned long long)(used1 - used0), (unsigned long long)n);
    cr_assert_geq(peak, used1);
    kb_close(m);
}

Test(memory_budget, a_run_past_the_budget_stops_with_a_message_and_the_machine_still_works)
{
    const uint64_t budget = 8 * MIB;
    kb_machine *m = open_budget(budget);
    kb_tensor small_t, big;
    cr_assert_eq(write_tensor(m, 64 << 10, &small_t), 0, "%s", kb_last_error(m));
    int rc = write_tensor(m, 64 * MIB, &big);
    cr_assert_eq(rc, KB_EBUDGET, "%d: %s", rc, kb_last_error(m));
    const char *msg = kb_last_error(m);
    cr_assert(strstr(msg, "host memory budget exceeded: tensor data needs 2.00 MiB more"), "%s",
              msg);
    cr_assert(strstr(msg, "of a budget of 8.00 MiB"), "%s", msg);
    cr_assert(strstr(msg, "raise it with --max-memory SIZE (kb_open_options.max_memory)"), "%s",
              msg);
    uint64_t used, limit;
    cr_assert_eq(kb_memory_use(m, &used, NULL, &limit), 0);
    cr_assert_eq(limit, budget);
    cr_assert_leq(used, budget);
    cr_assert_gt(used + SLAB, budget, "refused while a slab still fit (%llu held)",
                 (unsigned long long)used);
    /* the machine goes on: the tensor written before reads back right */
    cr_assert_eq(kb_free(m, big), 0, "%s", kb_last_error(m));
    float *back = malloc(64 << 10);
    cr_assert_not_null(back);
    cr_assert_eq(kb_copy_to_host(m, small_t, back, 64 << 10, KB_F32), 0, "%s", kb_last_error(m));
    for (int i = 0; i < (64 << 10) / 4; i++)
        cr_assert_eq(back[i], (float)i, "element %d", i);
    free(back);
    kb_close(m);
}

/* A timing-only machine of the built-in topology under a 100 KiB budget,
 * with the ccl.yaml override `ccl_set` (NULL: none), and in *t a buffer
 * of 1 MiB per rank on the first 8 PEs of each of `cubes` cubes of SIP 0,
 * the process group initialised. */
#define TIGHT (100u << 10)
static kb_machine *open_tight(const char *ccl_set, int cubes, kb_tensor *t)
{
    const char *sets[] = {ccl_set};
    kb_open_options o = {
        .overrides = sets, .n_overrides = ccl_set ? 1 : 0, .no_data = 1, .max_memory = TIGHT};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    kb_policy p = {
        KB_REPLICATE, cubes > 1 ? KB_ROW_WISE : KB_REPLICATE, KB_ROW_WISE, 1, cubes, 8, 0, 0};
    int64_t shape[2] = {8 * cubes, (1 << 20) / 4};
    cr_assert_eq(kb_empty(m, "buf", 2, shape, KB_F32, &p, t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    return m;
}

/* A refusal in the middle of a collective: 8 ranks of one cube all-reduce
 * 1 MiB each (timing only) under a budget that holds the machine and a few
 * messages but not the ring's transfers in flight. The call names what was
 * refused and the budget; a later call is refused (KB_ESTATE) naming that
 * refusal; everything the stopped simulation held in flight (operations,
 * queue pieces, DMA transfer blocks, programs) is freed with the machine:
 * the ASan build's leak checker fails this test otherwise. */
Test(memory_budget, a_collective_refused_mid_run_names_the_refusal_and_leaks_nothing)
{
    kb_tensor t;
    kb_machine *m = open_tight(NULL, 1, &t);
    int rc = kb_all_reduce(m, t, KB_SUM);
    cr_assert_eq(rc, KB_EBUDGET, "%d: %s", rc, kb_last_error(m));
    const char *msg = kb_last_error(m);
    cr_assert(strstr(msg, "host memory budget exceeded: messages in flight needs "), "%s", msg);
    cr_assert(strstr(msg, "of a budget of 100 KiB; raise it with --max-memory SIZE"), "%s", msg);
    uint64_t used;
    cr_assert_eq(kb_memory_use(m, &used, NULL, NULL), 0);
    cr_assert_leq(used, TIGHT);
    /* the simulation lost what was refused: the machine refuses further
     * simulated work, naming that refusal, instead of running into it */
    rc = kb_all_reduce(m, t, KB_SUM);
    cr_assert_eq(rc, KB_ESTATE, "%d: %s", rc, kb_last_error(m));
    msg = kb_last_error(m);
    cr_assert(strstr(msg, "the simulation stopped at an earlier failure and cannot go on (host "
                          "memory budget exceeded: "),
              "%s", msg);
    cr_assert(strstr(msg, "close this machine (kb_close) and open another"), "%s", msg);
    kb_close(m);
    cr_assert_eq(kb_test_leaks(), 0, "the refused collective left blocks allocated");
}

/* A refusal a kernel takes as its error: 16 ranks over two cubes run the
 * pipelined tree all-reduce, and a program's tile load (a PeXfer block)
 * is refused. The programs unwind through the kernel's own host arrays
 * (kernel scratch, freed at the program's end) and the simulation is not
 * halted: the machine still runs the next call. Nothing leaks. */
Test(memory_budget, a_kernel_that_meets_a_refusal_unwinds_without_a_leak)
{
    kb_tensor t;
    kb_machine *m = open_tight("ccl.defaults.algorithm.all_reduce=tree_allreduce", 2, &t);
    int rc = kb_all_reduce(m, t, KB_SUM);
    cr_assert_eq(rc, KB_EBUDGET, "%d: %s", rc, kb_last_error(m));
    const char *msg = kb_last_error(m);
    cr_assert(strstr(msg, "kernel tree_allreduce, program "), "%s", msg);
    cr_assert(strstr(msg, "PeXfer: host memory budget exceeded: messages in flight needs "), "%s",
              msg);
    cr_assert(strstr(msg, "of a budget of 100 KiB"), "%s", msg);
    char first[1024];
    snprintf(first, sizeof first, "%s", msg);
    /* not halted: the same call runs again, to the same refusal */
    rc = kb_all_reduce(m, t, KB_SUM);
    cr_assert_eq(rc, KB_EBUDGET, "%d: %s", rc, kb_last_error(m));
    cr_assert_str_eq(kb_last_error(m), first);
    kb_close(m);
    cr_assert_eq(kb_test_leaks(), 0, "the refused kernels left blocks allocated");
}

Test(memory_budget, a_budget_below_an_empty_machine_is_refused_at_open)
{
    kb_open_options o = {.overrides = small, .n_overrides = 4, .max_memory = 1000};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), KB_EBUDGET, "%s", eb);
    cr_assert_null(m);
    cr_assert(strstr(eb, "kb_open: a host memory budget (max_memory, --max-memory) of 1000 bytes "
                         "is below the "),
              "%s", eb);
}

Test(memory_budget, the_default_is_three_quarters_of_the_available_memory)
{
    kb_machine *m = open_budget(0);
    uint64_t limit;
    cr_assert_eq(kb_memory_use(m, NULL, NULL, &limit), 0);
    kb_close(m);
    /* independent reference: physical memory from sysconf, which bounds
     * MemAvailable */
    uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    cr_assert_leq(limit, phys / 4 * 3, "%llu of %llu", (unsigned long long)limit,
                  (unsigned long long)phys);
    cr_assert_gt(limit, 16 * MIB);
    cr_assert_eq(kb_memory_use(NULL, NULL, NULL, NULL), KB_EINVAL);
}

Test(memory_budget, takes_and_gives_keep_the_sum_and_a_refusal_names_every_part)
{
    kb__budget b;
    kb__budget_init(&b);
    b.limit = 10 * MIB;
    cr_assert_eq(kb__budget_take(&b, KB__MEM_DATA, 6 * MIB), 0);
    cr_assert_eq(kb__budget_take(&b, KB__MEM_EVENTS, 1536 << 10), 0);
    cr_assert_eq(kb__budget_take(&b, KB__MEM_MESSAGES, 512), 0);
    cr_assert_eq(b.used, 6 * MIB + (1536 << 10) + 512);
    cr_assert_eq(kb__budget_take(&b, KB__MEM_MESSAGES, 4 * MIB), KB_EBUDGET);
    cr_assert(b.refused);
    cr_assert_str_eq(b.msg, "host memory budget exceeded: messages in flight needs 4.00 MiB more "
                            "while the simulation holds 7.50 MiB (tensor data 6.00 MiB, event "
                            "queue 1.50 MiB, messages in flight 512 bytes) of a budget of 10.0 "
                            "MiB; raise it with --max-memory SIZE (kb_open_options.max_memory)");
    cr_assert_eq(b.used, 6 * MIB + (1536 << 10) + 512, "a refused take holds nothing");
    kb__budget_give(&b, KB__MEM_DATA, 6 * MIB);
    cr_assert_eq(kb__budget_take(&b, KB__MEM_MESSAGES, 4 * MIB), 0);
    cr_assert(!b.refused);
    cr_assert_eq(b.peak, 6 * MIB + (1536 << 10) + 512);
    /* the limit exactly */
    b.limit = b.used + 100;
    cr_assert_eq(kb__budget_take(&b, KB__MEM_DATA, 100), 0);
    cr_assert_eq(kb__budget_take(&b, KB__MEM_DATA, 1), KB_EBUDGET);
    /* a limit lowered below what is held refuses everything */
    b.limit = MIB;
    cr_assert_eq(kb__budget_take(&b, KB__MEM_DATA, 0), KB_EBUDGET);
    cr_assert_eq(kb__budget_take(NULL, KB__MEM_DATA, UINT64_MAX), 0, "NULL: not counted");
}
