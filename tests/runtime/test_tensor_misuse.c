/* Tensor API misuse on a small machine (2 SIPs × 2 cubes × 2 PEs): every
 * bad request fails with a message naming what was wrong, loses nothing,
 * and leaves the machine usable. Handles and launch ids used with a machine
 * that did not make them are refused the same way. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernbench/dist.h"
#include "kernbench/tl.h"
#include "runtime/machine.h"
#include "runtime/memory.h"
#include "support/machine.h"

/* A tensor round-trips data: the machine still works. */
static void assert_usable(kb_machine *m)
{
    int64_t shape[2] = {8, 16};
    float in[128], out[128];
    for (int i = 0; i < 128; i++)
        in[i] = (float)i;
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "probe", 2, shape, KB_F32, NULL, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_from_host(m, t, in, sizeof in, KB_F32), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_to_host(m, t, out, sizeof out, KB_F32), 0, "%s", kb_last_error(m));
    cr_assert_arr_eq(in, out, sizeof in);
    cr_assert_eq(kb_free(m, t), 0, "%s", kb_last_error(m));
}

Test(tensor_misuse, a_shard_larger_than_its_hbm_slice_is_enospc_naming_the_request)
{
    kb_machine *m = kb_test_small_machine(0);
    /* (2^63 - 2) bf16 elements: 2^64 - 4 bytes, which a page round-up would wrap to 0 */
    int64_t shape[1] = {INT64_MAX - 1};
    kb_policy rep = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    kb_tensor t = {1};
    cr_assert_eq(kb_empty(m, "huge", 1, shape, KB_BF16, &rep, &t), KB_ENOSPC, "%s",
                 kb_last_error(m));
    cr_assert_eq(t.id, 0);
    char want[64];
    snprintf(want, sizeof want, "%" PRIu64 " bytes", (uint64_t)(INT64_MAX - 1) * 2);
    cr_assert(strstr(kb_last_error(m), "tensor 'huge'"), "%s", kb_last_error(m));
    cr_assert(strstr(kb_last_error(m), want), "%s", kb_last_error(m));
    cr_assert(kb__rt_memory_pristine(m));
    assert_usable(m);
    kb_close(m);
}

Test(tensor_misuse, a_copy_to_host_without_data_gives_zeros)
{
    kb_machine *m = kb_test_small_machine(1);
    int64_t shape[2] = {8, 16};
    kb_tensor t;
    cr_assert_eq(kb_full(m, "f", 2, shape, KB_F32, NULL, 5.0, &t), 0, "%s", kb_last_error(m));
    /* a staging buffer that held bytes before: it must not leak into the copy */
    float in[128], out[128];
    for (int i = 0; i < 128; i++)
        in[i] = (float)i + 1;
    cr_assert_eq(kb_copy_from_host(m, t, in, sizeof in, KB_F32), 0, "%s", kb_last_error(m));
    memset(out, 0x7f, sizeof out);
    cr_assert_eq(kb_copy_to_host(m, t, out, sizeof out, KB_F32), 0, "%s", kb_last_error(m));
    for (int i = 0; i < 128; i++)
        cr_assert_eq(out[i], 0.0f, "element %d is %g", i, (double)out[i]);
    memset(out, 0x7f, sizeof out);
    cr_assert_eq(kb_copy_rows_to_host(m, t, 2, 3, out, 3 * 16 * sizeof(float), KB_F32), 0);
    for (int i = 0; i < 3 * 16; i++)
        cr_assert_eq(out[i], 0.0f, "element %d is %g", i, (double)out[i]);
    cr_assert_eq(kb_free(m, t), 0);
    kb_close(m);
}

Test(tensor_misuse, info_calls_without_an_output_say_so)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape[1] = {32};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "v", 1, shape, KB_F32, NULL, &t), 0);
    cr_assert_eq(kb_tensor_get_info(m, t, NULL), KB_EINVAL);
    cr_assert(strstr(kb_last_error(m), "kb_tensor_get_info: out is NULL"), "%s", kb_last_error(m));
    cr_assert_eq(kb_tensor_get_shard(m, t, 0, NULL), KB_EINVAL);
    cr_assert(strstr(kb_last_error(m), "kb_tensor_get_shard: out is NULL"), "%s", kb_last_error(m));
    cr_assert_eq(kb_free(m, t), 0);
    kb_close(m);
}

