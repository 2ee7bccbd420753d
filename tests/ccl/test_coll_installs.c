/*
 * The install cache (ccl/run.c): collectives over several PE sets keep
 * one install each, so alternating calls install once per set and then
 * time exactly as on a machine where nothing else was installed; a PE in
 * two installs talks through the queues of the collective it runs; the
 * TCM base of a PE follows the rings of the installs on it; installs that
 * do not fit evict idle ones, least recently used first, and those beyond
 * KB__CCL_MAX_INSTALLS go the same way; a failed collective drops only its
 * own install; a new configuration drops them all.
 *
 * The PE sets: CUBE0 is the 8 PEs of cube 0, PAIR is PE 0 of cubes 0 and
 * 1 (PE 0 of cube 0 is in both, with other neighbours), either on SIP 0
 * or SIP 1. Every result is checked against a host reference loop.
 */
#include "ccl/coll_fixture.h"
#include "ccl/installs.h"
#include "runtime/machine.h"

#define N      512 /* f32 elements per buffer */
#define ROUNDS 3

static const kb_policy CUBE0 = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 1, 8, 0, 0};
static const kb_policy PAIR = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 2, 1, 0, 0};

/* A tensor of w buffers of N f32 on SIP sip as pol places them. */
static kb_tensor tensor_on(kb_machine *m, const char *name, int sip, kb_policy pol, int w)
{
    cr_assert_eq(kb_set_device(m, sip), 0, "%s", kb_last_error(m));
    int64_t shape = (int64_t)w * N;
    kb_tensor t;
    cr_assert_eq(kb_empty(m, name, 1, &shape, KB_F32, &pol, &t), 0, "%s", kb_last_error(m));
    kb_tensor_info ti;
    cr_assert_eq(kb_tensor_get_info(m, t, &ti), 0);
    cr_assert_eq(ti.n_shards, w, "policy gave %d shards for %d", ti.n_shards, w);
    return t;
}

/* Buffer b of t (w buffers of n) := cf_value(b, e). */
static void fill(kb_machine *m, kb_tensor t, int w, int64_t n)
{
    float *h = malloc((size_t)(w * n) * sizeof *h);
    for (int b = 0; b < w; b++)
        for (int64_t e = 0; e < n; e++)
            h[b * n + e] = (float)cf_value(b, e);
    cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)(w * n) * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    free(h);
}

/* Refills t and sum-all-reduces it with algo (NULL: the default), checked
 * against the host sum; info gets what the call did. */
static void reduce(kb_machine *m, kb_tensor t, int w, const char *algo, kb__coll_info *info)
{
    fill(m, t, w, N);
    cf_check_all_reduce(m, t, algo, KB_SUM, w, N, KB_F32, info);
}

/* The same, expecting installed == want. */
static void reduce_expect(kb_machine *m, kb_tensor t, int w, const char *algo, int want,
                          const char *what)
{
    kb__coll_info info;
    reduce(m, t, w, algo, &info);
    cr_assert_eq(info.installed, want, "%s: installed %d, expected %d", what, info.installed, want);
}

static uint64_t install_ps(const kb__coll_info *i)
{
    return i->install.t_end - i->install.t_start;
}

/* The bytes of TCM rings one ring_1d install keeps on each of its PEs:
 * two rings (prev and next) of n_slots x slot_size. */
static uint64_t ring_pair_bytes(kb_machine *m, const char *algo)
{
    const kb__ccl_algo *a;
    kb__err e;
    cr_assert_eq(kb__ccl_config_find(kb__ccl_state_config(m), algo, &a, &e), 0, "%s", e.msg);
    return 2ull * a->s.n_slots * a->s.slot_size;
}

/* Global PE index of sip/cube/pe. */
static uint32_t pe_at(kb_machine *m, int sip, int cube, int pe)
{
    return kb__rt_pe_index(m, sip, cube, pe);
}

/* ---- reuse and timing --------------------------------------------------- */

/* The mixed machine: a over CUBE0, b over PAIR, made in that order, then
 * ROUNDS of (all-reduce a, all-reduce b). */
static void alternate(kb__coll_info ia[ROUNDS], kb__coll_info ib[ROUNDS])
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    for (int r = 0; r < ROUNDS; r++) {
        reduce(m, a, 8, NULL, &ia[r]);
        reduce(m, b, 2, NULL, &ib[r]);
    }
    kb_close(m);
}

