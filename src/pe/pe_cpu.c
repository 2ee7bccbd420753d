/*
 * pe_cpu.c — a PE's scalar core as dispatcher: creates PEs and runs the
 * programs of a launch on them, one program at a time per PE.
 *
 * Each PE taking part in a launch gets one dispatcher coroutine. For each
 * program assigned to it, it waits pe.cpu.dispatch_ns, resets the TCM scratch
 * allocator (when no other program holds any), spawns the program's
 * coroutine, joins it, then drains the program's operations (pe_pipe.c)
 * before freeing it. With pe.cpu.pipeline on, a runner coroutine per
 * program does that, and the dispatcher goes on to the next program as soon
 * as the current one has issued its last op (docs/pe-timing.md, "Program
 * pipeline"); it finishes when every runner has. The first kernel error
 * (in simulated time) becomes the launch's error and stops every dispatcher
 * before its next program; programs already running finish (those of a
 * collective launch have their queue waits canceled, so they end at once).
 * Cost: one coroutine per PE per launch plus one per program (two with
 * pe.cpu.pipeline).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pe/internal.h"
#include "pe/ipcq.h"
#include "pe/pe.h"

#define DEFAULT_STACK (256u << 10)

typedef struct cpu_ctx {
    kb__pe_launch *l;
    uint32_t pe_idx;
    kb__proc *proc;
    uint32_t runners; /* pe.cpu.pipeline: programs of this PE not yet released */
    kb__event *drain; /* set while the dispatcher waits for runners to reach 0 */
} cpu_ctx;

struct kb__pe_launch {
    kb__sim *sim;
    kb__pe_kernel kern;
    uint32_t grid[3];
    uint32_t n_programs;
    uint32_t n_pes;
    kb__pe **pes;
    cpu_ctx *cpu;
    uint32_t running; /* dispatchers not finished */
    bool stop;        /* a program failed: start no more */
    int status;
    kb__err err;
    kb__time t_end;
    kb__event done;
};

static int check_params(const kb__pe_params *p, kb__err *err)
{
    if (!p->gemm.rows || !p->gemm.cols || !(p->gemm.clock_ghz > 0))
        return kb__err_set(err, KB_EINVAL,
                           "pe.gemm: rows, cols and clock_ghz must be positive (got %u, %u, %g)",
                           p->gemm.rows, p->gemm.cols, p->gemm.clock_ghz);
    if (!p->math.lanes || !(p->math.clock_ghz > 0))
        return kb__err_set(err, KB_EINVAL,
                           "pe.math: lanes and clock_ghz must be positive (got %u, %g)",
                           p->math.lanes, p->math.clock_ghz);
    if (p->tcm.reserved >= p->tcm.size)
        return kb__err_set(err, KB_EINVAL,
                           "pe.tcm: reserved (%llu B) must be smaller than size (%llu B)",
                           (unsigned long long)p->tcm.reserved, (unsigned long long)p->tcm.size);
    if (!p->dma.channels || !(p->dma.bw_gbs > 0))
        return kb__err_set(err, KB_EINVAL,
                           "pe.dma: channels and bw_gbs must be positive (got %u, %g)",
                           p->dma.channels, p->dma.bw_gbs);
    if (!p->queue_depth) return kb__err_set(err, KB_EINVAL, "pe.queue_depth must be at least 1");
    if (p->cpu.dispatch_ns < 0 || p->cpu.scalar_op_ns < 0)
        return kb__err_set(err, KB_EINVAL, "pe.cpu: dispatch_ns and scalar_op_ns must be >= 0");
    return 0;
}

int kb__pe_create(kb__sim *sim, const char *name, const kb__pe_params *p, kb__pe **out,
                  kb__err *err)
{
    *out = NULL;
    int rc = check_params(p, err);
    if (rc < 0) return rc;
    kb__pe *pe = calloc(1, sizeof *pe);
    if (!pe) return kb__err_set(err, KB_ENOMEM, "PE %s: out of host memory", name);
    pe->sim = sim;
    snprintf(pe->name, sizeof pe->name, "%s", name);
    pe->p = *p;
    rc = kb__tcm_init(&pe->tcm, p->tcm.size - p->tcm.reserved, err);
    if (rc < 0) {
        free(pe);
        return rc;
    }
    for (int i = 0; i < KB__PE_UNIT_COUNT; i++)
        pe->unit[i].servers = 1;
    pe->unit[KB__PE_DMA].servers = p->dma.channels;
    *out = pe;
    return 0;
}

