/* Public API behaviour: bad input gives precise errors and leaves the
 * machine usable; set_device scoping; statistics; MMU message cost;
 * allocators in use; opening failures. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/machine.h"
#include "runtime/memory.h"
#include "support/machine.h"

/* A later valid call succeeds and nothing leaked from the failed one. */
static void assert_usable(kb_machine *m)
{
    int64_t shape[2] = {8, 8};
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, "ok", 2, shape, KB_F32, NULL, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_free(m, t), 0);
    cr_assert(kb__rt_memory_pristine(m));
    cr_assert_eq(m->mmu.live_refs, 0);
}

static void expect_fail(kb_machine *m, int rc, int code, kb_tensor t, const char *msg)
{
    cr_assert_eq(rc, code, "rc %d: %s", rc, kb_last_error(m));
    cr_assert_eq(t.id, 0);
    cr_assert(strstr(kb_last_error(m), msg), "message '%s' lacks '%s'", kb_last_error(m), msg);
    assert_usable(m);
}

Test(api, zero_and_negative_dims_are_refused)
{
    kb_machine *m = kb_test_small_machine(0);
    kb_tensor t = {99};
    int64_t z[2] = {0, 8}, n[2] = {8, -2};
    expect_fail(m, kb_empty(m, "z", 2, z, KB_F32, NULL, &t), KB_EINVAL, t,
                "tensor z: dimension 0 of shape [0, 8] is 0");
    expect_fail(m, kb_empty(m, "n", 2, n, KB_F32, NULL, &t), KB_EINVAL, t,
                "dimension 1 of shape [8, -2] is -2");
    expect_fail(m, kb_empty(m, "d", 0, n, KB_F32, NULL, &t), KB_EINVAL, t,
                "tensor 'd': ndim is 0; expected 1, 2 or 3");
    kb_close(m);
}

Test(api, four_d_shapes_are_not_supported)
{
    kb_machine *m = kb_test_small_machine(0);
    kb_tensor t = {99};
    int64_t s[4] = {2, 2, 2, 2};
    expect_fail(m, kb_empty(m, "cube4", 4, s, KB_F32, NULL, &t), KB_EUNSUPPORTED, t,
                "tensor 'cube4': 4-D shapes are not supported (tensors have 1 to 3 dimensions)");
    kb_close(m);
}

Test(api, unknown_dtype_is_refused)
{
    kb_machine *m = kb_test_small_machine(0);
    kb_tensor t = {99};
    int64_t s[1] = {8};
    expect_fail(m, kb_empty(m, "u", 1, s, (kb_dtype)17, NULL, &t), KB_EINVAL, t,
                "tensor 'u': unknown dtype 17");
    kb_close(m);
}

Test(api, non_dividing_split_names_level_dimension_and_value)
{
    kb_machine *m = kb_test_small_machine(0);
    kb_tensor t = {99};
    int64_t s[2] = {1, 8};
    kb_policy p = {KB_ROW_WISE, KB_REPLICATE, KB_REPLICATE, 0, 0, 0, 0, 0};
    expect_fail(m, kb_empty(m, "odd", 2, s, KB_F32, &p, &t), KB_EINVAL, t,
                "tensor odd: shape [1, 8] cannot be split row_wise over 2 SIPs (dimension 0 = "
                "1 is smaller than 2: some would hold nothing)");
    int64_t v[1] = {8};
    kb_policy r = {KB_REPLICATE, KB_ROW_WISE, KB_REPLICATE, 0, 0, 0, 0, 0};
    expect_fail(m, kb_empty(m, "vec", 1, v, KB_F32, &r, &t), KB_EINVAL, t,
                "cannot be split row_wise over 2");
    kb_close(m);
}

Test(api, bad_policy_values_are_refused)
{
    kb_machine *m = kb_test_small_machine(0);
    kb_tensor t = {99};
    int64_t s[2] = {8, 8};
    kb_policy bad = {KB_REPLICATE, (kb_split)7, KB_REPLICATE, 0, 0, 0, 0, 0};
    expect_fail(m, kb_empty(m, "b", 2, s, KB_F32, &bad, &t), KB_EINVAL, t, "policy for cubes is 7");
    kb_policy many = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 0, 3, 0, 0};
    expect_fail(m, kb_empty(m, "b", 2, s, KB_F32, &many, &t), KB_EINVAL, t, "num_pes = 3");
    kb_close(m);
}

