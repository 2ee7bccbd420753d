/* Tensor API misuse on a small machine (2 SIPs × 2 cubes × 2 PEs): every
 * bad request fails with a message naming what was wrong, loses nothing,
 * and leaves the machine usable. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/internal.h"
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
    kb_policy rep = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1};
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
