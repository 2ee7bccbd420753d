/*
 * launch.c — kb_launch / kb_wait / kb_sync: the launch path through the
 * simulated device and the programs on the PEs (docs/runtime.md, "Launch").
 *
 * Path of one launch: the device's launch messages (host/launch_msgs.c
 * builds and times them): host -> io_cpu -> m_cpu -> PE per target SIP,
 * cube and PE. The start time target_start is the latest of the PEs'
 * arrivals over every SIP (the io_cpus' global stamp): all target PEs
 * start their programs together then. When a PE finished its programs it
 * replies (PE -> m_cpu -> io_cpu -> host, aggregated per cube and SIP);
 * the launch is complete when every SIP replied.
 * Launches start their programs in launch order, one stream per host rank
 * (the driver is one): a launch whose fan-out arrived starts when every
 * earlier launch of its host rank, and every earlier launch that uses one of
 * its PEs, has finished its programs. So launches of different host ranks on
 * different PEs run side by side, as on devices with a stream each; a
 * collective's launch (kb__rt_launch_on) takes part in the streams of its
 * members, and in the driver's while a launch the driver issued is
 * outstanding: it waits for their earlier launches and holds up their
 * later ones, like a launch of each.
 *
 * Launch ids carry the machine's tag (runtime/machine.h): find_launch,
 * through which every wait looks an id up, refuses another machine's.
 *
 * Invariants: m->launches holds launches not yet waited for, in id order;
 * a PE runs the programs of at most one launch at a time (try_start). A
 * launch's struct (its messages, arguments) lives until it is waited for,
 * so no callback ever sees freed memory.
 * Cost: O(SIPs + cubes + PEs) messages per launch, one allocation block.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "host/device.h"
#include "runtime/launch.h"
#include "runtime/machine.h"
#include "runtime/tensor.h"
#include "runtime/trace.h"
#include "topo/topo.h"

struct kb__rt_launch {
    kb_machine *m;
    kb__rt_launch *next;
    uint64_t id; /* serial on m, from 1: the number in messages (kb__rt_launch_id) */
    int owner;   /* host rank that launched it, -1: the driver */
    char name[64];
    kb__tl_launch_desc desc;
    tl_tensor *pe_tensors;                         /* [n_pes × n_args] */
    char tnames[KB__TL_MAX_ARGS][KB__RT_NAME_MAX]; /* tensor names, copied */
    uint32_t n_pes;
    kb__pe **pes;
    uint32_t *gi;          /* [n_pes] the PEs' global indices (SIP-major) */
    kb__launch_msgs *msgs; /* its device messages (host/launch_msgs.c) */
    uint32_t pes_running;
    bool ready, started, finished;
    int *streams; /* host ranks whose streams it takes part in (try_start): &owner,
                     or a collective's members, maybe the driver (its own array) */
    uint32_t n_streams;
    kb__time t_issue, t_start, t_end;
    kb__time t_pes_end; /* the last PE finished its programs */
    kb__pe_launch *pl;
    int status;
    kb__err err;
    kb__event done;
};

/* ---- PEs ------------------------------------------------------------------ */

int kb__rt_pes_init(kb_machine *m, kb__err *err)
{
    if (m->pe_units) return 0;
    kb__pe **v = calloc(m->n_pes, sizeof *v);
    if (!m->pe_base) m->pe_base = calloc(m->n_pes, sizeof *m->pe_base);
    if (!m->pe_mark) m->pe_mark = calloc(m->n_pes, sizeof *m->pe_mark);
    if (!v || !m->pe_base || !m->pe_mark) {
        free(v);
        return kb__err_set(err, KB_ENOMEM, "out of host memory for %u PEs", m->n_pes);
    }
    if (!v) return kb__err_set(err, KB_ENOMEM, "out of host memory for %u PEs", m->n_pes);
    for (uint32_t i = 0; i < m->n_pes; i++) {
        char name[48];
        snprintf(name, sizeof name, "sip%u/cube%u/pe%u", i / (m->cubes * m->pes),
                 i / m->pes % m->cubes, i % m->pes);
        /* faults.slow_pes: this PE's units at a fraction of their speed */
        double f = kb__topo_fault_pe_factor(&m->params, i / (m->cubes * m->pes),
                                            i / m->pes % m->cubes, i % m->pes);
        kb__pe_params pp = m->pe_params;
        pp.gemm.clock_ghz *= f;
        pp.math.clock_ghz *= f;
        pp.dma.bw_gbs *= f;
        int rc = kb__pe_create(m->dev->sim, name, &pp, &v[i], err);
        if (rc) {
            for (uint32_t j = 0; j < i; j++)
                kb__pe_destroy(v[j]);
            free(v);
            return rc;
        }
        v[i]->index = i;
    }
    m->pe_units = v;
    return 0;
}

