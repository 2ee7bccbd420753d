/*
 * machine.c — opening and closing machines, errors, clock, device binding,
 * statistics.
 *
 * kb__rt_open loads the machine description (built in or YAML, then the
 * overrides), opens the layer above that asked for it (kb_open is the
 * collectives', src/ccl/open.c: ccl.yaml and the "ccl." overrides, kept in
 * a machine slot of runtime/ranks.h), builds the allocators, MMU tables
 * and the simulated device
 * (host/device.h) from the same topology; the device's simulator is the
 * machine's clock and its store holds tensor data. Every
 * public call that fails goes through kb__rt_fail, which keeps the message
 * for kb_last_error; a call that succeeds leaves the last message alone.
 * Each open machine holds a tag of its own, the top bits of its tensor
 * handles (runtime/tensor.h), so a handle is refused by other machines.
 */
#include "runtime/launch.h"
#include "host/device.h"
#include "runtime/machine.h"
#include "runtime/memory.h"
#include "runtime/tensor.h"
#include "runtime/trace.h"
#include "topo/topo.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(KB_F16 == (int)KB__F16 && KB_BF16 == (int)KB__BF16 && KB_F32 == (int)KB__F32 &&
                   KB_I32 == (int)KB__I32 && KB_I8 == (int)KB__I8 && KB_BOOL == (int)KB__BOOL &&
                   KB_I16 == (int)KB__I16 && KB_U8 == (int)KB__U8 && KB_U16 == (int)KB__U16 &&
                   KB_U32 == (int)KB__U32 && KB_DTYPE_COUNT == (int)KB__DTYPE_COUNT,
               "kb_dtype must equal kb__dtype value for value");
_Static_assert(KB_LINK_PCIE == (int)KB__LINK_PCIE && KB_LINK_IO_NOC == (int)KB__LINK_IO_NOC &&
                   KB_LINK_IO_UCIE == (int)KB__LINK_IO_UCIE && KB_LINK_UCIE == (int)KB__LINK_UCIE &&
                   KB_LINK_XBAR == (int)KB__LINK_XBAR && KB_LINK_HBM == (int)KB__LINK_HBM &&
                   KB_LINK_NOC == (int)KB__LINK_NOC && KB_LINK_TCM == (int)KB__LINK_TCM &&
                   KB_LINK_SIP == (int)KB__LINK_SIP_LINK &&
                   KB_LINK_CLASS_COUNT <= (int)KB__LINK_CLASS_COUNT,
               "kb_link_class must equal kb__link_class value for value");

/* Machine tags: bit t of live_tags is set while an open machine holds tag
 * t; next_tag is where the search for a free one starts (every tag tried
 * moves it on, so tags are handed out round robin). The one state machines
 * share, atomic because machines may live on different threads; nothing
 * printed depends on a tag. */
static _Atomic uint64_t live_tags[KB__RT_MAX_TAGS / 64];
static _Atomic uint32_t next_tag;

int kb__rt_tag_take(uint32_t *out, kb__err *err)
{
    /* one round over every tag; 0 (no machine's) is among them */
    for (uint32_t i = 0; i <= KB__RT_MAX_TAGS; i++) {
        uint32_t tag = atomic_fetch_add(&next_tag, 1) % KB__RT_MAX_TAGS;
        uint64_t bit = 1ull << (tag % 64);
        if (tag && !(atomic_fetch_or(&live_tags[tag / 64], bit) & bit)) {
            *out = tag;
            return 0;
        }
    }
    return kb__err_set(err, KB_ENOMEM,
                       "kb_open: %u machines are open, the most one process can tell apart "
                       "(close one first)",
                       KB__RT_MAX_TAGS - 1);
}

void kb__rt_tag_release(uint32_t tag)
{
    if (tag) atomic_fetch_and(&live_tags[tag / 64], ~(1ull << (tag % 64)));
}

int kb__rt_fail(kb_machine *m, const kb__err *e)
{
    if (m && e != &m->err) kb__err_copy(&m->err, e);
    if (m && m->ranks) kb__rt_ranks_note_error(m, e); /* the calling rank's own */
    return e->code;
}

/* Loads the topology with the overrides that do not start with up's
 * prefix, then opens up's layer with those that do. */