Test(api, wrong_host_buffer_size_names_both_sizes)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t s[2] = {16, 16};
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, "x", 2, s, KB_F32, NULL, &t), 0);
    char buf[1024];
    cr_assert_eq(kb_copy_from_host(m, t, buf, 1000, KB_F32), KB_EINVAL);
    cr_assert_str_eq(kb_last_error(m),
                     "tensor 'x': host buffer has 1000 bytes, expected 1024 (16×16 f32)");
    cr_assert_eq(kb_copy_to_host(m, t, buf, 1024, KB_F16), KB_EINVAL);
    cr_assert_str_eq(kb_last_error(m),
                     "tensor 'x': host buffer has 1024 bytes, expected 512 (16×16 f16)");
    cr_assert_eq(kb_copy_to_host(m, t, buf, 1024, KB_F32), 0);
    kb_close(m);
}

Test(api, using_a_freed_tensor_is_an_error_naming_it)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t s[1] = {16};
    kb_tensor a, b;
    cr_assert_eq(kb_zeros(m, NULL, 1, s, KB_F32, NULL, &a), 0);
    cr_assert_eq(kb_zeros(m, NULL, 1, s, KB_F32, NULL, &b), 0);
    cr_assert_eq(kb_free(m, b), 0);
    float buf[16];
    cr_assert_eq(kb_copy_to_host(m, b, buf, sizeof buf, KB_F32), KB_ENOTFOUND);
    cr_assert_str_eq(kb_last_error(m), "tensor 't2' (id 2) was freed");
    cr_assert_eq(kb_free(m, b), KB_ENOTFOUND);
    kb_tensor_info info;
    cr_assert_eq(kb_tensor_get_info(m, b, &info), KB_ENOTFOUND);
    cr_assert_eq(info.n_shards, 0);
    /* The slot is reused: the stale handle still does not reach the new tensor. */
    kb_tensor c;
    cr_assert_eq(kb_zeros(m, "c", 1, s, KB_F32, NULL, &c), 0);
    cr_assert_eq(kb_copy_to_host(m, b, buf, sizeof buf, KB_F32), KB_ENOTFOUND);
    cr_assert_eq(kb_copy_to_host(m, (kb_tensor){12345}, buf, sizeof buf, KB_F32), KB_ENOTFOUND);
    cr_assert(strstr(kb_last_error(m), "is not a tensor of this machine"));
    cr_assert_eq(kb_copy_to_host(m, a, buf, sizeof buf, KB_F32), 0);
    kb_close(m);
}

Test(api, exhausting_a_slice_reports_request_and_largest_free)
{
    kb_machine *m = kb_test_small_machine(0);
    uint64_t slice = m->params.cube.hbm_capacity / m->params.cube.hbm_slices;
    int64_t s[1] = {(int64_t)(slice / 4 + 1024)}; /* f32, replicated: one slice per PE */
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 0, 0, 0, 0};
    kb_tensor t = {99};
    int rc = kb_empty(m, "huge", 1, s, KB_F32, &p, &t);
    expect_fail(m, rc, KB_ENOSPC, t, "tensor 'huge': shard 0: ");
    cr_assert(strstr(kb_last_error(m), "largest"), "%s", kb_last_error(m));
    kb_close(m);
}

Test(api, set_device_scopes_default_policy_tensors_to_that_sip)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_get_device(m), -1);
    cr_assert_eq(kb_set_device(m, 1), 0);
    int64_t s[2] = {4, 8};
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, "dev", 2, s, KB_F32, NULL, &t), 0);
    kb_tensor_info info;
    kb_tensor_get_info(m, t, &info);
    cr_assert_eq(info.sip_scope, 1);
    cr_assert_eq(info.n_shards, 4);
    for (int i = 0; i < info.n_shards; i++) {
        kb_shard_info sh;
        kb_tensor_get_shard(m, t, i, &sh);
        cr_assert_eq(sh.sip, 1);
    }
    /* An explicit SIP split is not scoped. */
    kb_policy split = {KB_COLUMN_WISE, KB_REPLICATE, KB_REPLICATE, 0, 0, 0, 0, 0};
    kb_tensor u;
    cr_assert_eq(kb_zeros(m, "split", 2, s, KB_F32, &split, &u), 0);
    kb_tensor_get_info(m, u, &info);
    cr_assert_eq(info.sip_scope, -1);
    cr_assert_eq(info.n_shards, 8);
    cr_assert_eq(kb_set_device(m, 2), KB_ERANGE);
    cr_assert(strstr(kb_last_error(m), "SIP 2 does not exist"));
    cr_assert_eq(kb_get_device(m), 1);
    cr_assert_eq(kb_set_device(m, -1), 0);
    kb_close(m);
}