/* One set alone (which 0: a, 1: b) on a machine with the same tensors:
 * its second call, which reuses the install of the first. */
static kb__coll_info alone(int which)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    kb__coll_info first, again;
    reduce(m, which ? b : a, which ? 2 : 8, NULL, &first);
    reduce(m, which ? b : a, which ? 2 : 8, NULL, &again);
    cr_assert_eq(first.installed, 1);
    cr_assert_eq(again.installed, 0);
    kb_close(m);
    return again;
}

static void same_span(const kb__coll_info *got, const kb__coll_info *want, const char *what)
{
    cr_assert_eq(got->t_end - got->t_start, want->t_end - want->t_start,
                 "%s: launch took %llu ps, alone %llu ps", what,
                 (unsigned long long)(got->t_end - got->t_start),
                 (unsigned long long)(want->t_end - want->t_start));
    cr_assert_eq(got->t_run_end - got->t_run_start, want->t_run_end - want->t_run_start,
                 "%s: programs took %llu ps, alone %llu ps", what,
                 (unsigned long long)(got->t_run_end - got->t_run_start),
                 (unsigned long long)(want->t_run_end - want->t_run_start));
}

Test(coll_installs, alternating_pe_sets_install_once_each_and_time_as_alone)
{
    kb__coll_info ia[ROUNDS], ib[ROUNDS];
    alternate(ia, ib);
    for (int r = 0; r < ROUNDS; r++) {
        cr_assert_eq(ia[r].installed, r == 0, "CUBE0 round %d", r);
        cr_assert_eq(ib[r].installed, r == 0, "PAIR round %d", r);
        cr_assert_eq(install_ps(&ia[r]) > 0, r == 0, "CUBE0 round %d", r);
        cr_assert_eq(install_ps(&ib[r]) > 0, r == 0, "PAIR round %d", r);
    }
    kb__coll_info a = alone(0), b = alone(1);
    for (int r = 1; r < ROUNDS; r++) {
        same_span(&ia[r], &a, "CUBE0");
        same_span(&ib[r], &b, "PAIR");
    }
}

Test(coll_installs, the_same_calls_give_the_same_times)
{
    kb__coll_info ia[2][ROUNDS], ib[2][ROUNDS];
    alternate(ia[0], ib[0]);
    alternate(ia[1], ib[1]);
    for (int r = 0; r < ROUNDS; r++) {
        const kb__coll_info *x[2] = {&ia[0][r], &ib[0][r]}, *y[2] = {&ia[1][r], &ib[1][r]};
        for (int s = 0; s < 2; s++) {
            cr_assert_eq(x[s]->t_start, y[s]->t_start, "round %d set %d", r, s);
            cr_assert_eq(x[s]->t_end, y[s]->t_end, "round %d set %d", r, s);
            cr_assert_eq(x[s]->t_run_start, y[s]->t_run_start, "round %d set %d", r, s);
            cr_assert_eq(x[s]->t_run_end, y[s]->t_run_end, "round %d set %d", r, s);
            cr_assert_eq(x[s]->install.t_start, y[s]->install.t_start, "round %d set %d", r, s);
            cr_assert_eq(x[s]->install.t_end, y[s]->install.t_end, "round %d set %d", r, s);
        }
    }
}

/* kb_all_reduce and kb_ccl_last of t (w buffers of n), checked against the
 * host sum. */
static kb_ccl_report pg_reduce(kb_machine *m, kb_tensor t, int w, int64_t n)
{
    fill(m, t, w, n);
    cr_assert_eq(kb_all_reduce(m, t, KB_SUM), 0, "%s", kb_last_error(m));
    float *h = cf_read(m, t, w * n);
    for (int b = 0; b < w; b++)
        for (int64_t e = 0; e < n; e++)
            cr_assert_eq(h[b * n + e], cf_expect(KB_SUM, w, e, KB_F32), "buffer %d element %lld", b,
                         (long long)e);
    free(h);
    kb_ccl_report rep;
    cr_assert_eq(kb_ccl_last(m, &rep), 0, "%s", kb_last_error(m));
    cr_assert_eq(rep.world, w);
    return rep;
}

