/*
 * sim/sim.h — the discrete-event simulation core: clock, event queue,
 * cancellable timers, stackful processes and the things they wait on.
 *
 * The core knows nothing about accelerators; every model layer builds on it.
 * docs/sim.md is the guide for model authors; this header is the contract.
 *
 * Ordering contract: every scheduled action (posted event, started timer,
 * process wake-up) gets the key (time, sequence number taken when it was
 * scheduled). Actions run in increasing key order, so actions at the same
 * time run in the order they were scheduled and runs are deterministic.
 *
 * Blocking rule: the event loop runs only on the main stack. A blocking call
 * (kb__sleep, kb__event_wait, kb__resource_acquire, kb__fifo_put/get,
 * kb__wait_any/all, kb__proc_join) made from a process switches back to the
 * scheduler; made from the main stack it runs the event loop until it is
 * satisfied. Blocking calls and kb__sim_run* are refused with KB_ESTATE from
 * an event callback, and kb__sim_run* also from a process.
 *
 * Ownership: kb__sim_create/kb__sim_destroy own events, processes, stacks.
 * Embeddable objects (kb__timer, kb__event, kb__resource, kb__fifo) belong
 * to the caller; the names given to their init functions are borrowed and
 * must outlive them (use string literals or names stored in the component).
 * Process names are copied.
 *
 * Cost: post/pop O(1) for untracked actions due within 65.5 ns (a time
 * wheel), O(log n) in an 8-ary heap for timers and later actions; no
 * allocation in steady state; a process switch is a few dozen instructions (hand-written for x86-64
 * and aarch64). Measured figures are in docs/sim.md.
 */
#ifndef KB_SIM_SIM_H
#define KB_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "base/budget.h"
#include "base/error.h"

/* ---- time ---------------------------------------------------------------- */

/* Simulated time in picoseconds. */
typedef uint64_t kb__time;

#define KB__TIME_NEVER UINT64_MAX

/* The largest time the clock holds: about 213 days. */
#define KB__TIME_MAX_PS 18446744073709551615.0

/* Every conversion of a model parameter to simulated time goes through these
 * (src/sim/time.c); the rounding is one rule: a value within 1e-6 ps (or
 * 1e-9 of itself, when larger) of a whole picosecond is that picosecond,
 * anything else rounds up (past 5e8 ps the tolerance covers half a ps: the
 * nearest whole ps). So 8.0 ns is 8000 ps, 0.3 ns is 300 ps, 256 B at
 * 204.8 GB/s is 1250 ps, 1000.1 ps is 1001 ps. Negative or NaN gives 0; a
 * result at or past 2^64 ps saturates at KB__TIME_NEVER (never undefined
 * behaviour). Parameters are range-checked when a machine opens
 * (kb__topo_params_from_cfg), so a run's conversions do not saturate. */
kb__time kb__ps_round(double ps);
/* ns -> ps. */
kb__time kb__ps_from_ns(double ns);
/* Time to move `bytes` at `gbs` GB/s (1 GB/s = 1 byte/ns): bytes / gbs ns.
 * 0 bytes gives 0; gbs <= 0 or NaN gives KB__TIME_NEVER (callers validate
 * bandwidths). */
kb__time kb__ps_from_bytes_gbs(uint64_t bytes, double gbs);
/* Time of `cycles` cycles at `ghz` GHz: cycles x 1000 / ghz ps. 0 cycles
 * gives 0; ghz <= 0 or NaN gives KB__TIME_NEVER. */
kb__time kb__ps_from_cycles(uint64_t cycles, double ghz);
/* bytes x 1000 / gbs as a real number of ps, unrounded: for analytical
 * models that sum fractions before rounding (the α-β model, ccl/ab_phase.c). */
double kb__ps_real_from_bytes_gbs(double bytes, double gbs);

/* a + b, saturating at KB__TIME_NEVER instead of wrapping. */
static inline kb__time kb__time_add(kb__time a, kb__time b)
{
    return b > KB__TIME_NEVER - a ? KB__TIME_NEVER : a + b;
}

/* n x t, saturating at KB__TIME_NEVER instead of wrapping. */
static inline kb__time kb__time_mul(uint64_t n, kb__time t)
{
    kb__time r;
    return __builtin_mul_overflow(n, t, &r) ? KB__TIME_NEVER : r;
}

/* ---- random numbers (xoshiro256**, seeded through splitmix64) ------------ */

typedef struct kb__rng {
    uint64_t s[4];
} kb__rng;

