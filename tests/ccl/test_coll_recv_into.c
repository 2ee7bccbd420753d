/*
 * copy_to_dst receives (tl_recv_into): the queue copies each piece from
 * the ring straight into a tensor. A chain broadcast written with them
 * leaves every buffer equal to the root's (host reference), over one cube
 * and two, TCM and HBM rings, messages of many slots; the timing rule (a
 * piece's copy goes ring -> the receiver's DMA node -> the destination's
 * memory, and its slot's credit goes back once that write landed) holds to
 * the picosecond against the closed form of the two copies' paths; bad
 * destinations are kernel errors naming the rank, PE, direction, tensor
 * and address, and the machine stays usable.
 */
#include <math.h>

#include "ccl/coll_fixture.h"
#include "host/device.h"
#include "runtime/machine.h"

/* A flat view of elements [off, off + len) of buffer t. */
static tl_block_ptr flat(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len)
{
    int64_t n = 1, stride = 1;
    for (int d = 0; d < tl_tensor_ndim(t); d++)
        n *= tl_tensor_dim(t, d);
    return tl_make_block_ptr(k, t, 1, &n, &stride, &off, &len, NULL);
}

/* Broadcast along the ring from the root: each rank receives every piece
 * from PREV straight into its buffer and forwards it to NEXT (the last
 * rank before the root does not). */
static void chain_into(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int p = tl_world_size(k), pos = (tl_rank(k) - (int)s->root + p) % p;
    for (int64_t off = 0; off < s->elems; off += s->piece) {
        int64_t len = s->elems - off < s->piece ? s->elems - off : s->piece;
        uint64_t scope = tl_scope_begin(k);
        if (pos > 0) tl_recv_into(k, TL_DIR_PREV, buf, off, 1, &len, s->dtype);
        if (pos < p - 1)
            tl_send(k, TL_DIR_NEXT, tl_load_block(k, flat(k, buf, off, len), 0, TL_PAD_ZERO));
        tl_scope_end(k, scope, 0, NULL);
    }
}

static kb_machine *with(const char *module, tl_kernel_fn fn, const char *algo, const char *queues)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(kb_ccl_register(m, module, "broadcast", "ring_1d", fn), 0, "%s", kb_last_error(m));
    char set[256];
    snprintf(set, sizeof set,
             "ccl.algorithms.%s={module: %s, collective: broadcast, topology: ring_1d%s%s}", algo,
             module, queues[0] ? ", " : "", queues);
    const char *sets[] = {set};
    cr_assert_eq(kb_ccl_override(m, sets, 1), 0, "%s", kb_last_error(m));
    return m;
}

static int broadcast(kb_machine *m, kb_tensor t, const char *algo, uint32_t root,
                     kb__coll_info *info, kb__err *e)
{
    kb__coll_req q = {KB__CCL_BROADCAST, KB_SUM, algo, 1, &t, NULL, root, NULL, 0, 0, NULL};
    kb__err_clear(e);
    return kb__ccl_run(m, &q, info, e);
}

static void check_broadcast(kb_machine *m, cf_place where, int w, int64_t n, kb_dtype dt,
                            uint32_t root)
{
    kb_tensor t = cf_tensor(m, "x", where, w, n, dt, 1);
    kb__err e;
    cr_assert_eq(broadcast(m, t, "into", root, NULL, &e), 0, "%s", e.msg);
    float *h = cf_read(m, t, (int64_t)w * n);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < n; x++)
            cr_assert_eq(h[(int64_t)b * n + x], cf_round(cf_value((int)root, x), dt),
                         "world %d root %u: buffer %d element %lld", w, root, b, (long long)x);
    free(h);
    kb_free(m, t);
}