static void launch_free(kb__rt_launch *l)
{
    if (!l) return;
    kb__pe_launch_destroy(l->pl);
    kb__event_fini(&l->done);
    free(l->pe_tensors);
    free(l->pes);
    kb__launch_msgs_free(l->msgs);
    free(l->gi);
    if (l->streams != &l->owner) free(l->streams);
    free(l);
}

void kb__rt_launch_abandon(kb_machine *m)
{
    for (kb__rt_launch *l = m->launches; l; l = l->next)
        if (l->pl && !l->finished) kb__pe_launch_abandon(l->pl);
}

void kb__rt_launch_fini(kb_machine *m)
{
    while (m->launches) {
        kb__rt_launch *l = m->launches;
        m->launches = l->next;
        launch_free(l);
    }
    for (uint32_t i = 0; m->pe_units && i < m->n_pes; i++)
        kb__pe_destroy(m->pe_units[i]);
    free(m->pe_units);
    m->pe_units = NULL;
    free(m->pe_base);
    m->pe_base = NULL;
    free(m->pe_mark);
    m->pe_mark = NULL;
    free(m->link_base);
    m->link_base = NULL;
}

/* ---- completion path --------------------------------------------------------- */

static void launch_complete(kb__rt_launch *l)
{
    kb_machine *m = l->m;
    l->finished = true;
    l->t_end = kb__sim_now(m->dev->sim);
    if (l->pl && l->status == 0) l->status = kb__pe_launch_status(l->pl, &l->err);
    kb__rt_trace_span(m, KB__RT_HOST_LAUNCHES, "launch", l->name, l->t_issue, 0);
    m->stats.launches++;
    kb__event_fire(m->dev->sim, &l->done, l->status);
}

/* Every SIP replied to the host. */
static void launch_replied(void *user)
{
    launch_complete(user);
}

static void try_start(kb_machine *m);

static void start_next_cb(kb__sim *sim, void *arg, uint64_t data)
{
    (void)sim;
    (void)data;
    try_start(arg);
}

/* pe_cpu of pes[i] finished its programs (called on its dispatcher). */
static void pe_done(void *arg, uint32_t i)
{
    kb__rt_launch *l = arg;
    kb__launch_msgs_pe_done(l->msgs, i);
    if (--l->pes_running == 0) {
        l->t_pes_end = kb__sim_now(l->m->dev->sim);
        kb__sim_post(l->m->dev->sim, 0, start_next_cb, l->m, 0);
    }
}

/* ---- start -------------------------------------------------------------------- */

/* A launch that could not start its programs: every PE reports at once. */
static void fail_start(kb__rt_launch *l, const kb__err *e)
{
    l->status = e->code ? e->code : KB_EKERNEL;
    kb__err_copy(&l->err, e);
    l->pes_running = 0;
    l->t_pes_end = kb__sim_now(l->m->dev->sim);
    for (uint32_t i = 0; i < l->n_pes; i++)
        kb__launch_msgs_pe_done(l->msgs, i);
}

/* Starts l's programs on its PEs (now: its fan-out arrived). */
static void start(kb_machine *m, kb__rt_launch *l)
{
    l->started = true;
    l->t_start = kb__sim_now(m->dev->sim);
    l->pes_running = l->n_pes;
    kb__err e;
    kb__err_clear(&e);
    if (kb__tl_launch_start(m->dev->sim, l->pes, l->n_pes, &l->desc, &l->pl, &e)) fail_start(l, &e);
}