/* Seeds rng from (seed, stream); distinct streams give independent sequences. */
void kb__rng_seed(kb__rng *rng, uint64_t seed, uint64_t stream);
uint64_t kb__rng_u64(kb__rng *rng);
/* Uniform in [0, 1) with 53 random bits. */
double kb__rng_uniform(kb__rng *rng);
/* Exponential with the given mean (ziggurat method, exact distribution);
 * finite, >= 0. */
double kb__rng_exp(kb__rng *rng, double mean);
/* Uniform integer in [0, n) without modulo bias; 0 when n == 0. */
uint64_t kb__rng_below(kb__rng *rng, uint64_t n);

/* ---- simulator ----------------------------------------------------------- */

typedef struct kb__sim kb__sim;
typedef struct kb__proc kb__proc;

/* A trace record handed to the trace sink. ph follows Chrome trace events:
 * 'B' begin, 'E' end, 'i' instant, 'X' complete (with dur). comp is the
 * component id chosen by the emitter; cat and name must stay valid for the
 * duration of the sink call only. */
typedef struct kb__trace_rec {
    kb__time t;
    char ph;
    uint32_t comp;
    const char *cat;
    const char *name;
    kb__time dur;
    uint64_t args[4];
} kb__trace_rec;

typedef void (*kb__trace_fn)(void *user, const kb__trace_rec *r);

/* The part of the simulator inline fast paths read. Only src/sim writes it. */
typedef struct kb__sim_hot {
    kb__time now;       /* current simulated time */
    kb__trace_fn trace; /* NULL when tracing is off */
    void *trace_user;   /* passed to trace */
    uint64_t events;    /* events processed so far */
    uint64_t switches;  /* process context switches so far (both directions) */
} kb__sim_hot;

/* Creates a simulator at time 0. seed feeds every kb__proc_rng stream and
 * kb__sim_rng. Returns NULL and fills err (KB_ENOMEM) on failure. Also
 * installs, once per process, the SIGSEGV handler that reports stack
 * overflows (see docs/sim.md). */
kb__sim *kb__sim_create(uint64_t seed, kb__err *err);
/* Frees everything, including processes still waiting and their stacks.
 * Must not be called from a process or a callback. NULL is ignored. */
void kb__sim_destroy(kb__sim *sim);

static inline kb__time kb__sim_now(const kb__sim *sim)
{
    return ((const kb__sim_hot *)sim)->now;
}
static inline uint64_t kb__sim_events(const kb__sim *sim)
{
    return ((const kb__sim_hot *)sim)->events;
}
static inline uint64_t kb__sim_switches(const kb__sim *sim)
{
    return ((const kb__sim_hot *)sim)->switches;
}

/* The host memory budget of sim (base/budget.h): the event queue takes
 * from it, the device's store and pools too; no limit until the owner sets
 * one. */
kb__budget *kb__sim_budget(kb__sim *sim);

/* The last failure recorded on sim (deadlock, refused call, failed detached
 * process, out of memory); code 0 when none. */
kb__err *kb__sim_error(kb__sim *sim);

/* A random stream for callbacks and the main stack (stream id UINT64_MAX). */
kb__rng *kb__sim_rng(kb__sim *sim);

/* ---- plain events (hot path) --------------------------------------------- */

typedef void (*kb__event_fn)(kb__sim *sim, void *arg, uint64_t data);

/* Runs fn(sim, arg, data) `delay` ps from now. Fire-and-forget, pooled: no
 * allocation in steady state. If the pool or the heap cannot grow the event
 * is dropped, KB_ENOMEM is recorded and the running loop stops with it. */
void kb__sim_post(kb__sim *sim, kb__time delay, kb__event_fn fn, void *arg, uint64_t data);
/* Same at absolute time `at`; a time before now counts as now. */
void kb__sim_post_at(kb__sim *sim, kb__time at, kb__event_fn fn, void *arg, uint64_t data);

/* ---- cancellable timers (embeddable) ------------------------------------- */

#define KB__TIMER_IDLE UINT32_MAX

typedef struct kb__timer {
    kb__event_fn fn;
    void *arg;
    uint64_t data;
    kb__time at;            /* firing time while pending */
    uint32_t idx;           /* heap slot while pending, KB__TIMER_IDLE otherwise */
    uint32_t pooled;        /* 1 for the simulator's own fire-and-forget nodes */
    struct kb__timer *next; /* queue internal: list link in the near-time wheel */
    uint64_t seq;           /* queue internal: sequence number while in the wheel */
} kb__timer;