static int load_configs(kb_machine *m, const kb_open_options *o, const kb__rt_opener *up,
                        kb__err *err)
{
    size_t n = o ? o->n_overrides : 0, nt = 0, nc = 0;
    if (n && !o->overrides) return kb__err_set(err, KB_EINVAL, "kb_open: overrides is NULL");
    const char **topo = calloc(n + 1, sizeof *topo), **sets = calloc(n + 1, sizeof *sets);
    size_t plen = up && up->prefix ? strlen(up->prefix) : 0;
    int rc = topo && sets ? 0 : kb__err_set(err, KB_ENOMEM, "kb_open: out of host memory");
    for (size_t i = 0; !rc && i < n; i++) {
        if (!o->overrides[i]) {
            rc = kb__err_set(err, KB_EINVAL,
                             "kb_open: overrides[%zu] is NULL (expected PATH=VALUE)", i);
            break;
        }
        if (plen && !strncmp(o->overrides[i], up->prefix, plen))
            sets[nc++] = o->overrides[i];
        else
            topo[nt++] = o->overrides[i];
    }
    if (!rc)
        rc = kb__topo_params_load_kinds(&m->params, m->kinds, o ? o->topology_path : NULL, topo, nt,
                                        err);
    if (!rc && up) rc = up->open(m, o, sets, nc, err);
    free(topo);
    free(sets);
    return rc;
}

static int build(kb_machine *m, const kb_open_options *o, const kb__rt_opener *up, kb__err *err)
{
    int rc = load_configs(m, o, up, err);
    if (rc) return rc;
    m->sips = m->params.system.sips;
    m->cubes = kb__topo_cubes_per_sip(&m->params);
    m->pes = kb__topo_pes_per_cube(&m->params);
    m->n_pes = m->sips * m->cubes * m->pes;
    m->page_size = m->params.pe.mmu_page_size;
    if (m->params.cube.hbm_slices != m->pes)
        return kb__err_set(err, KB_EUNSUPPORTED,
                           "cube.hbm.slices (%u) different from PEs per cube (%u) is not "
                           "supported yet: each PE owns one slice",
                           m->params.cube.hbm_slices, m->pes);
    if ((rc = kb__rt_memory_init(m, err))) return rc;
    uint64_t tr_ps = kb__ps_from_ns(m->params.pe.mmu_translate_ns);
    rc = kb__mmu_init(&m->mmu, m->sips, m->cubes, m->pes, m->page_size, tr_ps, err);
    if (rc) return rc;
    m->mmu.namer = kb__rt_name_va;
    m->mmu.namer_ctx = m;
    if ((rc = kb__pe_params_from_topo(&m->params, &m->pe_params, err))) return rc;
    kb__topo *topo = NULL;
    if ((rc = kb__topo_build(&topo, &m->params, err))) return rc;
    rc = kb__device_create(&m->dev, topo, kb__topo_header_bytes(&m->params), o ? o->no_data : 0,
                           err);
    if (rc) return rc;
    kb__budget *b = kb__sim_budget(m->dev->sim);
    b->limit = o && o->max_memory ? o->max_memory : kb__budget_default();
    if (b->used > b->limit) {
        char lim[32], used[32];
        return kb__err_set(err, KB_EBUDGET,
                           "kb_open: a host memory budget (max_memory, --max-memory) of %s is "
                           "below the %s an empty machine holds",
                           kb__budget_bytes(lim, sizeof lim, b->limit),
                           kb__budget_bytes(used, sizeof used, b->used));
    }
    m->device_sip = -1;
    m->next_serial = 1;
    m->next_launch_id = 1; /* id 0 means "no launch" */
    return 0;
}

int kb__rt_open(kb_machine **out, const kb_open_options *opts, const kb__rt_opener *up,
                char *errbuf, size_t errbuf_size)
{
    return kb__rt_open_kinds(out, opts, up, NULL, errbuf, errbuf_size);
}