Test(recv_into, a_chain_broadcast_into_the_buffers_matches_the_host)
{
    kb_machine *m = with("chain_into", chain_into, "into", "");
    check_broadcast(m, CF_ONE_CUBE, 4, 1000, KB_F32, 0);
    check_broadcast(m, CF_ONE_CUBE, 8, 20000, KB_F32, 3); /* pieces of several slots */
    check_broadcast(m, CF_CUBES, 16, 5000, KB_F16, 9);
    check_broadcast(m, CF_TWO_SIPS, 4, 777, KB_F32, 1);
    kb_close(m);
    /* rings in HBM and in SRAM, one slot: every credit waits for a write */
    m = with("chain_into", chain_into, "into", "buffer_kind: hbm, n_slots: 1");
    check_broadcast(m, CF_ONE_CUBE, 4, 3000, KB_F32, 2);
    kb_close(m);
    m = with("chain_into", chain_into, "into", "buffer_kind: sram");
    check_broadcast(m, CF_SPREAD_PES, 4, 3000, KB_F16, 0);
    kb_close(m);
}

/* ---- the timing rule ---------------------------------------------------- */

/* Rank 0 sends its buffer as messages of one packet (64 f32); rank 1
 * receives each, one at a time, into a tile (mode 0) or into its buffer
 * (mode 1), and frees the result. */
#define MSG 64
static void timed(tl_ctx *k, int into)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int64_t len = MSG;
    if (tl_rank(k) == 0) {
        /* every message in TCM first: the second send then waits for the
         * first's credit in both modes (1 slot), and resumes wake_ns after it */
        tl_tile m[2];
        int n = (int)(s->elems / MSG);
        for (int i = 0; i < n; i++)
            m[i] = tl_load_block(k, flat(k, buf, i * MSG, len), 0, TL_PAD_ZERO);
        for (int i = 0; i < n; i++)
            tl_send(k, TL_DIR_NEXT, m[i]);
        return;
    }
    for (int64_t off = 0; off < s->elems; off += MSG) {
        tl_recv_handle h = into ? tl_recv_into_async(k, TL_DIR_PREV, buf, off, 1, &len, TL_F32)
                                : tl_recv_async(k, TL_DIR_PREV, 1, &len, TL_F32);
        tl_free(k, tl_wait(k, h));
    }
}
static void timed_tile(tl_ctx *k)
{
    timed(k, 0);
}
static void timed_into(tl_ctx *k)
{
    timed(k, 1);
}

/* ceil(ns * 1000) as the machine graph rounds each term. */
static kb__time ps(double ns)
{
    double v = ns * 1000.0, r = nearbyint(v);
    if (!(v > 0)) return 0;
    return fabs(v - r) <= 1e-6 ? (kb__time)r : (kb__time)ceil(v);
}

/* A one-packet message from -> via -> to, then written at md: Σ(o + w) +
 * Σ bytes / B_i over the links (router traversal on links leaving a
 * router), then the write's c·bytes / B_mem and L_mem (docs/timing-model.md). */
static kb__time copy_tail(kb__device *d, uint32_t from, uint32_t via, const kb__memctl *md,
                          uint64_t bytes)
{
    const kb__route *r;
    kb__err e;
    cr_assert_eq(kb__fabric_route(d->fab, from, via, md->node, &r, &e), 0, "%s", e.msg);
    const kb__topo *t = d->topo;
    kb__time sum = 0;
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__topo_link *l = &t->links[r->links[h]];
        sum += l->overhead_ps + l->wire_ps + ps((double)bytes / l->bw_gbs);
        if (t->nodes[l->from].role == KB__ROLE_ROUTER) sum += ps(t->params.cube.router_overhead_ns);
    }
    return sum + ps((double)md->channels * (double)bytes / md->bw_gbs) + md->lat_ps;
}