/* x += 1 over the local shard of a 1-D f32 argument 0. */
static void add_one(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0);
    int64_t n = tl_tensor_dim(x, 0);
    for (int64_t b = 0; b < tl_cdiv(n, 32); b++) {
        tl_tile offs = tl_add(k, tl_arange(k, 0, 32), tl_scalar(k, (double)(b * 32), TL_I32));
        tl_tile mask = tl_lt(k, offs, tl_scalar(k, (double)n, TL_I32));
        tl_tile v = tl_load(k, x, offs, mask, TL_NONE);
        tl_store(k, x, offs, tl_add(k, v, tl_scalar(k, 1.0, TL_F32)), mask);
    }
}

/* Runs add_one on m over t (and the other arguments) to completion. */
static void run_add_one(kb_machine *m, kb_tensor t)
{
    kb_arg a[1] = {kb_arg_tensor(t)};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "add_one", add_one, NULL, a, 1, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
}

/* t on m holds base + i + add at element i of n. */
static void assert_holds(kb_machine *m, kb_tensor t, int n, float base)
{
    float out[128];
    cr_assert_leq(n, 128);
    cr_assert_eq(kb_copy_to_host(m, t, out, (size_t)n * sizeof *out, KB_F32), 0, "%s",
                 kb_last_error(m));
    for (int i = 0; i < n; i++)
        cr_assert_eq(out[i], base + (float)i, "element %d is %g, expected %g", i, (double)out[i],
                     (double)(base + (float)i));
}

/* rc and m's message are the refusal of a handle (of tensor id `serial`)
 * that another machine made. */
static void expect_foreign(kb_machine *m, int rc, const char *call, uint64_t serial)
{
    char want[96];
    snprintf(want, sizeof want, "tensor id %" PRIu64 " is a handle made by another machine",
             serial);
    cr_expect_eq(rc, KB_EINVAL, "%s returned %d: %s", call, rc, kb_last_error(m));
    cr_expect(strstr(kb_last_error(m), want), "%s: %s", call, kb_last_error(m));
}

/* Two machines whose first tensors have the same slot and serial: each
 * call on one machine with the other's handle is refused, and the tensor
 * of the same slot and serial on the called machine is left alone. */