int kb__rt_open_kinds(kb_machine **out, const kb_open_options *opts, const kb__rt_opener *up,
                      const kb__kind_registry *kinds, char *errbuf, size_t errbuf_size)
{
    kb__err err;
    kb__err_clear(&err);
    if (errbuf && errbuf_size) errbuf[0] = '\0';
    if (!out) {
        if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "kb_open: out is NULL");
        return KB_EINVAL;
    }
    *out = NULL;
    kb_machine *m = calloc(1, sizeof *m);
    int rc = m ? kb__rt_tag_take(&m->tag, &err)
               : kb__err_set(&err, KB_ENOMEM, "kb_open: cannot allocate the machine");
    if (m) m->kinds = kinds;
    if (!rc) rc = build(m, opts, up, &err);
    if (rc) {
        if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", err.msg);
        kb_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

void kb_close(kb_machine *m)
{
    if (!m) return;
    if (m->dev && kb__proc_self(m->dev->sim)) { /* it would free the stack it runs on */
        int r = kb__rt_caller(m);
        kb__err e;
        if (r >= 0)
            kb__err_set(&e, KB_ESTATE,
                        "kb_close: called from rank %d; close the machine after kb_spawn returns",
                        r);
        else
            kb__err_set(&e, KB_ESTATE,
                        "kb_close: called from a simulated process (%s); close the machine from "
                        "the driver",
                        kb__proc_name(kb__proc_self(m->dev->sim)));
        kb__rt_fail(m, &e);
        return;
    }
    kb__rt_launch_abandon(m); /* programs a stopped simulation left in flight */
    for (uint32_t i = 0; i < m->n_slots; i++) {
        if (m->slots[i].t) kb_free(m, kb__rt_handle(m, m->slots[i].t));
    }
    kb_trace_stop(m);
    kb__rt_trace_spans_fini(m);
    free(m->slots);
    free(m->free_slots);
    kb__rt_scratch_fini(&m->scratch);
    kb__rt_ranks_fini(m);
    kb__rt_layers_fini(m); /* the collectives' rings go back to the allocators */
    kb__mmu_fini(&m->mmu);
    kb__device_destroy(m->dev); /* first: no program coroutine outlives it */
    kb__rt_launch_fini(m);
    kb__rt_memory_fini(m);
    kb__rt_tag_release(m->tag);
    free(m);
}

int kb_memory_use(const kb_machine *m, uint64_t *used, uint64_t *peak, uint64_t *limit)
{
    if (!m) return KB_EINVAL;
    const kb__budget *b = kb__sim_budget(m->dev->sim);
    if (used) *used = b->used;
    if (peak) *peak = b->peak;
    if (limit) *limit = b->limit;
    return 0;
}

const char *kb_last_error(const kb_machine *m)
{
    return m ? m->err.msg : "no machine (NULL)";
}

uint64_t kb_now_ps(const kb_machine *m)
{
    return m && m->dev ? kb__sim_now(m->dev->sim) : 0;
}

int kb_set_progress(kb_machine *m, kb_progress_fn fn, void *user, uint64_t every)
{
    if (!m) return KB_EINVAL;
    kb__sim_set_progress(m->dev->sim, fn, user, every);
    return 0;
}

/* Bytes per link class carried by the fabric since creation (out: every
 * class, KB__LINK_CLASS_COUNT entries). */
static void link_bytes(const kb_machine *m, uint64_t out[KB__LINK_CLASS_COUNT])
{
    kb__link_class_stats cs[KB__LINK_CLASS_COUNT];
    kb__fabric_class_stats(m->dev->fab, cs);
    for (int i = 0; i < KB__LINK_CLASS_COUNT; i++)
        out[i] = cs[i].bytes;
}

int kb_link_class_count(const kb_machine *m)
{
    return m ? kb__topo_class_count(m->dev->topo) : KB_EINVAL;
}

/* Bytes over the links of a link kind's class (cls >= KB__LINK_CLASS_COUNT)
 * since the last reset: summed per link against the per-link bases. */
static uint64_t kind_class_bytes(const kb_machine *m, int cls)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < kb__fabric_link_count(m->dev->fab); i++) {
        const kb__link *l = kb__fabric_link(m->dev->fab, i);
        if ((int)l->cls == cls) sum += l->bytes - (m->link_base ? m->link_base[i].bytes : 0);
    }
    return sum;
}

