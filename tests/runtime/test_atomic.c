/*
 * tl_atomic_add on the built-in machine: 128 programs on the 128 PEs of SIP
 * 0 each add 1 four times (four lanes on one element) to the last element of
 * a row-wise tensor, through the MMU and the fabric to the HBM slice that
 * holds it. No update is lost and every old value is seen exactly once: the
 * read-modify-write is indivisible at the memory.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "runtime/machine.h"

#define PROGS 128
#define PER   4

static void bump(tl_ctx *k)
{
    tl_tensor *c = tl_arg_tensor(k, 0);
    int32_t *olds = (int32_t *)(intptr_t)tl_arg_i64(k, 1);
    int64_t pid = tl_program_id(k, 0), n = tl_tensor_dim(c, 0);
    /* the tensor's last element, seen from this program's shard: regions
     * start one MMU page (4096 B) apart (docs/kernels.md, "Reach") */
    int64_t last = (PROGS - 1 - pid) * (4096 / 4) + n - 1;
    tl_tile offs = tl_full(k, 1, (int64_t[]){PER}, (double)last, TL_I32);
    tl_tile old = tl_atomic_add(k, c, offs, tl_literal_int(k, 1), TL_NONE);
    tl_read(k, old, olds + pid * PER, PER * sizeof(int32_t));
}

Test(atomic, adds_from_every_pe_of_a_sip_lose_no_update)
{
    kb_open_options o = {NULL, NULL, 0, 0, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    kb_set_device(m, 0);
    int64_t n = PROGS * PER;
    kb_tensor c;
    cr_assert_eq(kb_zeros(m, "c", 1, &n, KB_I32, NULL, &c), 0, "%s", kb_last_error(m));
    int32_t *olds = calloc(PROGS * PER, sizeof *olds);
    kb_arg a[2] = {kb_arg_tensor(c), kb_arg_i64((int64_t)(intptr_t)olds)};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "bump", bump, NULL, a, 2, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    int32_t *h = malloc((size_t)n * sizeof *h);
    cr_assert_eq(kb_copy_to_host(m, c, h, (size_t)n * 4, KB_I32), 0);
    cr_assert_eq(h[n - 1], PROGS * PER);
    for (int64_t i = 0; i < n - 1; i++)
        cr_assert_eq(h[i], 0);
    char *seen = calloc(PROGS * PER, 1);
    for (int i = 0; i < PROGS * PER; i++) {
        cr_assert(olds[i] >= 0 && olds[i] < PROGS * PER, "old %d", olds[i]);
        cr_assert_eq(seen[olds[i]], 0, "old value %d seen twice", olds[i]);
        seen[olds[i]] = 1;
    }
    free(seen);
    free(h);
    free(olds);
    kb_close(m);
}