Test(tensor_misuse, a_handle_from_another_machine_is_einval_and_touches_nothing)
{
    kb_machine *a = kb_test_small_machine(0), *b = kb_test_small_machine(0);
    int64_t n = 128;
    float in[128], junk[128];
    kb_tensor ta, tb;
    cr_assert_eq(kb_empty(a, "xa", 1, &n, KB_F32, NULL, &ta), 0, "%s", kb_last_error(a));
    cr_assert_eq(kb_empty(b, "xb", 1, &n, KB_F32, NULL, &tb), 0, "%s", kb_last_error(b));
    for (int i = 0; i < 128; i++)
        in[i] = (float)i, junk[i] = -7.0f;
    cr_assert_eq(kb_copy_from_host(a, ta, in, sizeof in, KB_F32), 0, "%s", kb_last_error(a));
    for (int i = 0; i < 128; i++)
        in[i] = 1000.0f + (float)i;
    cr_assert_eq(kb_copy_from_host(b, tb, in, sizeof in, KB_F32), 0, "%s", kb_last_error(b));
    cr_expect_neq(ta.id, tb.id, "two machines made the same handle");

    /* b's handle on a: a's tensor of the same slot and serial is the victim */
    expect_foreign(a, kb_copy_from_host(a, tb, junk, sizeof junk, KB_F32), "kb_copy_from_host", 1);
    expect_foreign(a, kb_copy_rows_from_host(a, tb, 0, 1, junk, sizeof junk, KB_F32),
                   "kb_copy_rows_from_host", 1);
    float out[128];
    expect_foreign(a, kb_copy_to_host(a, tb, out, sizeof out, KB_F32), "kb_copy_to_host", 1);
    expect_foreign(a, kb_copy_rows_to_host(a, tb, 0, 1, out, sizeof out, KB_F32),
                   "kb_copy_rows_to_host", 1);
    kb_tensor_info info;
    expect_foreign(a, kb_tensor_get_info(a, tb, &info), "kb_tensor_get_info", 1);
    kb_shard_info sh;
    expect_foreign(a, kb_tensor_get_shard(a, tb, 0, &sh), "kb_tensor_get_shard", 1);
    char buf[512];
    size_t needed = 0;
    expect_foreign(a, kb_tensor_describe(a, tb, buf, sizeof buf, &needed), "kb_tensor_describe", 1);
    kb_launch_id id;
    kb_arg one[1] = {kb_arg_tensor(tb)};
    expect_foreign(a, kb_launch(a, "add_one", add_one, NULL, one, 1, &id), "kb_launch", 1);
    kb_arg two[2] = {kb_arg_tensor(ta), kb_arg_tensor(tb)};
    expect_foreign(a, kb_launch(a, "add_one", add_one, NULL, two, 2, &id), "kb_launch (argument 1)",
                   1);
    cr_expect(strstr(kb_last_error(a), "kb_launch add_one: argument 1: "), "%s", kb_last_error(a));
    cr_assert_eq(kb_sync(a), 0, "a refused launch left something to run: %s", kb_last_error(a));
    cr_assert_eq(kb_init_process_group(a, "ahbm"), 0, "%s", kb_last_error(a));
    expect_foreign(a, kb_all_reduce(a, tb, KB_SUM), "kb_all_reduce", 1);
    expect_foreign(a, kb_broadcast(a, tb, 0), "kb_broadcast", 1);
    expect_foreign(a, kb_free(a, tb), "kb_free", 1);
    /* and a's handle on b */
    expect_foreign(b, kb_free(b, ta), "kb_free", 1);
    expect_foreign(b, kb_copy_to_host(b, ta, out, sizeof out, KB_F32), "kb_copy_to_host", 1);

    /* both tensors hold what was written and still work with their own machine */
    assert_holds(a, ta, 128, 0.0f);
    assert_holds(b, tb, 128, 1000.0f);
    run_add_one(a, ta);
    run_add_one(b, tb);
    assert_holds(a, ta, 128, 1.0f);
    assert_holds(b, tb, 128, 1001.0f);
    cr_assert_eq(kb_tensor_get_info(a, ta, &info), 0, "%s", kb_last_error(a));
    cr_expect_str_eq(info.name, "xa");
    cr_assert_eq(kb_tensor_get_info(b, tb, &info), 0, "%s", kb_last_error(b));
    cr_expect_str_eq(info.name, "xb");
    cr_assert_eq(kb_all_reduce(a, ta, KB_MAX), 0, "%s", kb_last_error(a));
    assert_usable(a);
    assert_usable(b);
    cr_assert_eq(kb_free(a, ta), 0, "%s", kb_last_error(a));
    cr_assert_eq(kb_free(b, tb), 0, "%s", kb_last_error(b));
    cr_assert(kb__rt_memory_pristine(b)); /* a keeps its collective queues */
    kb_close(a);
    kb_close(b);
}

/* A handle kept after its machine was closed is refused by a machine
 * opened later, whose first tensor has the same slot and serial. */
Test(tensor_misuse, a_handle_outliving_its_machine_is_refused_by_a_later_machine)
{
    int64_t n = 16;
    kb_machine *a = kb_test_small_machine(0);
    kb_tensor old, t;
    cr_assert_eq(kb_full(a, "old", 1, &n, KB_F32, NULL, 1.0, &old), 0, "%s", kb_last_error(a));
    kb_close(a);
    kb_machine *c = kb_test_small_machine(0);
    cr_assert_eq(kb_empty(c, "new", 1, &n, KB_F32, NULL, &t), 0, "%s", kb_last_error(c));
    float in[16];
    for (int i = 0; i < 16; i++)
        in[i] = 5.0f + (float)i;
    cr_assert_eq(kb_copy_from_host(c, t, in, sizeof in, KB_F32), 0, "%s", kb_last_error(c));
    expect_foreign(c, kb_free(c, old), "kb_free", 1);
    assert_holds(c, t, 16, 5.0f);
    cr_assert_eq(kb_free(c, t), 0, "%s", kb_last_error(c));
    kb_close(c);
}