/* Whether an earlier launch of owner is among owners[0..n). */
static bool owner_held(const int *owners, size_t n, int owner)
{
    for (size_t i = 0; i < n; i++)
        if (owners[i] == owner) return true;
    return false;
}

/* Starts every launch that may start now, in launch order (header comment):
 * each launch that has not finished its programs holds its streams and its
 * PEs for the launches after it. O(launches outstanding x their streams +
 * their PEs). */
static void try_start(kb_machine *m)
{
    if (++m->pe_stamp == 0) { /* the marks wrapped: clear them */
        memset(m->pe_mark, 0, m->n_pes * sizeof *m->pe_mark);
        m->pe_stamp = 1;
    }
    uint32_t stamp = m->pe_stamp;
    size_t n_held = 0, cap = 0;
    int *held = NULL; /* host ranks whose stream an earlier launch holds */
    for (kb__rt_launch *l = m->launches; l; l = l->next) {
        if (!l->started && l->ready) {
            bool free = true;
            for (uint32_t i = 0; free && i < l->n_streams; i++)
                free = !owner_held(held, n_held, l->streams[i]);
            for (uint32_t i = 0; free && i < l->n_pes; i++)
                free = m->pe_mark[l->gi[i]] != stamp;
            if (free) start(m, l);
        }
        if (l->started && !l->pes_running) continue; /* its programs ended (or never started) */
        for (uint32_t i = 0; i < l->n_pes; i++)
            m->pe_mark[l->gi[i]] = stamp;
        bool oom = false;
        for (uint32_t i = 0; i < l->n_streams; i++) {
            if (owner_held(held, n_held, l->streams[i])) continue;
            if (n_held == cap) {
                int *v = realloc(held, (cap = cap ? 2 * cap : 8) * sizeof *v);
                if (!v) {
                    oom = true; /* start nothing more now; a later try retries */
                    break;
                }
                held = v;
            }
            held[n_held++] = l->streams[i];
        }
        if (oom) break;
    }
    free(held);
}

/* ---- fan-out ------------------------------------------------------------------- */

/* Every PE's command arrived: target_start, the latest arrival over every
 * SIP. */
static void launch_arrived(void *user)
{
    kb__rt_launch *l = user;
    l->ready = true;
    try_start(l->m);
}

/* ---- building a launch ------------------------------------------------------------ */

/* The device messages over l's PEs (l->gi). */
static int build_msgs(kb__rt_launch *l, kb__err *err)
{
    return kb__launch_msgs_create(l->m->dev, l->gi, l->n_pes, launch_arrived, launch_replied, l,
                                  &l->msgs, err);
}

void kb__rt_shard_view(const kb__rt_tensor *t, int shard, const char *name, tl_tensor *out)
{
    const kb__shard *s = &t->plan.shards[shard];
    memset(out, 0, sizeof *out);
    out->name = name;
    out->dtype = (tl_dtype)t->dtype;
    out->ndim = t->ndim;
    if (t->ndim == 1) {
        out->shape[0] = s->cols;
        out->strides[0] = 1;
        out->global_shape[0] = t->plan.cols;
        out->global_offset[0] = s->col0;
    } else { /* 2-D [rows, cols]; 3-D [rows, mid, cols], mid never split */
        int c = t->ndim - 1;
        out->shape[0] = s->rows;
        out->shape[c] = s->cols;
        out->strides[c] = 1;
        out->global_shape[0] = t->plan.rows;
        out->global_shape[c] = t->plan.cols;
        out->global_offset[0] = s->row0;
        out->global_offset[c] = s->col0;
        if (t->ndim == 3) {
            out->shape[1] = out->global_shape[1] = t->plan.mid;
            out->strides[1] = s->cols;
            out->global_offset[1] = 0;
        }
        out->strides[0] = t->plan.mid * s->cols;
    }
    /* The reach ends with the last region's last element, not its page
     * padding; with uneven shards each region has its own size. */
    uint64_t last = t->region_bytes ? t->region_bytes[t->plan.n_regions - 1] : s->bytes;
    out->va = kb__rt_region_va(t, s->region);
    out->shard_bytes = s->bytes;
    out->region_stride = t->region_stride;
    out->region_bytes = t->region_bytes ? t->region_bytes + s->region : NULL;
    out->bytes = t->va + t->va_bytes - t->region_stride + last - out->va;
}

