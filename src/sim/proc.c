/*
 * proc.c — processes: stackful coroutines run by the scheduler.
 *
 * Life of a process: spawn schedules its wake timer at the current time
 * (spawn order); each time the timer fires, proc_resume switches from the
 * scheduler (main stack) to the process, which runs until it blocks, returns
 * or raises, and switches back. The struct normally lives in the top page of
 * the process's own stack (proc_alloc), so the stack returns to the pool when
 * the struct is freed (join, detach, or at once when a detached process
 * ends); a struct too big for that is allocated apart and its stack returns
 * as soon as the process ends.
 *
 * Direct hand-over: a process that blocks while the loop's next event is
 * another process's wake-up pops that event itself and switches straight to
 * that process (kb__proc_yield), so a chain of process wake-ups costs one
 * switch each instead of a round trip through the scheduler. The pop is the
 * loop's own (same order, same clock and event count, same stop, limit and
 * until conditions), so the schedule is identical either way.
 *
 * Invariants: only proc_resume and kb__proc_yield switch into a process,
 * only kb__proc_yield, proc_end and the overflow handler switch out of one;
 * sim->current is set exactly while a process runs, and names the process
 * that switches back to the scheduler. A finished process always switches to
 * the scheduler, which reclaims its stack. A wake is a queue entry like any
 * event, so wake-ups follow the (time, sequence) order.
 *
 * Cost: one context switch and one heap push/pop per block/resume when
 * processes wake each other; two switches when a callback runs in between.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"

/* ---- switching (with ASan fiber annotations) ----------------------------- */

/* Ends a switch into a process's stack: the bounds of the stack left are
 * recorded only when it was the main stack (the target of later switches
 * out). Only under an ASan runtime. */
static void finish_in_process(kb__sim *sim, void *fake)
{
    const void *bottom = NULL;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(fake, &bottom, &size);
    if (sim->from_main) {
        sim->main_stack_bottom = bottom;
        sim->main_stack_size = size;
    }
}

static void switch_into(kb__sim *sim, kb__proc *p)
{
    bool asan = kb__asan_present();
    void *fake = NULL;
    if (asan) {
        sim->from_main = true;
        __sanitizer_start_switch_fiber(&fake, p->stack->lo, p->stack->size);
    }
    sim->hot.switches += 2; /* in now, out when it blocks or ends */
    kb__ctx_swap(&sim->main_ctx, &p->ctx);
    if (asan) __sanitizer_finish_switch_fiber(fake, NULL, NULL);
}

static void switch_out(kb__sim *sim, kb__proc *p, bool final)
{
    bool asan = kb__asan_present();
    void *fake = NULL;
    if (asan)
        __sanitizer_start_switch_fiber(final ? NULL : &fake, sim->main_stack_bottom,
                                       sim->main_stack_size);
    kb__ctx_swap(&p->ctx, &sim->main_ctx);
    if (asan) finish_in_process(sim, fake);
}

/* From the blocking process p straight to q, as if p had switched out to the
 * scheduler and the scheduler into q. */
static void switch_direct(kb__sim *sim, kb__proc *p, kb__proc *q)
{
    bool asan = kb__asan_present();
    void *fake = NULL;
    if (asan) {
        sim->from_main = false;
        __sanitizer_start_switch_fiber(&fake, q->stack->lo, q->stack->size);
    }
    kb__ctx_swap(&p->ctx, &q->ctx);
    if (asan) finish_in_process(sim, fake);
}

static void proc_resume(kb__sim *sim, void *arg, uint64_t data);

/* The blocking process p gives the CPU away. When the loop's next event is
 * the wake-up of a process q (p itself included), p runs that event here:
 * the same pop the loop would do, then a single switch p -> q instead of
 * p -> scheduler -> q. Everything else (a callback, a time limit, a stop, an
 * empty queue) goes through the scheduler. */
void kb__proc_yield(kb__sim *sim, kb__proc *p)
{
    kb__timer *n = kb__sim_pop_wake(sim, proc_resume);
    if (!n) {
        switch_out(sim, p, false);
        return;
    }
    kb__proc *q = n->arg;
    q->wake_pending = false;
    q->sleeping = false;
    q->state = KB__P_RUNNING;
    sim->current = q;
    sim->hot.switches += 2; /* counted as the scheduler round trip it replaces */
    if (q != p) switch_direct(sim, p, q);
}