void kb__pe_destroy(kb__pe *pe)
{
    if (!pe) return;
    kb__tcm_fini(&pe->tcm);
    free(pe);
}

static int program_main(kb__sim *sim, void *arg)
{
    (void)sim;
    kb__pe_prog *g = arg;
    const kb__pe_kernel *k = g->launch_kern;
    k->body(g, k->arg);
    if (g->issued) { /* pe.cpu.pipeline: the next program may start */
        kb__pe_sync(g);
        kb__pe_prog_issued(g);
    }
    kb__pe_wait_all(g);
    return 0;
}

kb__pe_prog *kb__pe_prog_running(void)
{
    return kb__proc_arg_if(kb__proc_on_thread(), program_main);
}

/* Fails the queue waits of every PE of a collective launch whose program
 * failed first with e: they end with KB_ECANCELED naming the cause. */
static void cancel_queues(kb__pe_launch *l, const kb__err *e)
{
    char msg[KB__ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "canceled: another rank of the collective failed first (%.900s)",
             e->msg);
    for (uint32_t i = 0; i < l->n_pes; i++) {
        kb__ipcq_ep *ep = l->pes[i]->ipcq;
        if (ep && !ep->set->failed) kb__ipcq_cancel(ep->set, KB_ECANCELED, msg);
    }
}

static void launch_fail(kb__pe_launch *l, const kb__err *e)
{
    l->stop = true;
    if (l->status == 0) {
        l->status = e->code ? e->code : KB_EKERNEL;
        kb__err_copy(&l->err, e);
        if (l->kern.cancel_queues) cancel_queues(l, e);
    }
}

static kb__pe_prog *program_new(kb__pe_launch *l, kb__pe *pe, uint32_t i)
{
    kb__pe_prog *g = calloc(1, l->kern.prog_size);
    if (!g) return NULL;
    g->pe = pe;
    g->sim = l->sim;
    g->kernel = l->kern.name;
    g->index = i;
    g->pid[0] = i % l->grid[0];
    g->pid[1] = i / l->grid[0] % l->grid[1];
    g->pid[2] = i / (l->grid[0] * l->grid[1]);
    memcpy(g->grid, l->grid, sizeof g->grid);
    g->t_scalar = kb__sim_now(l->sim);
    g->op_size = l->kern.op_size;
    kb__pool_init(&g->ops, l->kern.op_size);
    g->launch_kern = &l->kern;
    return g;
}

/* Puts g last on pe's list of programs in flight; the TCM scratch is reset
 * when no other program holds any of it. */
static void program_enter(kb__pe *pe, kb__pe_prog *g)
{
    kb__pe_prog **at = &pe->progs;
    if (!*at) kb__tcm_reset(&pe->tcm);
    while (*at)
        at = &(*at)->pe_next;
    *at = g;
}

static void program_leave(kb__pe *pe, kb__pe_prog *g)
{
    kb__pe_prog **at = &pe->progs;
    while (*at != g)
        at = &(*at)->pe_next;
    *at = g->pe_next;
    kb__pe_wake_all(pe); /* its TCM came back: a younger program may be waiting for it */
}

/* Runs program g (made by program_new) to its end: its body, then every op
 * it issued, then its release. Fires g->issued when the body returns (or
 * the program fails before). Records the first error on the launch. */