/* The shard of tensor t on PE gi, as a kernel argument. */
static int shard_arg(kb__rt_launch *l, const kb__rt_tensor *t, const char *name, uint32_t gi, int a,
                     tl_tensor *out, kb__err *err)
{
    kb_machine *m = l->m;
    for (int i = 0; i < t->plan.n_shards; i++) {
        const kb__shard *s = &t->plan.shards[i];
        if (kb__rt_pe_index(m, s->sip, s->cube, s->pe) != gi) continue;
        kb__rt_shard_view(t, i, name, out);
        return 0;
    }
    return kb__err_set(err, KB_EINVAL,
                       "kb_launch %s: tensor argument %d ('%s') has no shard on "
                       "sip%u/cube%u/pe%u, which runs programs (it owns a shard of the first "
                       "tensor argument)",
                       l->name, a, t->name, gi / (m->cubes * m->pes), gi / m->pes % m->cubes,
                       gi % m->pes);
}

/* Fills l->gi[] with the PEs that run programs: owners of the first
 * tensor argument (on opts' SIP), or every PE (of that SIP) without one. */
static int pick_pes(kb__rt_launch *l, const kb__rt_tensor *first, int sip, uint64_t programs,
                    kb__err *err)
{
    kb_machine *m = l->m;
    uint32_t n = 0;
    if (first) {
        for (int i = 0; i < first->plan.n_shards; i++) {
            const kb__shard *s = &first->plan.shards[i];
            if (sip >= 0 && s->sip != sip) continue;
            uint32_t gi = kb__rt_pe_index(m, s->sip, s->cube, s->pe);
            if (n && l->gi[n - 1] == gi) continue;
            l->gi[n++] = gi;
        }
    } else {
        for (uint32_t gi = 0; gi < m->n_pes; gi++)
            if (sip < 0 || gi / (m->cubes * m->pes) == (uint32_t)sip) l->gi[n++] = gi;
    }
    if (!n)
        return kb__err_set(err, KB_EINVAL,
                           "kb_launch %s: tensor argument 0 ('%s') has no shard on SIP %d", l->name,
                           first ? first->name : "?", sip);
    l->n_pes = programs < n ? (uint32_t)programs : n;
    return 0;
}

static int fill_args(kb__rt_launch *l, const kb_arg *args, int n_args, const kb__rt_tensor **tv,
                     kb__err *err)
{
    kb__tl_launch_desc *d = &l->desc;
    d->n_args = n_args;
    for (int a = 0; a < n_args; a++) {
        kb__tl_arg *x = &d->args[a];
        switch (args[a].kind) {
        case KB_ARG_TENSOR:
            x->kind = KB__TL_ARG_TENSOR;
            tv[a] = kb__rt_tensor_get(l->m, args[a].tensor.id, err);
            if (!tv[a]) return kb__err_prefix(err, "kb_launch %s: argument %d: ", l->name, a);
            snprintf(l->tnames[a], sizeof l->tnames[a], "%s", tv[a]->name);
            break;
        case KB_ARG_I64:
            x->kind = KB__TL_ARG_I64;
            x->i = args[a].i64;
            break;
        case KB_ARG_F64:
            x->kind = KB__TL_ARG_F64;
            x->f = args[a].f64;
            break;
        default:
            return kb__err_set(err, KB_EINVAL, "kb_launch %s: argument %d has kind %d", l->name, a,
                               (int)args[a].kind);
        }
    }
    return 0;
}

static int grid_of(const kb_launch_opts *o, uint64_t owners, uint32_t grid[3])
{
    if (!o || (!o->grid[0] && !o->grid[1] && !o->grid[2])) {
        grid[0] = (uint32_t)owners;
        grid[1] = grid[2] = 1;
        return 0;
    }
    for (int i = 0; i < 3; i++)
        grid[i] = o->grid[i] ? o->grid[i] : 1;
    return 0;
}