Test(coll_installs, the_process_group_world_stays_installed_beside_a_pair)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    int world = sips * cubes * pes;
    int64_t n = 64, shape = world * n;
    kb_policy every = {KB_COLUMN_WISE, KB_COLUMN_WISE, KB_COLUMN_WISE, sips, cubes, pes, 0, 0};
    kb_tensor w;
    cr_assert_eq(kb_empty(m, "world", 1, &shape, KB_F32, &every, &w), 0, "%s", kb_last_error(m));
    kb_tensor pair = tensor_on(m, "pair", 0, PAIR, 2);
    for (int r = 0; r < 2; r++) {
        kb_ccl_report rw = pg_reduce(m, w, world, n);
        cr_assert_eq(rw.installed, 0, "round %d: kb_init_process_group installed the world", r);
        cr_assert_eq(rw.install_ps, 0u);
        kb_ccl_report rp = pg_reduce(m, pair, 2, N);
        cr_assert_eq(rp.installed, r == 0, "round %d", r);
        cr_assert_eq(rp.install_ps > 0, r == 0, "round %d", r);
    }
    kb_close(m);
}

/* ---- the queues a kernel sees ------------------------------------------- */

static tl_block_ptr flat(tl_ctx *k, tl_tensor *t, int64_t len)
{
    int64_t off = 0, stride = 1;
    return tl_make_block_ptr(k, t, 1, &len, &stride, &off, &len, NULL);
}

/* A collective kernel: every rank sends its buffer to NEXT and stores what
 * came from PREV (one message: the buffers are small). */
static void pass_to_next(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int64_t n = s->elems;
    tl_tile mine = tl_load_block(k, flat(k, buf, n), 0, TL_PAD_ZERO);
    tl_recv_handle h = tl_recv_async(k, TL_DIR_PREV, 1, &n, s->dtype);
    tl_send(k, TL_DIR_NEXT, mine);
    tl_store_block(k, flat(k, buf, n), tl_wait(k, h), 0);
}

/* The buffer (host block of N) of t on the PE at loc. */
static int block_at(kb_machine *m, kb_tensor t, int w, kb__ccl_loc loc)
{
    for (int i = 0; i < w; i++) {
        kb_shard_info si;
        cr_assert_eq(kb_tensor_get_shard(m, t, i, &si), 0);
        if ((uint32_t)si.sip == loc.sip && (uint32_t)si.cube == loc.cube &&
            (uint32_t)si.pe == loc.pe)
            return (int)(si.offset[0] / N);
    }
    cr_assert_fail("no buffer of the tensor on sip%u/cube%u/pe%u", loc.sip, loc.cube, loc.pe);
    return -1;
}

/* Runs "shift" (pass_to_next) over t: the buffer of every rank r must then
 * hold what rank r - 1 of the install's ring had, and every PE's endpoint
 * must be rank r's of that install. */
static void shift(kb_machine *m, kb_tensor t, int w)
{
    float *h = malloc((size_t)(w * N) * sizeof *h);
    for (int64_t x = 0; x < w * N; x++)
        h[x] = (float)x;
    cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)(w * N) * sizeof *h, KB_F32), 0);
    free(h);
    kb__coll_req req = {KB__CCL_ALL_REDUCE, KB_SUM, "shift", 1, &t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &req, NULL, &e), 0, "%s", e.msg);
    const kb__ccl_plan *pl = kb__ccl_state_plan(m);
    cr_assert_eq(pl->world_size, (uint32_t)w);
    float *got = cf_read(m, t, w * N);
    for (int r = 0; r < w; r++) {
        int mine = block_at(m, t, w, pl->loc[r]);
        int prev = block_at(m, t, w, pl->loc[(r + w - 1) % w]);
        for (int64_t x = 0; x < N; x++)
            cr_assert_eq(got[mine * N + x], (float)(prev * N + x),
                         "world %d: rank %d element %lld holds %g, expected rank %d's %g", w, r,
                         (long long)x, got[mine * N + x], r - 1, (float)(prev * N + x));
        kb__ccl_loc l = pl->loc[r];
        const kb__ipcq_ep *ep = m->pe_units[pe_at(m, (int)l.sip, (int)l.cube, (int)l.pe)]->ipcq;
        cr_assert(ep && ep->set->world == (uint32_t)w && ep->rank == (uint32_t)r,
                  "world %d rank %d: the PE's endpoint is not this install's", w, r);
    }
    free(got);
}