/* Kernel span of `msgs` messages through 1 slot, received per `mode`. */
static uint64_t span(int into, int msgs, kb__time *delta)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(
        kb_ccl_register(m, "timed", "broadcast", "ring_1d", into ? timed_into : timed_tile), 0,
        "%s", kb_last_error(m));
    const char *sets[] = {"ccl.algorithms.t={module: timed, collective: broadcast, topology: "
                          "ring_1d, n_slots: 1}"};
    cr_assert_eq(kb_ccl_override(m, sets, 1), 0, "%s", kb_last_error(m));
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 2, (int64_t)msgs * MSG, KB_F32, 1);
    kb__coll_info info;
    kb__err e;
    cr_assert_eq(broadcast(m, t, "t", 0, &info, &e), 0, "%s", e.msg);
    float *h = cf_read(m, t, 2 * (int64_t)msgs * MSG);
    if (into) /* rank 1's buffer got rank 0's */
        for (int64_t x = 0; x < (int64_t)msgs * MSG; x++)
            cr_assert_eq(h[(int64_t)msgs * MSG + x], (float)cf_value(0, x), "element %lld",
                         (long long)x);
    free(h);
    /* the closed forms of the two copies' differing tails: both read rank
     * 1's TCM ring through its DMA node; the tile's copy writes its TCM, the
     * copy_to_dst one its HBM slice, where rank 1's buffer is */
    kb_shard_info si;
    cr_assert_eq(kb_tensor_get_shard(m, t, 1, &si), 0);
    kb__device *d = m->dev;
    uint64_t tcm_pa;
    kb__err pe;
    cr_assert_eq(kb__device_pa(d, KB__SPACE_TCM, (uint32_t)si.sip, (uint32_t)si.cube,
                               (uint32_t)si.pe, d->topo->params.pe.tcm_reserved, &tcm_pa, &pe),
                 0, "%s", pe.msg);
    kb__memctl *tcm = kb__device_memctl(d, tcm_pa, &pe), *hbm = kb__device_memctl(d, si.pa, &pe);
    cr_assert(tcm && hbm);
    cr_assert_eq(hbm->space, KB__SPACE_HBM);
    uint32_t dma = (uint32_t)kb__device_node(d, KB__ROLE_PE_DMA, si.sip, si.cube, si.pe);
    uint64_t bytes = MSG * sizeof(float);
    cr_assert_eq(bytes, (uint64_t)kb__fabric_packet_bytes(d->fab));
    *delta = copy_tail(d, tcm->node, dma, hbm, bytes) - copy_tail(d, tcm->node, dma, tcm, bytes);
    kb_close(m);
    return info.t_run_end - info.t_run_start;
}

Test(recv_into, a_copy_to_dst_takes_the_closed_form_of_its_path_and_frees_its_slot_after)
{
    kb__time delta, d2;
    uint64_t tile1 = span(0, 1, &delta), into1 = span(1, 1, &d2);
    cr_assert_gt(delta, 0, "HBM is farther than TCM from the DMA node");
    /* one message: the copy starts when the slot is visible in both runs */
    cr_assert_eq(into1 - tile1, delta, "copy_to_dst %llu ps, tile %llu ps, closed form %llu ps",
                 (unsigned long long)into1, (unsigned long long)tile1, (unsigned long long)delta);
    /* two messages through one slot: the second waits for the first's
     * credit, which leaves when its write landed, so it lands delta later
     * and its own copy takes delta longer */
    uint64_t tile2 = span(0, 2, &d2), into2 = span(1, 2, &d2);
    cr_assert_eq(into2 - tile2, 2 * delta, "copy_to_dst %llu ps, tile %llu ps, 2 x %llu ps",
                 (unsigned long long)into2, (unsigned long long)tile2, (unsigned long long)delta);
}

/* ---- bad destinations ----------------------------------------------------- */

typedef enum bad_kind { BAD_NULL, BAD_DTYPE, BAD_SIZE, BAD_OFFSET, BAD_NEGATIVE } bad_kind;

/* Rank 0 sends 64 f32 to rank 1, which receives them wrongly per the
 * algorithm's name: the ring's second tensor argument carries no choice,
 * so each kind is its own module. */
