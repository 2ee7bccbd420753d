/*
 * kb_get_backend (torch.distributed.get_backend): NULL with a message
 * before the process group starts, "ahbm" after, from the driver and from
 * every spawned rank; NULL for a NULL machine.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "kernbench/dist.h"

static kb_machine *open_m(void)
{
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, NULL, eb, sizeof eb), 0, "%s", eb);
    return m;
}

Test(backend, none_before_the_process_group_and_ahbm_after)
{
    cr_assert_null(kb_get_backend(NULL));
    kb_machine *m = open_m();
    cr_assert_null(kb_get_backend(m));
    cr_assert(strstr(kb_last_error(m), "kb_get_backend: no process group"), "%s", kb_last_error(m));
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    cr_assert_str_eq(kb_get_backend(m), "ahbm");
    kb_close(m);
}

/* Each rank starts its own group; before that, it has none. */
static int rank_body(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    int *seen = arg;
    if (kb_get_backend(m)) return KB_ESTATE;
    int rc = kb_init_process_group(m, "ahbm");
    if (rc) return rc;
    const char *b = kb_get_backend(m);
    if (b && !strcmp(b, "ahbm")) seen[rank] = 1;
    return 0;
}

Test(backend, every_spawned_rank_sees_its_group_backend)
{
    kb_machine *m = open_m();
    int seen[2] = {0, 0};
    cr_assert_eq(kb_spawn(m, rank_body, 2, seen), 0, "%s", kb_last_error(m));
    cr_assert(seen[0] && seen[1]);
    kb_close(m);
}