void kb__timer_init(kb__timer *t, kb__event_fn fn, void *arg, uint64_t data);
/* (Re)starts t to fire `delay` ps from now; a pending t is moved, and takes
 * a new sequence number. The callback runs with the timer idle, so it may
 * restart it. */
void kb__timer_start(kb__sim *sim, kb__timer *t, kb__time delay);
/* Stops t; returns 1 if it was pending, 0 otherwise. O(log n). */
int kb__timer_stop(kb__sim *sim, kb__timer *t);
static inline int kb__timer_pending(const kb__timer *t)
{
    return t->idx != KB__TIMER_IDLE;
}

/* Records a failure on sim (out of host memory deep inside a model, a
 * refusal of the memory budget, a clock overflow) and stops the running
 * loop, whose kb__sim_run* call returns code. Something the simulation
 * needed was lost (an event, a packet), so it cannot go on: sim is halted,
 * and once that failure has been reported every later kb__sim_run* and
 * main-stack wait fails with KB_ESTATE naming it (kb__sim_halted). */
void kb__sim_fail(kb__sim *sim, int code, const char *what);
/* 0 while sim may run; once a failure halted it (kb__sim_fail) and was
 * reported, KB_ESTATE with "OP: the simulation stopped at an earlier
 * failure and cannot go on (...)" in kb__sim_error. */
int kb__sim_halted(kb__sim *sim, const char *op);

/* ---- running ------------------------------------------------------------- */

/* Runs until the queue is empty or kb__sim_stop. Returns 0; KB_EDEADLOCK if
 * processes still wait when the queue empties (message lists them); the
 * error of a detached process that failed (the loop stops right after the
 * failure); KB_ENOMEM; KB_ESTATE if called from a process or a callback. */
int kb__sim_run(kb__sim *sim);
/* Runs every event with time <= t, then sets the clock to t (if later).
 * An empty queue before t is not a deadlock here: the caller may act at t.
 * Same errors as kb__sim_run otherwise. */
int kb__sim_run_until_time(kb__sim *sim, kb__time t);
/* Makes the running kb__sim_run* return 0 after the current event (or when
 * the calling process next blocks). No effect on main-stack waits. */
void kb__sim_stop(kb__sim *sim);

/* ---- processes (stackful coroutines) ------------------------------------- */

typedef int (*kb__proc_fn)(kb__sim *sim, void *arg);

#define KB__PROC_STACK_DEFAULT (64u * 1024u)

/* Creates a process that first runs at the current time, after what is
 * already scheduled (spawn order). name is copied; stack_bytes 0 means
 * KB__PROC_STACK_DEFAULT, others are rounded up to whole pages. Returns NULL
 * and records KB_ENOMEM on sim if memory or a stack cannot be had. The
 * caller must later join or detach it exactly once. */
kb__proc *kb__proc_spawn(kb__sim *sim, const char *name, kb__proc_fn fn, void *arg,
                         size_t stack_bytes);
/* The running process, NULL on the main stack or in a callback. */
kb__proc *kb__proc_self(kb__sim *sim);
/* The process running on the calling thread, of whichever simulator's loop
 * runs here: for code that has no kb__sim at hand (a kernel API call given
 * only a NULL pointer). NULL on a main stack, in a callback, or when no loop
 * runs on this thread. */
kb__proc *kb__proc_on_thread(void);
/* p's spawn argument when p (may be NULL) was spawned to run fn, else NULL:
 * lets a layer recognise its own processes. */
void *kb__proc_arg_if(const kb__proc *p, kb__proc_fn fn);
const char *kb__proc_name(const kb__proc *p);
/* Waits for p to end (blocking call), returns its status (0 or its negative
 * code), copies its error into err_out (may be NULL) and frees p. If the
 * wait itself is canceled or deadlocks, returns that code and p stays valid. */
int kb__proc_join(kb__sim *sim, kb__proc *p, kb__err *err_out);
/* p is freed when it ends; if it fails the running kb__sim_run* stops and
 * returns its error. */
void kb__proc_detach(kb__sim *sim, kb__proc *p);
/* p's current blocking call (or its next one, if it is not blocked) returns
 * KB_ECANCELED. No effect on a finished process. */
void kb__proc_cancel(kb__sim *sim, kb__proc *p);
/* Wakes every blocked process with `code` (e.g. KB_ECANCELED when a sibling
 * failed), so they can unwind; returns how many were woken. */