Test(coll_installs, a_pe_in_two_installs_talks_through_the_queues_of_the_one_running)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(kb_ccl_register(m, "pass_to_next", "all_reduce", "ring_1d", pass_to_next), 0, "%s",
                 kb_last_error(m));
    const char *algo[] = {
        "ccl.algorithms.shift={module: pass_to_next, collective: all_reduce, topology: ring_1d}"};
    cr_assert_eq(kb_ccl_override(m, algo, 1), 0, "%s", kb_last_error(m));
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    for (int r = 0; r < ROUNDS; r++) {
        shift(m, a, 8);
        shift(m, b, 2);
        /* the built-in all-reduce over the same PEs: installs of their own */
        reduce_expect(m, a, 8, NULL, r == 0, "ring_allreduce over CUBE0");
        reduce_expect(m, b, 2, NULL, r == 0, "ring_allreduce over PAIR");
    }
    kb_close(m);
}

/* ---- TCM bases and eviction ---------------------------------------------- */

Test(coll_installs, a_pe_in_two_installs_keeps_its_tile_scratch_above_both)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    reduce(m, a, 8, NULL, NULL);
    reduce(m, b, 2, NULL, NULL);
    uint64_t pair = ring_pair_bytes(m, "ring_allreduce");
    kb__pe *shared = m->pe_units[pe_at(m, 0, 0, 0)], *only_a = m->pe_units[pe_at(m, 0, 0, 1)],
           *only_b = m->pe_units[pe_at(m, 0, 1, 0)];
    cr_assert_eq(shared->tcm.base, 2 * pair);
    cr_assert_eq(kb__range_bytes_used(&m->tcm[pe_at(m, 0, 0, 0)]), 2 * pair);
    cr_assert_eq(only_a->tcm.base, pair);
    cr_assert_eq(only_b->tcm.base, pair);
    /* a new configuration drops both: every base goes back to 0 */
    const char *same[] = {"ccl.defaults.n_slots=4"};
    cr_assert_eq(kb_ccl_override(m, same, 1), 0, "%s", kb_last_error(m));
    cr_assert_eq(shared->tcm.base, 0u);
    cr_assert_eq(only_a->tcm.base, 0u);
    cr_assert_eq(only_b->tcm.base, 0u);
    cr_assert_eq(kb__range_bytes_used(&m->tcm[pe_at(m, 0, 0, 0)]), 0u);
    kb_close(m);
}

/* A machine with 1 MiB of usable TCM per PE and ring_allreduce rings of
 * 5 x 64 KiB: one install's two rings fit a PE, two installs' do not. */
static kb_machine *tight_tcm(uint64_t *pair)
{
    const char *sets[] = {"pe.tcm.size=5MiB"};
    kb_machine *m = cf_open(sets, 1);
    const char *queues[] = {"ccl.algorithms.ring_allreduce.n_slots=5",
                            "ccl.algorithms.ring_allreduce.slot_size=64KiB"};
    cr_assert_eq(kb_ccl_override(m, queues, 2), 0, "%s", kb_last_error(m));
    uint64_t usable = m->params.pe.tcm_size - m->params.pe.tcm_reserved;
    *pair = ring_pair_bytes(m, "ring_allreduce");
    cr_assert(*pair <= usable && 2 * *pair > usable, "premise: %llu B of rings, %llu B usable",
              (unsigned long long)*pair, (unsigned long long)usable);
    return m;
}

Test(coll_installs, a_full_tcm_evicts_the_idle_install_sharing_the_pe)
{
    uint64_t pair;
    kb_machine *m = tight_tcm(&pair);
    kb_tensor far = tensor_on(m, "far", 1, PAIR, 2); /* SIP 1: no PE in common */
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    uint32_t shared = pe_at(m, 0, 0, 0), only_a = pe_at(m, 0, 0, 1);
    reduce_expect(m, far, 2, NULL, 1, "far");
    reduce_expect(m, a, 8, NULL, 1, "CUBE0");
    /* PAIR needs sip0/cube0/pe0's TCM: CUBE0 goes, far (older, elsewhere) stays */
    reduce_expect(m, b, 2, NULL, 1, "PAIR");
    cr_assert_eq(m->pe_units[shared]->tcm.base, pair);
    cr_assert_eq(kb__range_bytes_used(&m->tcm[shared]), pair);
    cr_assert_eq(m->pe_units[only_a]->tcm.base, 0u, "CUBE0's rings are gone from pe1");
    reduce_expect(m, far, 2, NULL, 0, "far after PAIR");
    reduce_expect(m, a, 8, NULL, 1, "CUBE0 again");
    cr_assert_eq(m->pe_units[only_a]->tcm.base, pair);
    reduce_expect(m, b, 2, NULL, 1, "PAIR again");
    reduce_expect(m, far, 2, NULL, 0, "far at the end");
    kb_close(m);
}