/* With every machine tag held, kb_open fails saying so (no two open
 * machines ever share a tag) and works again once one is given back. */
Test(tensor_misuse, when_every_machine_tag_is_held_kb_open_fails_until_one_is_free)
{
    kb_machine *a = kb_test_small_machine(0);
    static uint32_t held[KB__RT_MAX_TAGS];
    static uint8_t seen[KB__RT_MAX_TAGS];
    seen[a->tag] = 1;
    uint32_t n = 0;
    kb__err e = {0};
    while (kb__rt_tag_take(&held[n], &e) == 0) {
        cr_assert(held[n] > 0 && held[n] < KB__RT_MAX_TAGS && !seen[held[n]], "tag %u", held[n]);
        seen[held[n++]] = 1;
    }
    cr_assert_eq(n, KB__RT_MAX_TAGS - 2, "every tag but 0 and a's");
    cr_assert_eq(e.code, KB_ENOMEM);
    cr_assert(strstr(e.msg, "4095 machines are open"), "%s", e.msg);
    kb_machine *b = NULL;
    char eb[256];
    cr_assert_eq(kb_open(&b, NULL, eb, sizeof eb), KB_ENOMEM);
    cr_assert_null(b);
    cr_assert(strstr(eb, "kb_open: 4095 machines are open"), "%s", eb);
    assert_usable(a);
    kb__rt_tag_release(held[--n]);
    b = kb_test_small_machine(0);
    cr_assert_eq(b->tag, held[n]);
    int64_t len = 16;
    kb_tensor ta, tb;
    cr_assert_eq(kb_zeros(a, "x", 1, &len, KB_F32, NULL, &ta), 0, "%s", kb_last_error(a));
    cr_assert_eq(kb_zeros(b, "x", 1, &len, KB_F32, NULL, &tb), 0, "%s", kb_last_error(b));
    expect_foreign(a, kb_free(a, tb), "kb_free", 1); /* b's first tensor */
    expect_foreign(b, kb_free(b, ta), "kb_free", 2); /* a's second, after "probe" */
    while (n)
        kb__rt_tag_release(held[--n]);
    kb_close(a);
    kb_close(b);
}