int kb__sim_interrupt_all(kb__sim *sim, int code);
/* From a process: records code and message as its error and ends it at once
 * (frames above are abandoned, nothing is unwound; the stack is reclaimed).
 * Joiners get code and message. Calling it outside a process is a programming
 * error: it prints the message and aborts. */
_Noreturn void kb__proc_raise(kb__sim *sim, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* From a process: records code and message as its error and returns code,
 * for `return kb__proc_fail(sim, KB_EINVAL, "...")`. Outside a process it
 * records the error on sim. */
int kb__proc_fail(kb__sim *sim, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The longest note, NUL included: a host rank's note holds its pending call
 * (up to 384 chars) and whom it waits for. */
#define KB__NOTE_MAX 640
/* A note shown in deadlock reports (truncated to KB__NOTE_MAX - 1 chars).
 * NULL p is ignored. */
void kb__proc_set_note(kb__proc *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same note, formatted only when a report shows it: fn writes it into
 * buf (n bytes, NUL-terminated) from arg, which must stay valid while the
 * note is set. For notes set on every blocking call of a hot path. NULL fn
 * clears the note. */
typedef void (*kb__note_fn)(char *buf, size_t n, const void *arg);
void kb__proc_set_note_fn(kb__proc *p, kb__note_fn fn, const void *arg);
/* p's own random stream, seeded from the sim seed and p's spawn index. */
kb__rng *kb__proc_rng(kb__proc *p);

/* ---- waitables ----------------------------------------------------------- */

/* Every blocking call returns 0, KB_ECANCELED or KB_EDEADLOCK (main-stack
 * wait that can never finish), or KB_ESTATE when called from a callback;
 * kb__event_wait returns the fired status instead of 0. */

/* Queue of blocked waiters; FIFO. Internal layout, do not touch. */
typedef struct kb__waitq {
    struct kb__waiter *head, *tail;
    uint32_t n; /* waiters in the queue */
} kb__waitq;

/* Waits d ps. kb__sleep(sim, 0) lets everything already scheduled at the
 * current time run first (a yield). */
int kb__sleep(kb__sim *sim, kb__time d);

/* kb__sleep for a process that polls: it waits d ps between checks of state
 * that only others change, and a check changes nothing another poller
 * reads. When every pending event is another poller's next check (and the
 * loop runs without a time limit), nothing can ever change what they poll:
 * returns KB_EDEADLOCK at once, without sleeping, with the simulator's
 * report (pollers listed with their notes) in kb__sim_error. O(1) while
 * the queue holds more entries than pollers. */
int kb__sleep_poll(kb__sim *sim, kb__time d);

typedef struct kb__event_cb {
    kb__event_fn fn;
    void *arg;
    uint64_t data;
} kb__event_cb;

/* One-shot completion. */
typedef struct kb__event {
    const char *name;      /* borrowed, shown in deadlock reports */
    int fired;             /* 1 once fired */
    int status;            /* fired status */
    kb__waitq waiters;     /* blocked waiters in wait order */
    int ncb;               /* registered callbacks */
    int cap_cb;            /* capacity of more_cb */
    kb__event_cb cb[2];    /* first two callbacks, no allocation */
    kb__event_cb *more_cb; /* callbacks beyond two */
} kb__event;

void kb__event_init(kb__event *ev, const char *name);
/* Frees callback storage of an event that never fired (> 2 callbacks). */
void kb__event_fini(kb__event *ev);
/* Fires ev with status: every waiter resumes at the current time, in the
 * order they started waiting, then callbacks registered with
 * kb__event_on_fire run (as events posted now, in registration order).
 * Firing an already fired event is ignored (the first status stays). */
void kb__event_fire(kb__sim *sim, kb__event *ev, int status);
/* Blocking: returns ev's fired status (at once if already fired). */
int kb__event_wait(kb__sim *sim, kb__event *ev);
static inline int kb__event_is_fired(const kb__event *ev)
{
    return ev->fired;
}
static inline int kb__event_status(const kb__event *ev)
{
    return ev->status;
}
/* Makes ev unfired again; KB_ESTATE if processes wait on it. */
int kb__event_reset(kb__event *ev);
/* Registers fn(sim, arg, data) to be posted when ev fires (now, if fired).
 * Returns 0 or KB_ENOMEM (only beyond two callbacks). */
int kb__event_on_fire(kb__sim *sim, kb__event *ev, kb__event_fn fn, void *arg, uint64_t data);

/* Blocking: waits until one of evs fired; *which (may be NULL) gets the
 * lowest index already fired, or the first to fire. Returns its status. */
int kb__wait_any(kb__sim *sim, kb__event **evs, int n, int *which);
/* Blocking: waits until all of evs fired; returns 0 or the status of the
 * lowest-index event that fired with an error. */
int kb__wait_all(kb__sim *sim, kb__event **evs, int n);

/* FIFO server of capacity k: acquire takes a unit or waits in strict FIFO
 * order (a later caller never overtakes a waiter). */
typedef struct kb__resource {
    const char *name;
    uint32_t capacity;
    uint32_t in_use;
    kb__waitq waiters;
} kb__resource;

void kb__resource_init(kb__resource *res, const char *name, uint32_t capacity);
int kb__resource_acquire(kb__sim *sim, kb__resource *res);
/* Hands the unit to the first waiter (it resumes now) or frees it. */
void kb__resource_release(kb__sim *sim, kb__resource *res);
static inline uint32_t kb__resource_in_use(const kb__resource *res)
{
    return res->in_use;
}
static inline uint32_t kb__resource_queue_len(const kb__resource *res)
{
    return res->waiters.n;
}

/* Bounded FIFO of void* items; blocked putters and getters are served FIFO. */
typedef struct kb__fifo {
    const char *name;
    size_t capacity; /* 0 = unbounded */
    void **ring;     /* items, ring buffer */
    size_t ring_cap; /* allocated slots */
    size_t head;     /* index of the oldest item */
    size_t count;    /* items held */
    kb__waitq getters, putters;
} kb__fifo;

void kb__fifo_init(kb__fifo *st, const char *name, size_t capacity);
/* Frees the buffer; no process may be blocked on st. */
void kb__fifo_fini(kb__fifo *st);
/* Blocking when full. Returns 0, KB_ECANCELED, KB_EDEADLOCK, or KB_ENOMEM
 * when an unbounded store cannot grow. */
int kb__fifo_put(kb__sim *sim, kb__fifo *st, void *item);
/* Blocking when empty; *out gets the oldest item. */
int kb__fifo_get(kb__sim *sim, kb__fifo *st, void **out);
/* Never block: return 1 when done, 0 when full (put) or empty (get),
 * KB_ENOMEM when an unbounded store cannot grow. */
int kb__fifo_try_put(kb__sim *sim, kb__fifo *st, void *item);
int kb__fifo_try_get(kb__sim *sim, kb__fifo *st, void **out);
static inline size_t kb__fifo_len(const kb__fifo *st)
{
    return st->count;
}

/* ---- diagnostics --------------------------------------------------------- */

/* Writes one line per blocked process (and the main stack, if it waits):
 * "process 'NAME' waits on KIND 'WNAME' since T ns [note: NOTE]". Returns the
 * number of lines; buf is always NUL-terminated (snprintf truncation). */
int kb__sim_report_waiting(kb__sim *sim, char *buf, size_t n);

/* ---- trace --------------------------------------------------------------- */

/* A progress hook: called from the event loop with the clock and the count
 * of events run; it must not touch the simulation. */
typedef void (*kb__progress_fn)(void *user, kb__time now, uint64_t events);
/* Sets (fn NULL clears) the progress hook, called after every `every` events
 * the loop runs (events a process hands over directly count too, so calls
 * come at least that many events apart). Cost when set or not: one compare
 * per event. */
void kb__sim_set_progress(kb__sim *sim, kb__progress_fn fn, void *user, uint64_t every);

/* Sets (or with fn NULL clears) the trace sink. */
void kb__sim_set_trace(kb__sim *sim, kb__trace_fn fn, void *user);
/* One load and branch: guard trace record construction with it. */
static inline int kb__trace_on(const kb__sim *sim)
{
    return ((const kb__sim_hot *)sim)->trace != 0;
}
static inline void kb__trace_emit(kb__sim *sim, const kb__trace_rec *r)
{
    const kb__sim_hot *h = (const kb__sim_hot *)sim;
    if (h->trace) h->trace(h->trace_user, r);
}
/* Emits the 'X' (complete) record of something that began at t0 and ends
 * now, with args a0..a2. */
static inline void kb__trace_span(kb__sim *sim, kb__time t0, uint32_t comp, const char *cat,
                                  const char *name, uint64_t a0, uint64_t a1, uint64_t a2)
{
    kb__trace_rec r = {.t = t0,
                       .ph = 'X',
                       .comp = comp,
                       .cat = cat,
                       .name = name,
                       .dur = kb__sim_now(sim) - t0,
                       .args = {a0, a1, a2, 0}};
    kb__trace_emit(sim, &r);
}

#endif