static void run_program(kb__pe_launch *l, kb__pe *pe, kb__pe_prog *g)
{
    kb__err e;
    kb__err_clear(&e);
    uint32_t i = g->index;
    program_enter(pe, g);
    pe->programs++;
    kb__time t0 = kb__sim_now(l->sim);
    int rc = l->kern.prog_init ? l->kern.prog_init(g, l->kern.arg, &e) : 0;
    if (rc == 0) {
        char name[64];
        snprintf(name, sizeof name, "%s/%s#%u", pe->name, l->kern.name, i);
        kb__proc *p = kb__proc_spawn(l->sim, name, program_main, g, l->kern.stack_bytes);
        if (p)
            rc = kb__proc_join(l->sim, p, &e);
        else
            rc = kb__err_set(&e, KB_ENOMEM,
                             "kernel %s, program %u on %s: cannot create its "
                             "coroutine",
                             l->kern.name, i, pe->name);
        if (rc < 0) kb__pe_prog_fail(g, &e);
        if (rc < 0 && g->issued) l->stop = true; /* the next program must not start */
        kb__pe_prog_issued(g);
        kb__pe_prog_drain(g);
        if (g->held) kb__pe_buf_drop(g->held); /* its call was abandoned by an error */
        if (l->kern.prog_fini) l->kern.prog_fini(g, l->kern.arg);
    }
    if (rc < 0) launch_fail(l, &e);
    kb__pe_prog_issued(g);
    kb__pe_prog_release(g);
    program_leave(pe, g);
    if (kb__trace_on(l->sim))
        kb__trace_span(l->sim, t0, pe->index, "program", l->kern.name, KB__PE_TRACK_PROGRAMS, i, 0);
    free(g);
}

static bool start_program(kb__pe_launch *l, kb__pe *pe, uint32_t i, kb__pe_prog **out)
{
    *out = program_new(l, pe, i);
    if (*out) return true;
    kb__err e;
    kb__err_set(&e, KB_ENOMEM, "kernel %s, program %u on %s: out of host memory", l->kern.name, i,
                pe->name);
    launch_fail(l, &e);
    return false;
}

/* pe.cpu.pipeline: one program's own coroutine runs it to its end (arg: the
 * program; its dispatcher is the launch's cpu_ctx of its PE). */
static int runner_main(kb__sim *sim, void *arg)
{
    kb__pe_prog *g = arg;
    kb__pe_launch *l = (kb__pe_launch *)((char *)g->launch_kern - offsetof(kb__pe_launch, kern));
    cpu_ctx *c = &l->cpu[g->index % l->n_pes];
    run_program(l, l->pes[c->pe_idx], g);
    if (--c->runners == 0 && c->drain) kb__event_fire(sim, c->drain, 0);
    return 0;
}

/* pe.cpu.pipeline: starts program g in its own runner and returns once it
 * has issued its last op (or ended). */
static void overlap_program(cpu_ctx *c, kb__pe_prog *g)
{
    kb__pe_launch *l = c->l;
    char name[64];
    snprintf(name, sizeof name, "%s/run#%u", l->pes[c->pe_idx]->name, g->index);
    kb__proc *p = kb__proc_spawn(l->sim, name, runner_main, g, 0);
    if (!p) {
        kb__err e;
        kb__err_set(&e, KB_ENOMEM, "kernel %s, program %u on %s: cannot create its runner",
                    l->kern.name, g->index, l->pes[c->pe_idx]->name);
        kb__pool_fini(&g->ops);
        free(g);
        launch_fail(l, &e);
        return;
    }
    kb__event issued;
    kb__event_init(&issued, "program issued");
    g->issued = &issued;
    c->runners++;
    kb__proc_detach(l->sim, p);
    kb__event_wait(l->sim, &issued);
}

static int dispatcher_main(kb__sim *sim, void *arg)
{
    cpu_ctx *c = arg;
    kb__pe_launch *l = c->l;
    kb__pe *pe = l->pes[c->pe_idx];
    kb__time dispatch = kb__ps_from_ns(pe->p.cpu.dispatch_ns);
    for (uint32_t i = c->pe_idx; i < l->n_programs && !l->stop; i += l->n_pes) {
        kb__sleep(sim, dispatch);
        kb__pe_prog *g;
        if (l->stop || !start_program(l, pe, i, &g)) break;
        /* The PE's last program has no successor to overlap: it runs here, so a
         * launch of one program per PE runs exactly as without the pipeline. */
        if (pe->p.cpu.pipeline && i + l->n_pes < l->n_programs) {
            overlap_program(c, g);
        } else {
            run_program(l, pe, g);
        }
    }
    if (c->runners) {
        kb__event drain;
        kb__event_init(&drain, "programs end");
        c->drain = &drain;
        kb__event_wait(sim, &drain);
        c->drain = NULL;
    }
    if (l->kern.pe_done) l->kern.pe_done(l->kern.arg, c->pe_idx);
    if (--l->running == 0) {
        l->t_end = kb__sim_now(sim);
        kb__event_fire(sim, &l->done, l->status);
    }
    return 0;
}