/* Serials are 32 bits: the machine makes tensor 2^32 - 1, then refuses more. */
Test(tensor_misuse, a_machine_out_of_tensor_serials_says_so)
{
    kb_machine *m = kb_test_small_machine(0);
    m->next_serial = KB__RT_MAX_SERIAL; /* as if it had made 2^32 - 2 tensors */
    int64_t n = 16;
    kb_tensor t, u = {1};
    cr_assert_eq(kb_empty(m, "last", 1, &n, KB_F32, NULL, &t), 0, "%s", kb_last_error(m));
    float in[16];
    for (int i = 0; i < 16; i++)
        in[i] = 3.0f + (float)i;
    cr_assert_eq(kb_copy_from_host(m, t, in, sizeof in, KB_F32), 0, "%s", kb_last_error(m));
    assert_holds(m, t, 16, 3.0f);
    cr_assert_eq(kb_empty(m, "over", 1, &n, KB_F32, NULL, &u), KB_ENOMEM);
    cr_assert_eq(u.id, 0);
    cr_assert(strstr(kb_last_error(m), "tensor 'over': this machine has made 4294967295 tensors"),
              "%s", kb_last_error(m));
    assert_holds(m, t, 16, 3.0f);
    cr_assert_eq(kb_free(m, t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_free(m, t), KB_ENOTFOUND);
    cr_assert(strstr(kb_last_error(m), "tensor 'last' (id 4294967295) was freed"), "%s",
              kb_last_error(m));
    cr_assert(kb__rt_memory_pristine(m));
    kb_close(m);
}

/* Two machines whose first launches have the same serial: waiting on one
 * machine for the other's launch id is refused before any launch is looked
 * at, and each machine's own launch is still outstanding, waitable and runs
 * on its own tensor. */
Test(tensor_misuse, a_launch_id_from_another_machine_is_einval_and_touches_nothing)
{
    kb_machine *a = kb_test_small_machine(0), *b = kb_test_small_machine(0);
    int64_t n = 128;
    float in[128];
    kb_tensor ta, tb;
    cr_assert_eq(kb_empty(a, "xa", 1, &n, KB_F32, NULL, &ta), 0, "%s", kb_last_error(a));
    cr_assert_eq(kb_empty(b, "xb", 1, &n, KB_F32, NULL, &tb), 0, "%s", kb_last_error(b));
    for (int i = 0; i < 128; i++)
        in[i] = (float)i;
    cr_assert_eq(kb_copy_from_host(a, ta, in, sizeof in, KB_F32), 0, "%s", kb_last_error(a));
    for (int i = 0; i < 128; i++)
        in[i] = 1000.0f + (float)i;
    cr_assert_eq(kb_copy_from_host(b, tb, in, sizeof in, KB_F32), 0, "%s", kb_last_error(b));

    kb_arg arg_a[1] = {kb_arg_tensor(ta)}, arg_b[1] = {kb_arg_tensor(tb)};
    kb_launch_id ia, ib;
    cr_assert_eq(kb_launch(a, "add_one", add_one, NULL, arg_a, 1, &ia), 0, "%s", kb_last_error(a));
    cr_assert_eq(kb_launch(b, "add_one", add_one, NULL, arg_b, 1, &ib), 0, "%s", kb_last_error(b));
    cr_expect_neq(ia.id, ib.id, "two machines made the same launch id");

    int rc = kb_wait(b, ia);
    cr_expect_eq(rc, KB_EINVAL, "kb_wait(b, a's id) returned %d: %s", rc, kb_last_error(b));
    cr_expect_str_eq(kb_last_error(b), "kb_wait: launch id 1 was made by another machine (a "
                                       "launch id works only with the machine that launched it)");
    rc = kb_wait(a, ib);
    cr_expect_eq(rc, KB_EINVAL, "kb_wait(a, b's id) returned %d: %s", rc, kb_last_error(a));
    cr_expect(strstr(kb_last_error(a), "kb_wait: launch id 1 was made by another machine"), "%s",
              kb_last_error(a));
    /* an id that is no machine's (no tag) is not outstanding anywhere */
    cr_expect_eq(kb_wait(b, (kb_launch_id){1}), KB_ENOTFOUND, "%s", kb_last_error(b));
    cr_expect(strstr(kb_last_error(b), "kb_wait: launch 1 is not outstanding"), "%s",
              kb_last_error(b));

    /* both launches are still outstanding, and each ran once on its own tensor */
    cr_assert_eq(kb_wait(b, ib), 0, "%s", kb_last_error(b));
    cr_assert_eq(kb_wait(a, ia), 0, "%s", kb_last_error(a));
    assert_holds(a, ta, 128, 1.0f);
    assert_holds(b, tb, 128, 1001.0f);
    cr_expect_eq(kb_wait(b, ib), KB_ENOTFOUND, "a second wait: %s", kb_last_error(b));
    cr_expect(strstr(kb_last_error(b), "kb_wait: launch 1 is not outstanding"), "%s",
              kb_last_error(b));
    /* the next launches go on with their own machine */
    run_add_one(a, ta);
    run_add_one(b, tb);
    assert_holds(a, ta, 128, 2.0f);
    assert_holds(b, tb, 128, 1002.0f);
    cr_assert_eq(kb_free(a, ta), 0, "%s", kb_last_error(a));
    cr_assert_eq(kb_free(b, tb), 0, "%s", kb_last_error(b));
    kb_close(a);
    kb_close(b);
}