Test(coll_installs, queues_that_never_fit_give_the_config_error_and_evict_nothing)
{
    uint64_t pair;
    kb_machine *m = tight_tcm(&pair);
    const char *huge[] = {"ccl.algorithms.huge={module: ring_allreduce, collective: all_reduce, "
                          "topology: ring_1d, n_slots: 9, slot_size: 64KiB}"};
    cr_assert_eq(kb_ccl_override(m, huge, 1), 0, "%s", kb_last_error(m));
    cr_assert_gt(ring_pair_bytes(m, "huge"), m->params.pe.tcm_size - m->params.pe.tcm_reserved);
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    reduce_expect(m, a, 8, NULL, 1, "CUBE0");
    kb__err e;
    cr_assert_eq(cf_run(m, &b, "huge", NULL, &e), KB_ECONFIG, "%s", e.msg);
    cr_assert(strstr(e.msg, "ccl.algorithms.huge.slot_size: receive queues do not fit"), "%s",
              e.msg);
    cr_assert_null(kb__ccl_state_plan(m));
    reduce_expect(m, a, 8, NULL, 0, "CUBE0 after the failed call");
    kb_close(m);
}

Test(coll_installs, a_full_hbm_slice_evicts_then_reports_the_allocator_error)
{
    const char *sets[] = {"cube.hbm.capacity=1GiB"};
    kb_machine *m = cf_open(sets, 1);
    const char *big[] = {"ccl.algorithms.big_hbm={module: ring_allreduce, collective: all_reduce, "
                         "topology: ring_1d, buffer_kind: hbm, n_slots: 16, slot_size: 64KiB}"};
    cr_assert_eq(kb_ccl_override(m, big, 1), 0, "%s", kb_last_error(m));
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    reduce_expect(m, a, 8, "ring_allreduce_hbm", 1, "CUBE0");
    /* fill the rest of sip0/cube0/pe0's HBM slice */
    uint32_t pe0 = pe_at(m, 0, 0, 0);
    int64_t rest = (int64_t)kb__range_largest_free(&m->hbm[pe0]);
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};
    kb_tensor filler;
    cr_assert_eq(kb_empty(m, "filler", 1, &rest, KB_I8, &one, &filler), 0, "%s", kb_last_error(m));
    uint64_t ring = ring_pair_bytes(m, "ring_allreduce_hbm") / 2;
    cr_assert_lt(kb__range_largest_free(&m->hbm[pe0]), ring, "premise: the slice is full");
    /* PAIR's rings fit where CUBE0's were */
    reduce_expect(m, b, 2, "ring_allreduce_hbm", 1, "PAIR");
    /* big_hbm's do not, even once PAIR is evicted: the allocator's error */
    kb__err e;
    cr_assert_eq(cf_run(m, &b, "big_hbm", NULL, &e), KB_ENOSPC, "%s", e.msg);
    cr_assert(strstr(e.msg, "algorithm 'big_hbm'") && strstr(e.msg, "(sip0/cube0/pe0, hbm)") &&
                  strstr(e.msg, "HBM sip0/cube0/slice0"),
              "%s", e.msg);
    reduce_expect(m, b, 2, "ring_allreduce_hbm", 1, "PAIR after the failed call");
    reduce_expect(m, a, 8, "ring_allreduce_hbm", 1, "CUBE0 again");
    kb_close(m);
}

Test(coll_installs, beyond_the_cap_the_least_recently_used_goes)
{
    kb_machine *m = cf_open(NULL, 0);
    const char *algos[] = {"ring_allreduce", "ring_allreduce_hbm", "tree_allreduce"};
    kb_tensor t[9]; /* t[w]: w PEs of cube 0 */
    for (int w = 2; w <= 8; w++) {
        kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 1, w, 0, 0};
        char name[8];
        snprintf(name, sizeof name, "t%d", w);
        t[w] = tensor_on(m, name, 0, p, w);
    }
    enum { K = KB__CCL_MAX_INSTALLS + 1 };
    cr_assert_leq(K, 7 * 3, "premise: enough distinct installs");
    /* install i: world 2 + i / 3, algorithm i % 3 */