int kb_stats_link_bytes(const kb_machine *m, int cls, uint64_t *bytes)
{
    if (!m) return KB_EINVAL;
    kb__err *e = (kb__err *)&m->err; /* the message buffer: the one mutable part */
    if (!bytes) return kb__err_set(e, KB_EINVAL, "kb_stats_link_bytes: bytes is NULL");
    int n = kb__topo_class_count(m->dev->topo);
    if (cls < 0 || cls >= n)
        return kb__err_set(e, KB_ERANGE,
                           "kb_stats_link_bytes: link class %d does not exist (expected 0 .. %d)",
                           cls, n - 1);
    if (cls >= KB__LINK_CLASS_COUNT) {
        *bytes = kind_class_bytes(m, cls);
        return 0;
    }
    uint64_t all[KB__LINK_CLASS_COUNT];
    link_bytes(m, all);
    *bytes = all[cls] - m->stats.link_base[cls];
    return 0;
}

int kb_machine_shape(const kb_machine *m, int *sips, int *cubes_per_sip, int *pes_per_cube)
{
    if (sips) *sips = m ? (int)m->sips : 0;
    if (cubes_per_sip) *cubes_per_sip = m ? (int)m->cubes : 0;
    if (pes_per_cube) *pes_per_cube = m ? (int)m->pes : 0;
    return m ? 0 : KB_EINVAL;
}

int kb_set_device(kb_machine *m, int sip)
{
    if (!m) return KB_EINVAL;
    if (sip < -1 || sip >= (int)m->sips) {
        kb__err e;
        kb__err_set(&e, KB_ERANGE,
                    "kb_set_device: SIP %d does not exist (machine has SIPs 0..%u; -1 "
                    "removes the binding)",
                    sip, m->sips - 1);
        return kb__rt_fail(m, &e);
    }
    kb__rt_set_device(m, sip);
    return 0;
}

int kb_get_device(const kb_machine *m)
{
    return m ? kb__rt_device(m) : -1;
}

int kb_stats_get(const kb_machine *m, kb_stats *out)
{
    if (!m) {
        if (out) memset(out, 0, sizeof *out);
        return KB_EINVAL;
    }
    /* the message buffer is the one mutable part of a const machine */
    if (!out) return kb__err_set((kb__err *)&m->err, KB_EINVAL, "kb_stats_get: out is NULL");
    memset(out, 0, sizeof *out);
    out->now_ps = kb_now_ps(m);
    out->elapsed_ps = out->now_ps - m->stats.reset_ps;
    memcpy(out->messages, m->stats.messages, sizeof out->messages);
    memcpy(out->bytes, m->stats.bytes, sizeof out->bytes);
    uint64_t all[KB__LINK_CLASS_COUNT];
    link_bytes(m, all);
    for (int i = 0; i < KB_LINK_CLASS_COUNT; i++)
        out->link_bytes[i] = all[i] - m->stats.link_base[i];
    out->launches = m->stats.launches;
    kb__rt_stats_pe(m, out);
    return 0;
}

int kb_stats_reset(kb_machine *m)
{
    if (!m) return KB_EINVAL;
    memset(&m->stats, 0, sizeof m->stats);
    m->stats.reset_ps = kb_now_ps(m);
    link_bytes(m, m->stats.link_base);
    kb__err e;
    int rc = kb__rt_stats_pe_reset(m);
    if (rc) {
        kb__err_set(&e, rc, "kb_stats_reset: out of host memory for the link counters");
        return kb__rt_fail(m, &e);
    }
    return 0;
}

const char *kb_msg_kind_name(kb_msg_kind k)
{
    static const char *const names[] = {"write", "read", "dma", "mmu"};
    return (unsigned)k < KB_MSG_KIND_COUNT ? names[k] : "?";
}

const char *kb_link_class_name(kb_link_class c)
{
    return kb__link_class_name((kb__link_class)c); /* "?" out of range */
}

size_t kb_dtype_size(kb_dtype dtype)
{
    return kb__dtype_valid((int)dtype) ? kb__dtype_size((kb__dtype)dtype) : 0;
}

const char *kb_dtype_name(kb_dtype dtype)
{
    return kb__dtype_valid((int)dtype) ? kb__dtype_name((kb__dtype)dtype) : "?";
}