/* ---- errors -------------------------------------------------------------- */

static void proc_verror(kb__proc *p, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void proc_verror(kb__proc *p, int code, const char *fmt, va_list ap)
{
    if (!p->err) p->err = malloc(sizeof *p->err);
    if (p->err) kb__err_vset(p->err, code, fmt, ap);
}

static void proc_error(kb__proc *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void proc_error(kb__proc *p, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    proc_verror(p, code, fmt, ap);
    va_end(ap);
}

/* ---- start, end, resume -------------------------------------------------- */

static _Noreturn void proc_end(kb__sim *sim, kb__proc *p, int status)
{
    p->status = status;
    p->state = KB__P_DONE;
    switch_out(sim, p, true);
    __builtin_unreachable();
}

static void proc_entry(void *arg)
{
    kb__proc *p = arg;
    kb__sim *sim = p->sim;
    if (kb__asan_present()) finish_in_process(sim, NULL);
    int rc = p->fn(sim, p->arg);
    if (rc > 0) {
        proc_error(p, KB_EINVAL,
                   "process '%s' returned %d; a process returns 0 or a negative "
                   "KB_E* code",
                   p->name, rc);
        rc = KB_EINVAL;
    }
    proc_end(sim, p, rc);
}

static void proc_unlink_free(kb__sim *sim, kb__proc *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        sim->live_head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        sim->live_tail = p->prev;
    kb__event_fini(&p->done);
    free(p->err);
    if (p->in_stack)
        kb__stack_put(&sim->stacks, p->stack); /* p lives in it: last use of p */
    else
        free(p);
}

/* Records a detached process's failure; the running loop stops with it. */
static void record_detached_failure(kb__sim *sim, kb__proc *p)
{
    if (sim->fail_pending) return;
    if (p->err)
        kb__err_copy(&sim->fail, p->err);
    else
        kb__err_set(&sim->fail, p->status, "process '%s' failed: %s", p->name,
                    kb_strerror(p->status));
    sim->fail_pending = true;
}

/* Runs on the main stack once p has switched out for the last time. */
static void proc_finish(kb__sim *sim, kb__proc *p)
{
    if (p->overflowed) {
        p->status = KB_ESTACK;
        proc_error(p, KB_ESTACK, "process '%s' overflowed its %zu-byte stack", p->name,
                   p->stack_size);
    } else if (p->status < 0 && (!p->err || p->err->code != p->status)) {
        proc_error(p, p->status, "process '%s' failed: %s", p->name, kb_strerror(p->status));
    }
    if (!p->in_stack) { /* an in-stack struct gives its stack back when freed */
        kb__stack_put(&sim->stacks, p->stack);
        p->stack = NULL;
    }
    sim->nlive--;
    if (p->detached) {
        if (p->status < 0) record_detached_failure(sim, p);
        proc_unlink_free(sim, p);
        return;
    }
    kb__event_fire(sim, &p->done, p->status);
}

static void proc_resume(kb__sim *sim, void *arg, uint64_t data)
{
    kb__proc *p = arg;
    p->wake_pending = false;
    p->sleeping = false;
    p->state = KB__P_RUNNING;
    sim->current = p;
    switch_into(sim, p);
    /* The process switching back may not be p: processes hand over directly
     * (kb__proc_yield). */
    kb__proc *last = sim->current;
    sim->current = NULL;
    if (last->state == KB__P_DONE) proc_finish(sim, last);
}

static void main_resume(kb__sim *sim, void *arg, uint64_t data)
{
    kb__proc *p = arg;
    p->wake_pending = false;
    p->sleeping = false;
    p->resumed = true;
}

kb__proc *kb__proc_new_main(kb__sim *sim)
{
    kb__proc *p = calloc(1, sizeof *p + sizeof "main");
    if (!p) return NULL;
    memcpy(p->name, "main", sizeof "main");
    p->sim = sim;
    p->is_main = true;
    p->state = KB__P_RUNNING;
    kb__timer_init(&p->wake, main_resume, p, 0);
    kb__event_init(&p->done, p->name);
    return p;
}

/* Maps p's stack and places p: inside the top page of its stack when the
 * struct (with its name) fits in half a page, so that resuming a process
 * touches one page instead of two; in its own allocation otherwise. Stack
 * tops (and in-stack structs) are staggered by multiples of 128 bytes within
 * that extra page: at one page offset they would all compete for the same few
 * cache sets. Returns p zeroed with stack, in_stack, index and *top_size set
 * (bytes of stack below the struct or the staggered top), or NULL with
 * sim->err filled. */
static kb__proc *proc_alloc(kb__sim *sim, const char *name, size_t len, size_t want,
                            size_t *top_size)
{
    size_t page = sim->stacks.page;
    size_t bytes = (sizeof(kb__proc) + len + 1 + 63) & ~(size_t)63;
    bool inside = bytes <= page / 2;
    kb__proc *p = NULL;
    if (!inside && !(p = calloc(1, sizeof *p + len + 1))) {
        kb__err_set(&sim->err, KB_ENOMEM, "spawn of process '%s': out of memory", name);
        return NULL;
    }
    /* One page more than asked: room for the struct and the staggering. */
    kb__stack *st = kb__stack_get(&sim->stacks, want + page);
    if (!st) {
        kb__err_set(&sim->err, KB_ENOMEM, "spawn of process '%s': cannot map a %zu-byte stack",
                    name, want);
        free(p);
        return NULL;
    }
    uint64_t index = sim->nspawned;
    size_t room = inside ? page - bytes : page;
    size_t colour = (index % (room / 128)) * 128;
    *top_size = st->size - colour - (inside ? bytes : 0);
    if (inside) {
        p = (kb__proc *)((char *)st->lo + *top_size);
        memset(p, 0, bytes);
    }
    p->stack = st;
    p->in_stack = inside;
    p->index = index;
    sim->nspawned++;
    return p;
}

kb__proc *kb__proc_spawn(kb__sim *sim, const char *name, kb__proc_fn fn, void *arg,
                         size_t stack_bytes)
{
    if (!name) name = "(unnamed)";
    size_t len = strlen(name);
    size_t page = sim->stacks.page;
    size_t want = stack_bytes ? stack_bytes : KB__PROC_STACK_DEFAULT;
    want = (want + page - 1) / page * page;
    size_t top_size;
    kb__proc *p = proc_alloc(sim, name, len, want, &top_size);
    if (!p) return NULL;
    memcpy(p->name, name, len + 1);
    p->sim = sim;
    p->fn = fn;
    p->arg = arg;
    kb__rng_seed(&p->rng, sim->seed, p->index);
    kb__event_init(&p->done, p->name);
    kb__timer_init(&p->wake, proc_resume, p, 0);
    p->stack_size = want;
    kb__ctx_make(&p->ctx, p->stack->lo, top_size, proc_entry, p);
    p->state = KB__P_NEW;
    p->prev = sim->live_tail;
    if (sim->live_tail)
        sim->live_tail->next = p;
    else
        sim->live_head = p;
    sim->live_tail = p;
    sim->nlive++;
    p->wake_pending = true;
    p->wake_seq = kb__sim_schedule(sim, 0, &p->wake);
    return p;
}

/* ---- wake, interrupt ----------------------------------------------------- */

void kb__proc_wake(kb__sim *sim, kb__proc *p, int status, int index)
{
    if (p->wake_pending) return;
    p->wake_pending = true;
    p->wake_status = status;
    p->wake_index = index;
    p->wake_seq = kb__sim_schedule(sim, 0, &p->wake);
}

int kb__proc_interrupt(kb__sim *sim, kb__proc *p, int code)
{
    if (p->state == KB__P_DONE || p->is_main) return 0;
    if (p->state != KB__P_BLOCKED || (p->wake_pending && !p->sleeping)) {
        p->interrupt = code; /* running, starting, or already satisfied */
        return 0;
    }
    if (p->sleeping) {
        kb__sim_unschedule(sim, &p->wake, p->wake_seq);
        p->sleeping = false;
        p->wake_pending = false;
    }
    for (int i = 0; i < p->nwaiters; i++)
        if (p->waiters[i].q) kb__waitq_remove(&p->waiters[i]);
    kb__proc_wake(sim, p, code, -1);
    return 1;
}

void kb__proc_cancel(kb__sim *sim, kb__proc *p)
{
    if (p) kb__proc_interrupt(sim, p, KB_ECANCELED);
}

int kb__sim_interrupt_all(kb__sim *sim, int code)
{
    int n = 0;
    for (kb__proc *p = sim->live_head; p; p = p->next)
        if (p->state == KB__P_BLOCKED && !(p->wake_pending && !p->sleeping))
            n += kb__proc_interrupt(sim, p, code);
    return n;
}

/* ---- join, detach -------------------------------------------------------- */

int kb__proc_join(kb__sim *sim, kb__proc *p, kb__err *err_out)
{
    if (!p) return kb__err_set(err_out, KB_EINVAL, "kb__proc_join: no process given");
    if (p->detached)
        return kb__err_set(err_out, KB_ESTATE, "process '%s' is detached and cannot be joined",
                           p->name);
    if (p == sim->current)
        return kb__err_set(err_out, KB_ESTATE, "process '%s' cannot join itself", p->name);
    if (p->state != KB__P_DONE) {
        int rc = kb__event_wait_as(sim, &p->done, "kb__proc_join", "process", p->name);
        if (p->state != KB__P_DONE) {
            if (rc == KB_EDEADLOCK || rc == KB_ESTATE)
                kb__err_copy(err_out, &sim->err);
            else
                kb__err_set(err_out, rc, "join of process '%s' interrupted: %s", p->name,
                            kb_strerror(rc));
            return rc;
        }
    }
    int status = p->status;
    if (p->err && status != 0)
        kb__err_copy(err_out, p->err);
    else
        kb__err_clear(err_out);
    proc_unlink_free(sim, p);
    return status;
}

void kb__proc_detach(kb__sim *sim, kb__proc *p)
{
    if (!p || p->detached) return;
    p->detached = true;
    if (p->state == KB__P_DONE) {
        if (p->status < 0) record_detached_failure(sim, p);
        proc_unlink_free(sim, p);
    }
}

/* ---- errors raised by the running process -------------------------------- */

_Noreturn void kb__proc_raise(kb__sim *sim, int code, const char *fmt, ...)
{
    kb__proc *p = sim->current;
    va_list ap;
    va_start(ap, fmt);
    if (!p) {
        fprintf(stderr, "kernbench: kb__proc_raise outside a process: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        abort();
    }
    if (code > 0) code = KB_EINVAL;
    if (code < 0) proc_verror(p, code, fmt, ap);
    va_end(ap);
    proc_end(sim, p, code);
}

int kb__proc_fail(kb__sim *sim, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (sim->current)
        proc_verror(sim->current, code, fmt, ap);
    else
        kb__err_vset(&sim->err, code, fmt, ap);
    va_end(ap);
    return code;
}

_Noreturn void kb__proc_overflowed(kb__sim *sim, kb__proc *p)
{
    p->overflowed = true;
    proc_end(sim, p, KB_ESTACK);
}

int kb__proc_guard_hit(const kb__proc *p, const void *addr)
{
    if (!p->stack) return 0;
    const char *lo = p->stack->lo;
    const char *a = addr;
    return a < lo && a >= lo - p->sim->stacks.page;
}

/* ---- small accessors ----------------------------------------------------- */

kb__proc *kb__proc_self(kb__sim *sim)
{
    return sim->current;
}

kb__proc *kb__proc_on_thread(void)
{
    kb__sim *sim = kb__sim_on_thread();
    return sim ? sim->current : NULL;
}

void *kb__proc_arg_if(const kb__proc *p, kb__proc_fn fn)
{
    return p && p->fn == fn ? p->arg : NULL;
}

const char *kb__proc_name(const kb__proc *p)
{
    return p->name;
}

void kb__proc_set_note(kb__proc *p, const char *fmt, ...)
{
    if (!p) return;
    p->note_fn = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->note, sizeof p->note, fmt, ap);
    va_end(ap);
}

void kb__proc_set_note_fn(kb__proc *p, kb__note_fn fn, const void *arg)
{
    if (!p) return;
    p->note_fn = fn;
    p->note_arg = arg;
    p->note[0] = 0;
}

kb__rng *kb__proc_rng(kb__proc *p)
{
    return &p->rng;
}

void kb__proc_free_all(kb__sim *sim)
{
    while (sim->live_head)
        proc_unlink_free(sim, sim->live_head);
    if (sim->main) {
        kb__event_fini(&sim->main->done);
        free(sim->main);
        sim->main = NULL;
    }
}