#define CALL(i, want)                                                                              \
    reduce_expect(m, t[2 + (i) / 3], 2 + (i) / 3, algos[(i) % 3], want, "install " #i)
    for (int i = 0; i < K; i++)
        CALL(i, 1);
    CALL(K - 1, 0); /* the newest */
    CALL(1, 0);     /* the second oldest stayed */
    CALL(0, 1);     /* the oldest went for install K - 1; back, it evicts 2 (1 was used) */
    CALL(1, 0);
    CALL(2, 1);
#undef CALL
    kb_close(m);
}

/* ---- dropping installs ------------------------------------------------------- */

/* A collective kernel that deadlocks: every rank receives first. */
static void receives_first(tl_ctx *k)
{
    cf_receives_first(k);
}

Test(coll_installs, a_failed_collective_drops_only_its_own_install)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(kb_ccl_register(m, "receives_first", "all_reduce", "ring_1d", receives_first), 0,
                 "%s", kb_last_error(m));
    const char *algo[] = {"ccl.algorithms.stuck={module: receives_first, collective: all_reduce, "
                          "topology: ring_1d}"};
    cr_assert_eq(kb_ccl_override(m, algo, 1), 0, "%s", kb_last_error(m));
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    reduce_expect(m, a, 8, NULL, 1, "CUBE0");
    reduce_expect(m, b, 2, NULL, 1, "PAIR");
    uint64_t pair = ring_pair_bytes(m, "ring_allreduce");
    cr_assert_eq(ring_pair_bytes(m, "stuck"), pair, "premise: the same queues");
    kb__tcm *shared = &m->pe_units[pe_at(m, 0, 0, 0)]->tcm,
            *only_b = &m->pe_units[pe_at(m, 0, 1, 0)]->tcm;
    kb__err e;
    cr_assert_eq(cf_run(m, &b, "stuck", NULL, &e), KB_EDEADLOCK, "%s", e.msg);
    cr_assert_null(kb__ccl_state_plan(m));
    /* its rings are gone: the tile scratch starts above the two installs left */
    cr_assert_eq(shared->base, 2 * pair);
    cr_assert_eq(only_b->base, pair);
    cr_assert_eq(kb__range_bytes_used(&m->tcm[pe_at(m, 0, 0, 0)]), 2 * pair);
    reduce_expect(m, a, 8, NULL, 0, "CUBE0 after the failure");
    reduce_expect(m, b, 2, NULL, 0, "PAIR after the failure");
    kb__coll_info info;
    cr_assert_eq(cf_run(m, &b, "stuck", &info, &e), KB_EDEADLOCK, "%s", e.msg);
    cr_assert_eq(info.installed, 1, "the failed install was dropped");
    kb_close(m);
}

Test(coll_installs, a_new_configuration_drops_every_install)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor a = tensor_on(m, "a", 0, CUBE0, 8), b = tensor_on(m, "b", 0, PAIR, 2);
    reduce_expect(m, a, 8, NULL, 1, "CUBE0");
    reduce_expect(m, b, 2, NULL, 1, "PAIR");
    const char *same[] = {"ccl.defaults.n_slots=4"};
    cr_assert_eq(kb_ccl_override(m, same, 1), 0, "%s", kb_last_error(m));
    cr_assert_null(kb__ccl_state_plan(m));
    reduce_expect(m, a, 8, NULL, 1, "CUBE0 after kb_ccl_override");
    reduce_expect(m, b, 2, NULL, 1, "PAIR after kb_ccl_override");
    reduce_expect(m, a, 8, NULL, 0, "CUBE0 again");
    cr_assert_eq(kb_ccl_configure(m, NULL, NULL, 0), 0, "%s", kb_last_error(m));
    reduce_expect(m, b, 2, NULL, 1, "PAIR after kb_ccl_configure");
    reduce_expect(m, a, 8, NULL, 1, "CUBE0 after kb_ccl_configure");
    kb_close(m);
}