/* Allocates the per-PE arrays of l (l->n_pes PEs, n_args arguments). */
static int alloc_pes(kb__rt_launch *l, int n_args, kb__err *err)
{
    l->pes = calloc(l->n_pes, sizeof *l->pes);
    l->pe_tensors = calloc((size_t)l->n_pes * (size_t)(n_args ? n_args : 1), sizeof(tl_tensor));
    if (!l->pes || !l->pe_tensors)
        return kb__err_set(err, KB_ENOMEM, "kb_launch %s: out of host memory", l->name);
    for (uint32_t i = 0; i < l->n_pes; i++)
        l->pes[i] = l->m->pe_units[l->gi[i]];
    l->desc.pe_tensors = l->pe_tensors;
    l->desc.n_pes = l->n_pes;
    return 0;
}

static int prepare(kb__rt_launch *l, const kb_launch_opts *opts, const kb_arg *args, int n_args,
                   kb__err *err)
{
    kb_machine *m = l->m;
    const kb__rt_tensor *tv[KB__TL_MAX_ARGS] = {0};
    int rc = fill_args(l, args, n_args, tv, err);
    if (rc) return rc;
    const kb__rt_tensor *first = NULL;
    for (int a = 0; a < n_args && !first; a++)
        first = tv[a];
    int sip = opts ? opts->sip : -1;
    l->gi = calloc(m->n_pes, sizeof *l->gi);
    if (!l->gi) return kb__err_set(err, KB_ENOMEM, "kb_launch %s: out of host memory", l->name);
    if ((rc = pick_pes(l, first, sip, UINT64_MAX, err))) return rc;
    grid_of(opts, l->n_pes, l->desc.grid);
    uint64_t programs = 0;
    if (__builtin_mul_overflow((uint64_t)l->desc.grid[0], (uint64_t)l->desc.grid[1], &programs) ||
        __builtin_mul_overflow(programs, (uint64_t)l->desc.grid[2], &programs) ||
        programs > UINT32_MAX)
        return kb__err_set(err, KB_EINVAL,
                           "kb_launch %s: grid (%u, %u, %u) has too many programs (at most %u)",
                           l->name, l->desc.grid[0], l->desc.grid[1], l->desc.grid[2], UINT32_MAX);
    if (programs < l->n_pes) l->n_pes = (uint32_t)programs;
    if ((rc = alloc_pes(l, n_args, err))) return rc;
    for (uint32_t i = 0; i < l->n_pes; i++) {
        for (int a = 0; a < n_args; a++)
            if (tv[a] &&
                (rc = shard_arg(l, tv[a], l->tnames[a], l->gi[i], a,
                                &l->pe_tensors[(size_t)i * (size_t)n_args + (size_t)a], err)))
                return rc;
    }
    return build_msgs(l, err);
}

/* A zeroed launch of fn named name on m (not yet queued). */
static kb__rt_launch *launch_new(kb_machine *m, const char *name, tl_kernel_fn fn)
{
    kb__rt_launch *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->m = m;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->desc.name = l->name;
    l->desc.fn = fn;
    l->desc.mem = (kb__tl_mem_port){kb__rt_dma_transfer, m, !m->dev->no_data, kb__rt_dma_atomic,
                                    kb__rt_dma_resolve};
    l->desc.pe_done = pe_done;
    l->desc.pe_done_arg = l;
    l->streams = &l->owner; /* its own stream: it follows the owner (kb__rt_launch_adopt) */
    l->n_streams = 1;
    kb__event_init(&l->done, "launch");
    return l;
}

/* Queues a prepared launch behind the outstanding ones and sends it. */
static void launch_queue(kb_machine *m, kb__rt_launch *l, kb_launch_id *out)
{
    l->id = m->next_launch_id++;
    l->owner = kb__rt_caller(m);
    l->t_issue = kb__sim_now(m->dev->sim);
    kb__rt_launch **tail = &m->launches;
    while (*tail)
        tail = &(*tail)->next;
    *tail = l;
    kb__launch_msgs_send(l->msgs);
    if (out) *out = kb__rt_launch_id(m, l->id);
}

