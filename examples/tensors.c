/*
 * tensors.c — create a sharded tensor, copy data in and out, look at where
 * its shards live.
 *
 *   cc tensors.c $(pkg-config --cflags --libs kernbench) -o tensors
 *   ./tensors
 */
#include <kernbench/kernbench.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    char err[512];
    kb_machine *m = NULL;
    if (kb_open(&m, NULL, err, sizeof err) != 0) { /* the built-in 256-PE machine */
        fprintf(stderr, "kb_open: %s\n", err);
        return 1;
    }
    /* 1024×1024 f16: one copy per SIP, columns split over 16 cubes × 8 PEs. */
    int64_t shape[2] = {1024, 1024};
    kb_tensor x;
    if (kb_zeros(m, "x", 2, shape, KB_F16, NULL, &x) != 0) {
        fprintf(stderr, "kb_zeros: %s\n", kb_last_error(m));
        kb_close(m);
        return 1;
    }
    float *host = malloc(sizeof(float) * 1024 * 1024);
    for (int i = 0; i < 1024 * 1024; i++)
        host[i] = (float)(i % 1000) * 0.25f;
    /* The host buffer is f32; the tensor stores f16 (rounded to nearest even). */
    if (kb_copy_from_host(m, x, host, sizeof(float) * 1024 * 1024, KB_F32) != 0 ||
        kb_copy_to_host(m, x, host, sizeof(float) * 1024 * 1024, KB_F32) != 0) {
        fprintf(stderr, "copy: %s\n", kb_last_error(m));
        free(host);
        kb_close(m);
        return 1;
    }
    printf("x[3][5] = %g after a round trip\n", host[3 * 1024 + 5]);

    kb_shard_info s;
    kb_tensor_get_shard(m, x, 9, &s);
    printf("shard 9 lives on sip%d/cube%d/pe%d: offset (%lld, %lld), shape %lld×%lld\n",
           s.sip, s.cube, s.pe, (long long)s.offset[0], (long long)s.offset[1],
           (long long)s.shape[0], (long long)s.shape[1]);

    kb_stats st;
    kb_stats_get(m, &st);
    printf("simulated time %.3f us; %llu bytes written, %llu read, %llu MMU messages\n",
           (double)st.now_ps / 1e6, (unsigned long long)st.bytes[KB_MSG_WRITE],
           (unsigned long long)st.bytes[KB_MSG_READ],
           (unsigned long long)st.messages[KB_MSG_MMU]);

    kb_free(m, x);
    /* Using x now is an error with a message, not a crash. */
    if (kb_copy_to_host(m, x, host, sizeof(float) * 1024 * 1024, KB_F32) != 0)
        printf("as expected: %s\n", kb_last_error(m));
    free(host);
    kb_close(m);
    return 0;
}
