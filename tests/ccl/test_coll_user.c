/*
 * Collective algorithms of the user's own (kb_ccl_register, tl_ccl_sched):
 * the example's kernel, written with the public API only, runs through the
 * collective calls like a built-in one, checked against the host;
 * registration refuses bad names, taken names, unknown collectives and
 * topologies; a kernel that leaves a message unreceived fails the call;
 * tl_ccl_sched and the queue calls outside a collective are kernel errors.
 */
#include "ccl/coll_fixture.h"

/* The kernel of examples/user_ccl (pass_allreduce: whole pieces passed
 * around the ring, public API only), with its bench plug-in around it. */
#include "../../examples/user_ccl/pass_allreduce.c"

/* Adds to m's configuration an all_reduce algorithm `algo` over topology
 * that runs module. */
static void add_algorithm(kb_machine *m, const char *algo, const char *module, const char *topology)
{
    char set[160];
    snprintf(set, sizeof set,
             "ccl.algorithms.%s={module: %s, collective: all_reduce, topology: %s}", algo, module,
             topology);
    const char *sets[] = {set};
    cr_assert_eq(kb_ccl_override(m, sets, 1), 0, "%s", kb_last_error(m));
}

/* All-reduces t with algorithm algo expecting the error code want; *e
 * gets the message. */
static void all_reduce_fails(kb_machine *m, kb_tensor *t, const char *algo, int want, kb__err *e)
{
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, algo, 1, t, NULL, 0, NULL, 0, 0, NULL};
    cr_assert_eq(kb__ccl_run(m, &r, NULL, e), want, "%s", e->msg);
}

static kb_machine *with_pass(void)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(kb_ccl_register(m, "pass_allreduce", "all_reduce", "ring_1d", pass_allreduce), 0,
                 "%s", kb_last_error(m));
    add_algorithm(m, "pass", "pass_allreduce", "ring_1d");
    return m;
}

Test(coll_user, a_registered_kernel_all_reduces_like_a_built_in_one)
{
    kb_machine *m = with_pass();
    const struct {
        cf_place where;
        int w;
    } worlds[] = {{CF_ONE_CUBE, 4}, {CF_CUBES, 16}, {CF_TWO_SIPS, 16}};
    for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++) {
        kb_tensor t = cf_tensor(m, "x", worlds[i].where, worlds[i].w, 37, KB_F32, 1);
        cf_check_all_reduce(m, t, "pass", KB_SUM, worlds[i].w, 37, KB_F32, NULL);
        kb_free(m, t);
        t = cf_tensor(m, "y", worlds[i].where, worlds[i].w, 37, KB_F16, 1);
        cf_check_all_reduce(m, t, "pass", KB_MAX, worlds[i].w, 37, KB_F16, NULL);
        kb_free(m, t);
    }
    /* through the public call, as the default all_reduce */
    const char *def[] = {"ccl.defaults.algorithm.all_reduce=pass"};
    cr_assert_eq(kb_ccl_override(m, def, 1), 0, "%s", kb_last_error(m));
    kb_tensor t = cf_tensor(m, "z", CF_ONE_CUBE, 8, 1000, KB_F32, 1);
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_all_reduce(m, t, KB_SUM), 0, "%s", kb_last_error(m));
    float *h = cf_read(m, t, 8 * 1000);
    for (int64_t x = 0; x < 8 * 1000; x++)
        cr_assert_eq(h[x], cf_expect(KB_SUM, 8, x % 1000, KB_F32), "element %lld", (long long)x);
    free(h);
    kb_ccl_report rep;
    cr_assert_eq(kb_ccl_last(m, &rep), 0);
    cr_assert_str_eq(rep.algorithm, "pass");
    kb__ccl_settings q;
    kb__ccl_settings_builtin(&q);
    cr_assert_str_eq(rep.buffer_kind, kb__ccl_buffer_name(q.buffer_kind));
    cr_assert_eq(rep.n_slots, (int)q.n_slots);
    cr_assert_eq(rep.slot_size, q.slot_size);
    /* at most 16 KiB, cut to whole slot payloads (docs/ccl.md) */
    cr_assert_eq(rep.piece_bytes, 16384 - 16384 % (q.slot_size - 64));
    kb_close(m);
}

