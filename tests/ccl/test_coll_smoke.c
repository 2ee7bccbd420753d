#include "ccl/coll_fixture.h"

Test(coll_smoke, ring_4)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 100, KB_F32, 1);
    kb__coll_info info;
    cf_check_all_reduce(m, t, NULL, KB_SUM, 4, 100, KB_F32, &info);
    printf("t %llu..%llu pred %llu\n", (unsigned long long)info.t_start, (unsigned long long)info.t_end, (unsigned long long)info.predicted_ps);
    kb_close(m);
}