int kb_launch(kb_machine *m, const char *kernel_name, tl_kernel_fn fn, const kb_launch_opts *opts,
              const kb_arg *args, int n_args, kb_launch_id *out)
{
    if (out) out->id = 0;
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    const char *name = kernel_name ? kernel_name : "kernel";
    if (!fn || n_args < 0 || n_args > KB__TL_MAX_ARGS || (n_args && !args))
        return kb__err_set(&m->err, KB_EINVAL,
                           "kb_launch %s: need a kernel function and 0..%d arguments (got %d%s)",
                           name, KB__TL_MAX_ARGS, n_args, fn ? "" : ", no function");
    if (opts && (opts->sip < -1 || opts->sip >= (int)m->sips))
        return kb__err_set(&m->err, KB_ERANGE, "kb_launch %s: sip %d (machine has SIPs 0..%u)",
                           name, opts->sip, m->sips - 1);
    int rc = kb__rt_pes_init(m, &e);
    if (rc) return kb__rt_fail(m, &e);
    kb__rt_launch *l = launch_new(m, name, fn);
    if (!l) return kb__err_set(&m->err, KB_ENOMEM, "kb_launch %s: out of host memory", name);
    if ((rc = prepare(l, opts, args, n_args, &e))) {
        launch_free(l);
        return kb__rt_fail(m, &e);
    }
    launch_queue(m, l, out);
    return 0;
}

int kb__rt_launch_on(kb_machine *m, const kb__rt_launch_spec *s, kb_launch_id *out, kb__err *err)
{
    if (out) out->id = 0;
    if (!s->fn || !s->n_pes || s->n_args < 0 || s->n_args > KB__TL_MAX_ARGS)
        return kb__err_set(err, KB_EINVAL, "launch %s: need a kernel, PEs and 0..%d arguments",
                           s->name, KB__TL_MAX_ARGS);
    int rc = kb__rt_pes_init(m, err);
    if (rc) return rc;
    kb__rt_launch *l = launch_new(m, s->name, s->fn);
    if (!l) return kb__err_set(err, KB_ENOMEM, "launch %s: out of host memory", s->name);
    l->desc.n_args = s->n_args;
    for (int a = 0; a < s->n_args; a++)
        l->desc.args[a] = s->args[a];
    l->desc.coll = s->coll;
    /* its members' streams, and the driver's while one of its launches is
     * outstanding (issued before kb_spawn): holding the driver's stream
     * otherwise would make every collective wait for the one before */
    int *streams = malloc(((size_t)s->n_streams + 1) * sizeof *streams);
    if (!streams) {
        launch_free(l);
        return kb__err_set(err, KB_ENOMEM, "launch %s: out of host memory", s->name);
    }
    l->streams = streams;
    l->n_streams = 0;
    bool driver = false;
    for (const kb__rt_launch *o = m->launches; o && !driver; o = o->next)
        driver = o->owner == -1;
    for (uint32_t i = 0; i < s->n_streams; i++)
        driver |= s->streams[i] == -1;
    if (driver) l->streams[l->n_streams++] = -1;
    for (uint32_t i = 0; i < s->n_streams; i++)
        if (s->streams[i] != -1) l->streams[l->n_streams++] = s->streams[i];
    l->n_pes = s->n_pes;
    l->desc.grid[0] = s->n_pes;
    l->desc.grid[1] = l->desc.grid[2] = 1;
    l->gi = calloc(s->n_pes, sizeof *l->gi);
    rc = l->gi ? 0 : kb__err_set(err, KB_ENOMEM, "launch %s: out of host memory", s->name);
    for (uint32_t i = 0; !rc && i < s->n_pes; i++) {
        if (s->pes[i] >= m->n_pes)
            rc = kb__err_set(err, KB_EINVAL, "launch %s: PE index %u (machine has %u PEs)", s->name,
                             s->pes[i], m->n_pes);
        l->gi[i] = s->pes[i];
    }
    if (!rc) rc = alloc_pes(l, s->n_args, err);
    if (!rc && s->pe_tensors)
        memcpy(l->pe_tensors, s->pe_tensors,
               (size_t)s->n_pes * (size_t)s->n_args * sizeof *l->pe_tensors);
    if (!rc) rc = build_msgs(l, err);
    if (rc) {
        launch_free(l);
        return rc;
    }
    launch_queue(m, l, out);
    return 0;
}