static uint64_t map_cost(kb_machine *m, int cubes)
{
    int64_t s[2] = {64, 1024};
    kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_REPLICATE, 0, cubes, 1, 0, 0};
    kb_tensor t;
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(kb_empty(m, "map", 2, s, KB_F32, &p, &t), 0, "%s", kb_last_error(m));
    uint64_t cost = kb_now_ps(m) - t0;
    cr_assert_eq(kb_free(m, t), 0);
    return cost;
}

Test(api, mapping_costs_time_growing_with_target_cubes)
{
    kb_machine *m = NULL;
    cr_assert_eq(kb_open(&m, NULL, NULL, 0), 0);
    cr_assert_eq(kb_set_device(m, 0), 0);
    uint64_t c1 = map_cost(m, 1), c2 = map_cost(m, 2), c4 = map_cost(m, 4), c16 = map_cost(m, 16);
    cr_assert_gt(c1, 0);
    cr_assert_gt(c2, c1);
    cr_assert_gt(c4, c2);
    cr_assert_gt(c16, c4);
    kb_close(m);
}

Test(api, statistics_count_bytes_per_message_kind_and_reset)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t s[2] = {8, 16};
    kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 0, 0, 0, 0};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "st", 2, s, KB_F32, &p, &t), 0);
    cr_assert_eq(kb_stats_reset(m), 0);
    float buf[128] = {0};
    cr_assert_eq(kb_copy_from_host(m, t, buf, sizeof buf, KB_F32), 0);
    cr_assert_eq(kb_copy_to_host(m, t, buf, sizeof buf, KB_F32), 0);
    kb_stats st;
    cr_assert_eq(kb_stats_get(m, &st), 0);
    /* 2 SIP copies of 512 bytes written, one command per region (4 regions)
     * covering both copies; one copy read back, one command per region. */
    cr_assert_eq(st.bytes[KB_MSG_WRITE], 2 * 512);
    cr_assert_eq(st.messages[KB_MSG_WRITE], 4);
    cr_assert_eq(st.bytes[KB_MSG_READ], 512);
    cr_assert_eq(st.messages[KB_MSG_READ], 4);
    cr_assert_eq(st.bytes[KB_MSG_MMU], 0);
    /* The HBM links carry the data once per segment (8 written, 4 read)
     * plus one header per segment: a write's ack, a read's request. */
    uint64_t h = kb__topo_header_bytes(&m->params);
    cr_assert_eq(st.link_bytes[KB_LINK_HBM], 3 * 512 + (8 + 4) * h);
    /* Every byte crossed PCIe: data both ways, plus command and ack headers. */
    cr_assert_geq(st.link_bytes[KB_LINK_PCIE], 3 * 512);
    cr_assert_gt(st.elapsed_ps, 0);
    cr_assert_eq(st.now_ps, kb_now_ps(m));
    cr_assert_eq(kb_free(m, t), 0);
    kb_stats_get(m, &st);
    cr_assert_eq(st.messages[KB_MSG_MMU], 2); /* one unmap per SIP */
    kb_stats_reset(m);
    kb_stats_get(m, &st);
    cr_assert_eq(st.bytes[KB_MSG_WRITE], 0);
    cr_assert_eq(st.elapsed_ps, 0);
    kb_close(m);
}

Test(api, open_failure_fills_the_error_buffer)
{
    const char *bad[] = {"pe.mmu.page_size=3000"};
    kb_open_options o = {NULL, bad, 1, 0, NULL, 0};
    kb_machine *m = (kb_machine *)1;
    char eb[512];
    cr_assert_lt(kb_open(&m, &o, eb, sizeof eb), 0);
    cr_assert_null(m);
    cr_assert(strstr(eb, "page_size"), "%s", eb);
    o = (kb_open_options){"/nonexistent/topology.yaml", NULL, 0, 0, NULL, 0};
    cr_assert_lt(kb_open(&m, &o, eb, sizeof eb), 0);
    cr_assert_null(m);
    cr_assert(strstr(eb, "/nonexistent/topology.yaml"), "%s", eb);
}