Test(coll_user, registration_refuses_what_it_cannot_use)
{
    kb_machine *m = with_pass();
    struct {
        const char *module, *coll, *topo;
        tl_kernel_fn fn;
        const char *want;
    } bad[] = {
        {"", "all_reduce", "ring_1d", pass_allreduce, "module name '': expected 1 to 63"},
        {"a b", "all_reduce", "ring_1d", pass_allreduce, "module name 'a b': expected"},
        /* ccl.yaml's rule for algorithm names, word for word */
        {"9lives", "all_reduce", "ring_1d", pass_allreduce,
         "kb_ccl_register: module name '9lives': expected 1 to 63 letters, digits, '_' and '-', "
         "starting with a letter or '_'"},
        {"a.b", "all_reduce", "ring_1d", pass_allreduce, "module name 'a.b': expected"},
        {"-x", "all_reduce", "ring_1d", pass_allreduce, "module name '-x': expected"},
        {NULL, "all_reduce", "ring_1d", pass_allreduce, "module name '(null)'"},
        {"ring_allreduce", "all_reduce", "ring_1d", pass_allreduce,
         "module 'ring_allreduce' is built in"},
        {"pass_allreduce", "all_reduce", "ring_1d", pass_allreduce,
         "module 'pass_allreduce' is already registered"},
        {"x", "allreduce", "ring_1d", pass_allreduce, "unknown collective 'allreduce'"},
        {"x", "all_reduce", "ring", pass_allreduce, "unknown topology 'ring'"},
        {"x", "all_reduce", "ring_1d", NULL, "x: no kernel function"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(kb_ccl_register(m, bad[i].module, bad[i].coll, bad[i].topo, bad[i].fn),
                     KB_EINVAL, "case %zu", i);
        cr_assert(strstr(kb_last_error(m), bad[i].want), "case %zu: %s", i, kb_last_error(m));
    }
    char long_name[65];
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    cr_assert_eq(kb_ccl_register(m, long_name, "all_reduce", "ring_1d", pass_allreduce), KB_EINVAL);
    long_name[63] = '\0';
    cr_assert_eq(kb_ccl_register(m, long_name, "all_reduce", "ring_1d", pass_allreduce), 0, "%s",
                 kb_last_error(m));
    cr_assert_eq(kb_ccl_register(m, "_my-mod", "all_reduce", "ring_1d", pass_allreduce), 0, "%s",
                 kb_last_error(m));
    cr_assert_eq(kb_ccl_register(NULL, "y", "all_reduce", "ring_1d", pass_allreduce), KB_EINVAL);
    /* a module over another topology than its algorithm's is refused at the call */
    cr_assert_eq(kb_ccl_register(m, "pass_tree", "all_reduce", "tree", pass_allreduce), 0);
    add_algorithm(m, "wrong", "pass_tree", "ring_1d");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__err e;
    all_reduce_fails(m, &t, "wrong", KB_ECONFIG, &e);
    cr_assert(strstr(e.msg, "module 'pass_tree' implements all_reduce over tree"), "%s", e.msg);
    /* an unknown module lists the registered ones too */
    add_algorithm(m, "u", "nope", "ring_1d");
    all_reduce_fails(m, &t, "u", KB_ENOTFOUND, &e);
    cr_assert(strstr(e.msg, "unknown module 'nope'") && strstr(e.msg, "pass_allreduce") &&
                  strstr(e.msg, "ring_allreduce"),
              "%s", e.msg);
    kb_close(m);
}

/* Sends one message to NEXT and receives nothing. */
static void only_sends(tl_ctx *k)
{
    int64_t len = 4;
    tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &len, tl_ccl_sched(k)->dtype));
}

Test(coll_user, a_kernel_that_leaves_messages_unreceived_fails_the_call)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(kb_ccl_register(m, "only_sends", "all_reduce", "ring_1d", only_sends), 0);
    add_algorithm(m, "leaky", "only_sends", "ring_1d");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__err e;
    all_reduce_fails(m, &t, "leaky", KB_ECOLLECTIVE, &e);
    cr_assert(strstr(e.msg, "algorithm 'leaky', 4 ranks") &&
                  strstr(e.msg, "rank 1 (sip0/cube0/pe1) received 0 of the 1 message(s) rank 0 "
                                "(sip0/cube0/pe0) sent it (direction W)"),
              "%s", e.msg);
    /* the queues were dropped: the next collective starts from empty rings */
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 8, KB_F32, NULL);
    kb_close(m);
}

static void reads_sched(tl_ctx *k)
{
    (void)tl_ccl_sched(k);
}

Test(coll_user, tl_ccl_sched_outside_a_collective_is_a_kernel_error)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 1, 8, KB_F32, 1);
    kb_arg a = kb_arg_tensor(t);
    kb_launch_id id;
    int rc = kb_launch(m, "reads_sched", reads_sched, NULL, &a, 1, &id);
    if (!rc) rc = kb_wait(m, id);
    cr_assert_eq(rc, KB_ESTATE, "%s", kb_last_error(m));
    cr_assert(strstr(kb_last_error(m), "kernel 'reads_sched' was not launched by a collective"),
              "%s", kb_last_error(m));
    kb_close(m);
}

/* A normal kernel that sends to NEXT, as a collective kernel would. */
static void stray_send(tl_ctx *k)
{
    int64_t len = 8;
    tl_send(k, TL_DIR_NEXT, tl_full(k, 1, &len, 1000.0, TL_F32));
}

/* A normal kernel that waits for a message from PREV. */
static void stray_recv(tl_ctx *k)
{
    int64_t len = 8;
    (void)tl_recv(k, TL_DIR_PREV, 1, &len, TL_F32);
}

static int launch_normal(kb_machine *m, kb_tensor t, const char *name, tl_kernel_fn fn)
{
    kb_arg a = kb_arg_tensor(t);
    kb_launch_id id;
    int rc = kb_launch(m, name, fn, NULL, &a, 1, &id);
    return rc ? rc : kb_wait(m, id);
}

Test(coll_user, queue_calls_outside_a_collective_are_kernel_errors_and_leave_the_queues_alone)
{
    kb_machine *m = with_pass();
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, t, "pass", KB_SUM, 4, 8, KB_F32, NULL); /* installs the queues */
    const struct {
        const char *name;
        tl_kernel_fn fn;
        const char *call;
    } k[] = {{"stray_send", stray_send, "tl_send"}, {"stray_recv", stray_recv, "tl_recv_async"}};
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(launch_normal(m, t, k[i].name, k[i].fn), KB_ESTATE, "%s", kb_last_error(m));
        char want[96];
        snprintf(want, sizeof want, "%s: kernel '%s' was not launched by a collective call",
                 k[i].call, k[i].name);
        cr_assert(strstr(kb_last_error(m), want) && strstr(kb_last_error(m), "program 0 on sip0"),
                  "%s", kb_last_error(m));
    }
    /* the install is reused: no stray message, no parked receive */
    kb_tensor u = cf_tensor(m, "y", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    cf_check_all_reduce(m, u, "pass", KB_SUM, 4, 8, KB_F32, NULL);
    kb_close(m);
}