static void bad(tl_ctx *k, bad_kind kind)
{
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int64_t len = MSG;
    if (tl_rank(k) == 0) {
        tl_send(k, TL_DIR_NEXT, tl_load_block(k, flat(k, buf, 0, len), 0, TL_PAD_ZERO));
        return;
    }
    int64_t big = tl_tensor_dim(buf, 0) + 1;
    switch (kind) {
    case BAD_NULL:
        tl_recv_into(k, TL_DIR_PREV, NULL, 0, 1, &len, TL_F32);
        break;
    case BAD_DTYPE:
        tl_recv_into(k, TL_DIR_PREV, buf, 0, 1, &len, TL_F16);
        break;
    case BAD_SIZE: /* one element more than the shard holds */
        tl_recv_into(k, TL_DIR_PREV, buf, 0, 1, &big, TL_F32);
        break;
    case BAD_OFFSET: /* the last element would be one past the shard */
        tl_recv_into(k, TL_DIR_PREV, buf, tl_tensor_dim(buf, 0) - MSG + 1, 1, &len, TL_F32);
        break;
    default:
        tl_recv_into(k, TL_DIR_PREV, buf, -1, 1, &len, TL_F32);
        break;
    }
}
static void bad_null(tl_ctx *k)
{
    bad(k, BAD_NULL);
}
static void bad_dtype(tl_ctx *k)
{
    bad(k, BAD_DTYPE);
}
static void bad_size(tl_ctx *k)
{
    bad(k, BAD_SIZE);
}
static void bad_offset(tl_ctx *k)
{
    bad(k, BAD_OFFSET);
}
static void bad_negative(tl_ctx *k)
{
    bad(k, BAD_NEGATIVE);
}

Test(recv_into, bad_destinations_are_kernel_errors_naming_the_queue_and_the_address)
{
    static const struct {
        const char *module;
        tl_kernel_fn fn;
        const char *want[2];
    } cases[] = {
        {"bad_null", bad_null, {"tl_recv_into from W: no destination tensor (NULL)", ""}},
        {"bad_dtype",
         bad_dtype,
         {"tl_recv_into from W into tensor 'x': the tensor is f32, the message is declared f16 "
          "(the queue copies bytes: the dtypes must match)",
          ""}},
        {"bad_size",
         bad_size,
         {"tl_recv_into from W: 129 elements (516 B) at element offset 0 of tensor 'x' do not "
          "fit its local shard: expected offset + elements <= 128 (VA 0x",
          ""}},
        {"bad_offset",
         bad_offset,
         {"64 elements (256 B) at element offset 65 of tensor 'x'", "<= 128"}},
        {"bad_negative", bad_negative, {"at element offset -1 of tensor 'x'", "<= 128"}},
    };
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 2, 2 * MSG, KB_F32, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(kb_ccl_register(m, cases[i].module, "broadcast", "ring_1d", cases[i].fn), 0,
                     "%s", kb_last_error(m));
        char set[160];
        snprintf(set, sizeof set,
                 "ccl.algorithms.a_%s={module: %s, collective: broadcast, topology: ring_1d}",
                 cases[i].module, cases[i].module);
        const char *sets[] = {set};
        cr_assert_eq(kb_ccl_override(m, sets, 1), 0, "%s", kb_last_error(m));
        char algo[80];
        snprintf(algo, sizeof algo, "a_%s", cases[i].module);
        kb__err e;
        int rc = broadcast(m, t, algo, 0, NULL, &e);
        cr_assert_lt(rc, 0, "%s ran", cases[i].module);
        cr_assert(strstr(e.msg, "rank 1 (sip0/cube0/pe1): "), "%s: %s", cases[i].module, e.msg);
        for (int j = 0; j < 2; j++)
            cr_assert(strstr(e.msg, cases[i].want[j]), "%s: expected '%s' in: %s", cases[i].module,
                      cases[i].want[j], e.msg);
    }
    /* the machine still runs collectives */
    kb_tensor u = cf_tensor(m, "y", CF_ONE_CUBE, 4, 100, KB_F32, 1);
    cf_check_all_reduce(m, u, "ring_allreduce", KB_SUM, 4, 100, KB_F32, NULL);
    kb_close(m);
}