/* ---- waiting ------------------------------------------------------------------------ */

/* Room kept in a deadlock summary for its "... and N more" line and for the
 * prefixes callers add (a collective names itself, its algorithm and size). */
#define SUMMARY_TAIL 200

/* Appends to out (cap bytes, holding *len) the waiting lines of the
 * simulator's full report: lines with a note first (a program's "tl_recv
 * waits for a message" says more than its dispatcher's "waits on process"),
 * then the others, as many as fit, then "... and N more". */
static void waiting_summary(kb__sim *sim, char *out, size_t cap, size_t *len)
{
    size_t n = 1 << 16;
    char *all = malloc(n);
    if (!all) return;
    kb__sim_report_waiting(sim, all, n);
    all[n - 1] = '\0';
    char *stop = all + strlen(all);
    for (char *c = all; c < stop; c++) /* one string per line */
        if (*c == '\n') *c = '\0';
    int omitted = 0;
    for (int pass = 0; pass < 2; pass++)
        for (char *line = all; line < stop; line += strlen(line) + 1) {
            size_t ll = strlen(line);
            if (!ll || (strstr(line, "[note:") != NULL) != (pass == 0)) continue;
            if (*len + ll + 3 + SUMMARY_TAIL < cap)
                *len += (size_t)snprintf(out + *len, cap - *len, "\n  %s", line);
            else
                omitted++;
        }
    if (omitted) snprintf(out + *len, cap - *len, "\n  ... and %d more", omitted);
    free(all);
}

/* The wait for l ended with code rc before l completed (a deadlock, or the
 * caller was canceled). A program error already recorded is the root cause
 * (the others often wait on the program that failed): it comes first, with
 * its code. A deadlock's message gives the simulator's report; a canceled
 * wait says only why the caller was canceled (kb__rt_cancel_cause), never
 * the report of a deadlock the caller did not see itself (kb_spawn keeps
 * that one in its own message). */
static int stopped(kb_machine *m, kb__rt_launch *l, int rc)
{
    kb__err e, pe;
    const kb__err *se = kb__sim_error(m->dev->sim);
    const char *why = se && se->msg[0] ? se->msg : "no event left";
    char cause[128] = "";
    if (rc == KB_ECANCELED) kb__rt_cancel_cause(m, cause, sizeof cause);
    int first = l->pl ? kb__pe_launch_status(l->pl, &pe) : 0;
    if (first < 0 && rc == KB_ECANCELED)
        kb__err_set(&e, first, "%s; then the wait was canceled (%s) before launch %s completed",
                    pe.msg, cause, l->name);
    else if (first < 0)
        kb__err_set(&e, first, "%s; then the simulation stopped before launch %s completed: %s",
                    pe.msg, l->name, why);
    else if (rc == KB_ECANCELED)
        kb__err_set(&e, rc, "kernel %s: the wait was canceled (%s) before the launch completed",
                    l->name, cause);
    else if (rc != KB_EDEADLOCK)
        kb__err_set(&e, rc ? rc : KB_EDEADLOCK,
                    "kernel %s: the simulation stopped before the launch completed: %s", l->name,
                    why);
    if (first < 0 || rc != KB_EDEADLOCK) return kb__rt_fail(m, &e);
    /* the report's first line, then its waiters as many as fit, noted first */
    size_t head = strcspn(why, "\n");
    kb__err_set(&e, KB_EDEADLOCK,
                "kernel %s: the simulation stopped before the launch completed: %.*s", l->name,
                (int)head, why);
    size_t len = strlen(e.msg);
    waiting_summary(m->dev->sim, e.msg, sizeof e.msg, &len);
    return kb__rt_fail(m, &e);
}