Test(api, allocators_in_use_match_a_reference_model)
{
    kb_machine *m = kb_test_small_machine(0);
    enum { N = 400 };
    uint64_t pa[N] = {0}, sz[N] = {0};
    const kb__range_allocator *a = &m->tcm[3];
    uint64_t lo = a->base, hi = a->base + a->size;
    uint64_t rng = 12345;
    for (int step = 0; step < 4000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int i = (int)(rng >> 33) % N;
        if (sz[i]) {
            cr_assert_eq(kb__rt_tcm_free(m, 3, pa[i], NULL), 0);
            sz[i] = 0;
            continue;
        }
        uint64_t want = 1 + (rng >> 40) % 40000, align = 1ull << ((rng >> 20) % 13);
        if (kb__rt_tcm_alloc(m, 3, want, align, &pa[i], NULL) != 0) continue;
        sz[i] = want;
        cr_assert_eq(pa[i] % align, 0);
        cr_assert(pa[i] >= lo && pa[i] + want <= hi);
        for (int j = 0; j < N; j++) /* reference model: live blocks never overlap */
            if (j != i && sz[j]) cr_assert(pa[i] + sz[i] <= pa[j] || pa[j] + sz[j] <= pa[i]);
    }
    uint64_t used = 0;
    for (int i = 0; i < N; i++)
        used += sz[i];
    cr_assert_geq(kb__range_bytes_used(a), used);
    for (int i = 0; i < N; i++)
        if (sz[i]) cr_assert_eq(kb__rt_tcm_free(m, 3, pa[i], NULL), 0);
    cr_assert(kb__rt_memory_pristine(m));
    kb_close(m);
}

Test(api, tcm_allocations_stay_above_the_scheduler_reserve)
{
    kb_machine *m = kb_test_small_machine(0);
    uint64_t pa;
    cr_assert_eq(kb__rt_tcm_alloc(m, 0, 4096, 4096, &pa, NULL), 0);
    kb__pa f;
    cr_assert_eq(kb__addr_decode(&m->ageom, pa, &f, NULL), 0);
    cr_assert_eq(f.space, KB__SPACE_TCM);
    cr_assert_eq(f.offset, m->params.pe.tcm_reserved);
    uint64_t free_tcm = m->params.pe.tcm_size - m->params.pe.tcm_reserved;
    cr_assert_eq(kb__range_bytes_free(&m->tcm[0]), free_tcm - 4096);
    kb__err e;
    cr_assert_eq(kb__rt_sram_alloc(m, 0, m->params.cube.sram_size + 1, 64, &pa, &e), KB_ENOSPC);
    kb_close(m);
}

Test(api, mapping_a_32_mib_tensor_into_256_pes_stays_small)
{
    kb_machine *m = NULL;
    cr_assert_eq(kb_open(&m, NULL, NULL, 0), 0);
    int64_t s[2] = {4096, 4096};
    kb_policy p = {KB_ROW_WISE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 0, 0, 0, 0};
    kb_tensor t;
    size_t before = kb__mmu_bytes(&m->mmu);
    cr_assert_eq(kb_empty(m, "big", 2, s, KB_F16, &p, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(m->mmu.live_sets, 2); /* one per SIP: broadcast */
    cr_assert_eq(m->mmu.live_refs, 256);
    cr_assert_lt(kb__mmu_bytes(&m->mmu) - before, 64 * 1024);
    kb_close(m);
}

Test(api, describe_lists_every_shard)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t s[2] = {4, 8};
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, "d", 2, s, KB_BF16, NULL, &t), 0);
    size_t need = 0;
    cr_assert_eq(kb_tensor_describe(m, t, NULL, 0, &need), 0);
    char *buf = malloc(need);
    cr_assert_eq(kb_tensor_describe(m, t, buf, need, NULL), 0);
    cr_assert_eq(strlen(buf) + 1, need);
    cr_assert(strstr(buf, "tensor 'd' (id 1): 4×8 bf16, policy sip=replicate×2 "
                          "cube=column_wise×2 pe=column_wise×2"),
              "%s", buf);
    cr_assert(strstr(buf, "[7] sip1/cube1/pe1 replica 1: offset (0, 6) shape 4×2 PA "), "%s", buf);
    free(buf);
    kb_close(m);
}

