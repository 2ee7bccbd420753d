/*
 * open.c — kb_open: the runtime's machine (runtime/machine.h,
 * kb__rt_open) with the collectives' state opened beside it, so ccl.yaml
 * and the "ccl." overrides are checked when the machine opens.
 *
 * The runtime sits below the collectives and names none of them; this is
 * where the layers meet. Cost: that of kb__rt_open plus loading ccl.yaml.
 */
#include "ccl/collective.h"
#include "runtime/machine.h"

static int open_ccl(kb_machine *m, const kb_open_options *o, const char *const *sets, size_t n_sets,
                    kb__err *err)
{
    return kb__ccl_state_create(m, o ? o->ccl_path : NULL, sets, n_sets, err);
}

int kb_open(kb_machine **out, const kb_open_options *opts, char *errbuf, size_t errbuf_size)
{
    static const kb__rt_opener ccl = {"ccl.", open_ccl};
    return kb__rt_open(out, opts, &ccl, errbuf, errbuf_size);
}
