/*
 * asan_client.c — a client built with -fsanitize=address against the
 * library as built (not sanitized, in the normal build): kernels with local
 * arrays several frames deep end in a kernel error, which abandons their
 * frames on the coroutine stack, then launches on the same machine reuse
 * those stacks with deep frames of their own. Without the library's fiber
 * annotations and stack cleaning, ASan aborts on a poisoned redzone left
 * by an abandoned frame. Exits 0 when every launch gives the expected
 * status and the results are right. Built and run by asan_client.sh.
 */
#include <stdio.h>
#include <string.h>

#include "kernbench/kernbench.h"
#include "kernbench/tl.h"

#define DEPTH 6

/* Fills a local array in each of `depth` frames; at the bottom either
 * fails (a load from a NULL tensor: a kernel error) or stores the sum. */
static __attribute__((noinline)) int64_t frames(tl_ctx *k, int depth, int fail)
{
    volatile int64_t local[64];
    for (int i = 0; i < 64; i++)
        local[i] = depth * 64 + i;
    int64_t below = 0;
    if (depth > 0)
        below = frames(k, depth - 1, fail);
    else if (fail)
        tl_load(k, NULL, tl_arange(k, 0, 16), TL_NONE, TL_NONE); /* never returns */
    int64_t s = below;
    for (int i = 0; i < 64; i++)
        s += local[i];
    return s;
}

static void failing(tl_ctx *k)
{
    frames(k, DEPTH, 1);
}

static void working(tl_ctx *k)
{
    int64_t *out = (int64_t *)(intptr_t)tl_arg_i64(k, 1);
    int64_t s = frames(k, DEPTH, 0);
    if (tl_program_id(k, 0) == 0) *out = s;
}

int main(void)
{
    kb_open_options o = {NULL, NULL, 0, 1, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    if (kb_open(&m, &o, eb, sizeof eb)) {
        fprintf(stderr, "kb_open: %s\n", eb);
        return 1;
    }
    int64_t shape[1] = {64 * 16};
    kb_tensor t;
    if (kb_zeros(m, "x", 1, shape, KB_F32, NULL, &t)) {
        fprintf(stderr, "kb_zeros: %s\n", kb_last_error(m));
        return 1;
    }
    /* the closed form of frames(DEPTH): sum over depth d of sum_i (64 d + i) */
    int64_t want = 0;
    for (int d = 0; d <= DEPTH; d++)
        want += 64 * 64 * d + 64 * 63 / 2;
    for (int round = 0; round < 4; round++) {
        int64_t got = -1;
        kb_arg a[2] = {kb_arg_tensor(t), kb_arg_i64((int64_t)(intptr_t)&got)};
        kb_launch_id id;
        if (kb_launch(m, "failing", failing, NULL, a, 2, &id)) {
            fprintf(stderr, "launch: %s\n", kb_last_error(m));
            return 1;
        }
        int rc = kb_wait(m, id);
        if (rc != KB_EINVAL || !strstr(kb_last_error(m), "the tensor is NULL")) {
            fprintf(stderr, "round %d: failing kernel gave %d: %s\n", round, rc, kb_last_error(m));
            return 1;
        }
        if (kb_launch(m, "working", working, NULL, a, 2, &id) || kb_wait(m, id)) {
            fprintf(stderr, "round %d: working kernel: %s\n", round, kb_last_error(m));
            return 1;
        }
        if (got != want) {
            fprintf(stderr, "round %d: sum %lld, expected %lld\n", round, (long long)got,
                    (long long)want);
            return 1;
        }
    }
    kb_free(m, t);
    kb_close(m);
    puts("asan client: kernel errors and reused stacks clean");
    return 0;
}