/* Waits for l; on return (unless the simulation stopped first) l is freed.
 * times (may be NULL) gets its issue, start and completion times. */
static int wait_one(kb_machine *m, kb__rt_launch *l, kb__rt_launch_times *times)
{
    kb__sim *sim = m->dev->sim;
    int rc = kb__event_wait(sim, &l->done);
    if (!l->finished) return stopped(m, l, rc);
    kb__rt_launch **pp = &m->launches;
    while (*pp != l)
        pp = &(*pp)->next;
    *pp = l->next;
    int st = l->status;
    if (st) kb__rt_fail(m, &l->err);
    if (times) *times = (kb__rt_launch_times){l->t_issue, l->t_start, l->t_pes_end, l->t_end};
    launch_free(l);
    return st;
}

void kb__rt_launch_adopt(kb_machine *m)
{
    for (kb__rt_launch *l = m->launches; l; l = l->next)
        l->owner = -1;
}

/* Sets *out to the outstanding launch of id; else KB_EINVAL (an id another
 * machine made; no launch is looked at) or KB_ENOTFOUND, with the message
 * in err, prefixed with who ("kb_wait: " or ""). Messages give the launch's
 * serial, never the machine's tag. */
static int find_launch(kb_machine *m, kb_launch_id id, const char *who, kb__rt_launch **out,
                       kb__err *err)
{
    uint64_t tag = id.id >> KB__RT_TAG_SHIFT, serial = id.id & ((1ull << KB__RT_TAG_SHIFT) - 1);
    *out = NULL;
    if (kb__rt_made_elsewhere(m, id.id))
        return kb__err_set(err, KB_EINVAL,
                           "%slaunch id %llu was made by another machine (a launch id works "
                           "only with the machine that launched it)",
                           who, (unsigned long long)serial);
    kb__rt_launch *l = tag ? m->launches : NULL;
    while (l && l->id != serial)
        l = l->next;
    if (!l)
        return kb__err_set(err, KB_ENOTFOUND,
                           "%slaunch %llu is not outstanding (never launched or already waited "
                           "for)",
                           who, (unsigned long long)serial);
    *out = l;
    return 0;
}

uint32_t kb__rt_launches_running(const kb_machine *m)
{
    uint32_t n = 0;
    for (const kb__rt_launch *l = m->launches; l; l = l->next)
        n += l->started && !l->finished;
    return n;
}

int kb__rt_launch_wait(kb_machine *m, kb_launch_id id, kb__rt_launch_times *times, kb__err *err)
{
    kb__rt_launch *l;
    int rc = find_launch(m, id, "", &l, err);
    if (rc) return rc;
    rc = wait_one(m, l, times);
    if (rc) kb__err_copy(err, &m->err);
    return rc;
}

int kb_wait(kb_machine *m, kb_launch_id id)
{
    if (!m) return KB_EINVAL;
    kb__rt_launch *l;
    int rc = find_launch(m, id, "kb_wait: ", &l, &m->err);
    if (rc) return rc;
    if (l->owner != kb__rt_caller(m))
        return kb__err_set(&m->err, KB_EINVAL,
                           "kb_wait: launch %llu (%s) belongs to host rank %d; only it may wait "
                           "for it",
                           (unsigned long long)l->id, l->name, l->owner);
    return wait_one(m, l, NULL);
}

int kb_sync(kb_machine *m)
{
    if (!m) return KB_EINVAL;
    int first = 0;
    kb__err e;
    kb__err_clear(&e);
    int me = kb__rt_caller(m);
    for (;;) {
        kb__rt_launch *l = m->launches;
        while (l && l->owner != me)
            l = l->next;
        if (!l) break;
        uint64_t id = l->id;
        int rc = wait_one(m, l, NULL);
        if (rc && !first) {
            first = rc;
            kb__err_copy(&e, &m->err);
        }
        kb__rt_launch *k = m->launches;
        while (k && k->id != id)
            k = k->next;
        if (k) break; /* the simulation stopped: it stays outstanding */
    }
    if (first) kb__rt_fail(m, &e);
    return first;
}