/* A tensor placed from cube 1, PE 1 says so, and its shards are there. */
Test(api, a_tensor_placed_from_a_first_cube_and_pe_lives_there)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t s[1] = {64};
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 1, 1};
    kb_tensor t;
    cr_assert_eq(kb_full(m, "far", 1, s, KB_F32, &p, 2.5, &t), 0, "%s", kb_last_error(m));
    char buf[1024];
    cr_assert_eq(kb_tensor_describe(m, t, buf, sizeof buf, NULL), 0);
    cr_expect(strstr(buf, "pe=replicate×1 from cube 1, pe 1"), "%s", buf);
    cr_expect(strstr(buf, "[0] sip0/cube1/pe1 replica 0"), "%s", buf);
    float h[64];
    cr_assert_eq(kb_copy_to_host(m, t, h, sizeof h, KB_F32), 0, "%s", kb_last_error(m));
    for (int i = 0; i < 64; i++)
        cr_expect_eq(h[i], 2.5f, "element %d", i);
    kb_close(m);
}

/* ---- progress hook ---------------------------------------------------------- */

typedef struct progress_log {
    int n;
    uint64_t now[4096], events[4096];
} progress_log;

static void log_progress(void *user, uint64_t now_ps, uint64_t events)
{
    progress_log *l = user;
    if (l->n < 4096) l->now[l->n] = now_ps, l->events[l->n] = events;
    l->n++;
}

/* Copies a 4 MiB tensor in with the hook set every `every` events. */
static void copy_with_progress(progress_log *l, uint64_t every)
{
    kb_machine *m = kb_test_small_machine(0);
    memset(l, 0, sizeof *l);
    cr_assert_eq(kb_set_progress(m, log_progress, l, every), 0);
    int64_t shape[2] = {1024, 1024};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "t", 2, shape, KB_F32, NULL, &t), 0, "%s", kb_last_error(m));
    float *h = calloc(1024 * 1024, sizeof *h);
    cr_assert_eq(kb_copy_from_host(m, t, h, 1024 * 1024 * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    int n = l->n;
    cr_assert_eq(kb_set_progress(m, NULL, NULL, 0), 0);
    cr_assert_eq(kb_copy_to_host(m, t, h, 1024 * 1024 * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    cr_assert_eq(l->n, n, "the hook ran after it was turned off");
    free(h);
    kb_close(m);
}

Test(api, the_progress_hook_runs_every_so_many_events_and_the_same_way_each_run)
{
    static progress_log a, b;
    copy_with_progress(&a, 1000);
    cr_assert_gt(a.n, 10, "%d calls", a.n); /* 16 Ki packets, each several events */
    for (int i = 1; i < a.n && i < 4096; i++) {
        cr_assert_geq(a.events[i], a.events[i - 1] + 1000, "call %d", i);
        cr_assert_geq(a.now[i], a.now[i - 1], "call %d", i);
    }
    copy_with_progress(&b, 1000);
    cr_assert_eq(a.n, b.n);
    cr_assert(!memcmp(a.events, b.events, sizeof a.events) && !memcmp(a.now, b.now, sizeof a.now));
    cr_assert_eq(kb_set_progress(NULL, log_progress, &a, 1), KB_EINVAL);
}

/* A failing call leaves its own message, not an earlier call's. */
static void expect_own_message(kb_machine *m, int rc, const char *msg)
{
    cr_assert_eq(rc, KB_EINVAL, "rc %d: %s", rc, kb_last_error(m));
    cr_assert(strstr(kb_last_error(m), msg), "message '%s' lacks '%s'", kb_last_error(m), msg);
}

Test(api, statistics_calls_with_bad_outputs_set_their_own_message)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t z[1] = {0};
    kb_tensor t;
    cr_assert_lt(kb_empty(m, "earlier", 1, z, KB_F32, NULL, &t), 0); /* an earlier message */
    expect_own_message(m, kb_stats_get(m, NULL), "kb_stats_get: out is NULL");
    expect_own_message(m, kb_busiest_links(m, NULL, 4), "kb_busiest_links: out is NULL with n 4");
    kb_link_info out[4];
    expect_own_message(m, kb_busiest_links(m, out, -5), "kb_busiest_links: n is -5");
    cr_assert_eq(kb_busiest_links(m, NULL, 0), 0);
    kb_stats st;
    cr_assert_eq(kb_stats_get(m, &st), 0);
    assert_usable(m);
    kb_close(m);
}

Test(api, a_null_override_entry_is_refused_naming_its_index)
{
    const char *sets[] = {"sips=1", NULL};
    kb_open_options o = {NULL, sets, 2, 0, NULL, 0};
    kb_machine *m = (kb_machine *)1;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), KB_EINVAL);
    cr_assert_null(m);
    cr_assert(strstr(eb, "kb_open: overrides[1] is NULL"), "%s", eb);
}