int kb__pe_launch_start(kb__sim *sim, kb__pe *const *pes, uint32_t n_pes, const uint32_t grid[3],
                        const kb__pe_kernel *kern, kb__pe_launch **out, kb__err *err)
{
    *out = NULL;
    uint64_t n = (uint64_t)grid[0] * grid[1] * grid[2];
    if (!n_pes || !grid[0] || !grid[1] || !grid[2] || n > UINT32_MAX)
        return kb__err_set(err, KB_EINVAL,
                           "launch of kernel %s: grid (%u, %u, %u) on %u PEs: every grid "
                           "dimension and the PE count must be positive",
                           kern->name, grid[0], grid[1], grid[2], n_pes);
    kb__pe_launch *l = calloc(1, sizeof *l);
    if (!l || !(l->pes = calloc(n_pes, sizeof *l->pes)) ||
        !(l->cpu = calloc(n_pes, sizeof *l->cpu))) {
        if (l) free(l->pes);
        free(l);
        return kb__err_set(err, KB_ENOMEM, "launch of kernel %s: out of host memory", kern->name);
    }
    l->sim = sim;
    l->kern = *kern;
    if (l->kern.prog_size < sizeof(kb__pe_prog)) l->kern.prog_size = sizeof(kb__pe_prog);
    if (l->kern.op_size < sizeof(kb__pe_op)) l->kern.op_size = sizeof(kb__pe_op);
    if (!l->kern.stack_bytes) l->kern.stack_bytes = DEFAULT_STACK;
    memcpy(l->grid, grid, sizeof l->grid);
    l->n_programs = (uint32_t)n;
    l->n_pes = n_pes;
    memcpy(l->pes, pes, n_pes * sizeof *pes);
    kb__event_init(&l->done, "launch done");
    uint32_t active = n_pes < l->n_programs ? n_pes : l->n_programs;
    l->running = active;
    for (uint32_t i = 0; i < active; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s/pe_cpu", pes[i]->name);
        l->cpu[i] = (cpu_ctx){l, i, NULL, 0, NULL};
        l->cpu[i].proc = kb__proc_spawn(sim, name, dispatcher_main, &l->cpu[i], 0);
        if (!l->cpu[i].proc) {
            kb__err e;
            kb__err_set(&e, KB_ENOMEM,
                        "launch of kernel %s: cannot create the pe_cpu "
                        "coroutine of %s",
                        kern->name, pes[i]->name);
            /* The dispatchers already spawned see `stop` and finish at once. */
            launch_fail(l, &e);
            l->running = i;
            if (i == 0) kb__event_fire(sim, &l->done, l->status);
            break;
        }
        kb__proc_detach(sim, l->cpu[i].proc);
    }
    *out = l;
    return 0;
}

kb__event *kb__pe_launch_done(kb__pe_launch *l)
{
    return &l->done;
}

int kb__pe_launch_status(const kb__pe_launch *l, kb__err *err)
{
    if (l->status < 0) kb__err_copy(err, &l->err);
    return l->status;
}

kb__time kb__pe_launch_end(const kb__pe_launch *l)
{
    return l->t_end;
}

void kb__pe_launch_abandon(kb__pe_launch *l)
{
    for (uint32_t i = 0; i < l->n_pes; i++) {
        kb__pe *pe = l->pes[i];
        kb__pe_prog **at = &pe->progs;
        while (*at) {
            kb__pe_prog *g = *at;
            if (g->launch_kern != &l->kern) {
                at = &g->pe_next;
                continue;
            }
            *at = g->pe_next; /* off the PE, waking no one */
            kb__pe_prog_abandon(g);
            if (l->kern.prog_fini) l->kern.prog_fini(g, l->kern.arg);
            kb__pe_prog_release(g);
            free(g);
        }
    }
}

void kb__pe_launch_destroy(kb__pe_launch *l)
{
    if (!l) return;
    free(l->cpu);
    free(l->pes);
    free(l);
}