static void count_program(tl_ctx *k)
{
    (void)k;
}

Test(api, a_grid_whose_program_count_overflows_is_refused_and_the_machine_stays_usable)
{
    kb_machine *m = kb_test_small_machine(1);
    int64_t s[1] = {64};
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, "g", 1, s, KB_F32, NULL, &t), 0, "%s", kb_last_error(m));
    kb_arg a = kb_arg_tensor(t);
    /* 2^22 * 2^21 * 2^21 = 2^64 (0 modulo 2^64); 111620 * 429509837 *
     * 384773 = 2^64 + 4 (4 modulo 2^64); the largest grid; 2^33 programs */
    static const uint32_t grids[][3] = {
        {1u << 22, 1u << 21, 1u << 21},
        {111620, 429509837, 384773},
        {UINT32_MAX, UINT32_MAX, UINT32_MAX},
        {1u << 16, 1u << 16, 2},
    };
    kb_launch_id id;
    for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++) {
        kb_launch_opts o = {{grids[i][0], grids[i][1], grids[i][2]}, -1};
        cr_assert_eq(kb_launch(m, "huge", count_program, &o, &a, 1, &id), KB_EINVAL, "grid %zu", i);
        cr_assert(strstr(kb_last_error(m), "has too many programs"), "%s", kb_last_error(m));
    }
    kb_launch_opts o = {{3, 1, 1}, -1};
    cr_assert_eq(kb_launch(m, "small", count_program, &o, &a, 1, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    kb_stats st;
    cr_assert_eq(kb_stats_get(m, &st), 0);
    cr_assert_eq(st.programs, 3);
    cr_assert_eq(kb_free(m, t), 0);
    kb_close(m);
}

/* Link classes are counted beyond the public struct: every class below
 * kb_link_class_count has a name and a byte count, kb_stats' array agrees
 * for the classes it names, and the classes' counts add up to the bytes
 * of every link direction (kb_busiest_links over all of them). */
Test(api, every_link_class_is_counted_through_the_accessors)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t s[2] = {8, 16};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "lc", 2, s, KB_F32, NULL, &t), 0);
    cr_assert_eq(kb_stats_reset(m), 0);
    float buf[128] = {0};
    cr_assert_eq(kb_copy_from_host(m, t, buf, sizeof buf, KB_F32), 0);
    int n = kb_link_class_count(m);
    cr_assert_geq(n, KB_LINK_CLASS_COUNT);
    kb_stats st;
    cr_assert_eq(kb_stats_get(m, &st), 0);
    uint32_t nl = kb__fabric_link_count(m->dev->fab);
    kb_link_info *li = calloc(nl, sizeof *li);
    int k = kb_busiest_links(m, li, (int)nl);
    cr_assert_gt(k, 0);
    uint64_t total = 0, by_links = 0;
    for (int c = 0; c < n; c++) {
        uint64_t b = 0, want = 0;
        cr_assert_eq(kb_stats_link_bytes(m, c, &b), 0, "%s", kb_last_error(m));
        for (int i = 0; i < k; i++)
            if ((int)li[i].cls == c) want += li[i].bytes;
        cr_assert_eq(b, want, "class %s: %llu bytes, the links say %llu", kb_link_class_name(c),
                     (unsigned long long)b, (unsigned long long)want);
        if (c < KB_LINK_CLASS_COUNT) cr_assert_eq(b, st.link_bytes[c]);
        cr_assert_str_neq(kb_link_class_name(c), "?");
        total += b;
    }
    for (int i = 0; i < k; i++)
        by_links += li[i].bytes;
    cr_assert_eq(total, by_links);
    cr_assert_gt(total, 0);
    uint64_t b;
    cr_assert_eq(kb_stats_link_bytes(m, n, &b), KB_ERANGE);
    cr_assert(strstr(kb_last_error(m), "link class"), "%s", kb_last_error(m));
    cr_assert_eq(kb_stats_link_bytes(m, -1, &b), KB_ERANGE);
    cr_assert_eq(kb_stats_link_bytes(m, 0, NULL), KB_EINVAL);
    cr_assert_eq(kb_stats_link_bytes(NULL, 0, &b), KB_EINVAL);
    cr_assert_eq(kb_link_class_count(NULL), KB_EINVAL);
    cr_assert_str_eq(kb_link_class_name(n), "?");
    free(li);
    cr_assert_eq(kb_free(m, t), 0);
    kb_close(m);
}
