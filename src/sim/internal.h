/*
 * sim/internal.h — layouts shared by the files of src/sim: the simulator,
 * processes, waiters, machine contexts and the stack pool.
 *
 * Invariants:
 * - The event loop runs only on the main stack (a blocking process only pops
 *   the next event itself when it is another process's wake-up, and then
 *   switches to that process: kb__proc_yield); sim->current is the process
 *   whose stack is running (NULL on the main stack).
 * - A process is in exactly one of: NEW (start scheduled), READY (wake timer
 *   pending), RUNNING, BLOCKED (waiting; maybe with a wake already
 *   scheduled), DONE. A DONE process has no stack.
 * - A blocked process's waiters sit in their queues until it is woken; the
 *   first wake wins (wake_pending), later ones are ignored.
 * - The main stack waits through sim->main, a pseudo-process without stack
 *   whose wake timer sets `resumed` instead of switching.
 */
#ifndef KB_SIM_INTERNAL_H
#define KB_SIM_INTERNAL_H

#include <stdbool.h>

#include "sim/sim.h"

/* AddressSanitizer's fiber and poisoning API, declared weak and looked up
 * at run time: the switches are annotated whenever an ASan runtime is in the
 * process (this library built with -fsanitize=address, or only the client
 * linking it), so a sanitized client's kernels run on clean coroutine
 * stacks whatever the library was built with. Without a runtime the
 * symbols are NULL and nothing is called. */
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size)
    __attribute__((weak));
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old) __attribute__((weak));
void __asan_unpoison_memory_region(void const volatile *addr, size_t size) __attribute__((weak));

/* Whether an ASan runtime is in the process (its fiber API resolved; a
 * runtime provides all three functions). One test of a resolved address. */
static inline bool kb__asan_present(void)
{
    return __sanitizer_start_switch_fiber != NULL;
}

/* Hand-written switch on ELF x86-64 and aarch64; ucontext elsewhere (or when
 * KB_SIM_FORCE_UCONTEXT is defined, to test the fallback). */
#if defined(__ELF__) && (defined(__x86_64__) || defined(__aarch64__)) &&                           \
    !defined(KB_SIM_FORCE_UCONTEXT)
#define KB__CTX_ASM 1
#else
#define KB__CTX_ASM 0
#include <ucontext.h>
#endif

/* ---- machine contexts (ctx.c, ctx_switch.S) ------------------------------ */

typedef struct kb__ctx {
#if KB__CTX_ASM
    void *sp; /* saved stack pointer; the registers are stored below it */
#else
    ucontext_t uc;
#endif
} kb__ctx;

#if KB__CTX_ASM
void kb__ctx_switch(void **save_sp, void *to_sp);
#endif

/* Prepares c to run entry(arg) on [lo, lo + size) at its first switch.
 * entry must never return. */
void kb__ctx_make(kb__ctx *c, void *lo, size_t size, void (*entry)(void *), void *arg);

/* Saves the running context into from and resumes to. */
static inline void kb__ctx_swap(kb__ctx *from, kb__ctx *to)
{
#if KB__CTX_ASM
    kb__ctx_switch(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
}

/* ---- stacks (stack.c) ---------------------------------------------------- */

typedef struct kb__stack {
    void *lo;               /* lowest usable byte; the guard page is below */
    size_t size;            /* usable bytes, whole pages */
    struct kb__stack *next; /* free list of its size */
    struct kb__stack *all;  /* every stack, for munmap at the end */
} kb__stack;

typedef struct kb__stack_pool {
    size_t page;
    kb__stack *all;
    struct kb__stack_class {
        size_t size;
        kb__stack *free;
    } cls[8]; /* free lists of the 8 first sizes seen */
    int ncls;
} kb__stack_pool;

void kb__stack_pool_init(kb__stack_pool *pool);
void kb__stack_pool_fini(kb__stack_pool *pool);
/* A stack of at least `size` bytes (whole pages) with a PROT_NONE page
 * below; reused when one is free. NULL when mmap fails. */
kb__stack *kb__stack_get(kb__stack_pool *pool, size_t size);
void kb__stack_put(kb__stack_pool *pool, kb__stack *st);

/* Installs (once per process) the SIGSEGV handler and (once per thread) an
 * alternate signal stack. Returns 0 or KB_ENOMEM. */
int kb__overflow_guard_install(kb__err *err);
/* Marks sim as the simulator whose loop runs on this thread (signal
 * handling state); returns the previous one, to restore. */
kb__sim *kb__overflow_guard_enter(kb__sim *sim);
void kb__overflow_guard_leave(kb__sim *prev);
/* The simulator marked by kb__overflow_guard_enter on this thread, or NULL
 * (for kb__proc_on_thread). */
kb__sim *kb__sim_on_thread(void);

/* ---- processes and waiters (proc.c, wait.c) ------------------------------ */

typedef struct kb__waiter {
    struct kb__waiter *prev, *next;
    kb__waitq *q;   /* queue it is in, NULL once out */
    kb__proc *proc; /* who waits (sim->main for the main stack) */
    void *item;     /* store hand-off: the item put or got */
    int index;      /* position in a kb__wait_any set */
} kb__waiter;

enum kb__proc_state { KB__P_NEW, KB__P_READY, KB__P_RUNNING, KB__P_BLOCKED, KB__P_DONE };

/* Fields used on every block and resume come first, so they share the first
 * cache lines (the struct is 64-byte aligned when it lives in its stack). */
struct kb__proc {
    kb__ctx ctx;       /* saved context while not running */
    kb__timer wake;    /* resumes it (start, wake-up, end of sleep); queued with
                          kb__sim_schedule, never a tracked timer */
    uint64_t wake_seq; /* sequence number of the queued wake */
    int wake_status;   /* what the blocking call returns */
    int wake_index;    /* kb__wait_any: index of the waiter that woke it */
    uint8_t state;     /* enum kb__proc_state */
    bool wake_pending; /* a wake is scheduled (the first wake wins) */
    bool sleeping;     /* wake is the end of a kb__sleep */
    bool polling;      /* in kb__sleep_poll (counted in sim->npolling) */
    bool detached;
    bool is_main;    /* the main-stack pseudo-process */
    bool resumed;    /* main only: its wake timer fired */
    bool overflowed; /* ended by the SIGSEGV guard handler */
    bool in_stack;   /* the struct lives in the top page of its stack */
    int interrupt;   /* code for the next blocking call, 0 = none */
    int nwaiters;
    kb__waiter *waiters;   /* the current wait's queue entries */
    const char *wait_kind; /* "event", "resource", ... while blocked */
    const char *wait_name;
    kb__time wait_since;
    int wait_count; /* kb__wait_any/all: number of events */
    int status;     /* final status once DONE */
    kb__rng rng;
    kb__sim *sim;
    kb__err *err;   /* final error message, allocated on failure */
    kb__event done; /* fired with status when the process ends */
    kb__proc_fn fn;
    void *arg;
    kb__stack *stack;      /* kept until the struct is freed when in_stack */
    size_t stack_size;     /* as asked (whole pages); the mapping has one more */
    uint64_t index;        /* spawn index */
    kb__proc *prev, *next; /* live list in spawn order */
    char note[KB__NOTE_MAX];
    kb__note_fn note_fn; /* when set, the note is note_fn(note_arg) */
    const void *note_arg;
    char name[]; /* copied at spawn */
};

/* ---- the simulator ------------------------------------------------------- */

typedef struct kb__heap_key {
    kb__time t;
    uint64_t seq; /* (counter << 1) | 1 if the node tracks its slot */
} kb__heap_key;

/* An 8-ary min-heap on (t, seq) (queue.c). */
typedef struct kb__heap {
    kb__heap_key *key; /* keys by value; key[1] on a 64-byte boundary */
    kb__timer **node;  /* node of each slot */
    void *mem;         /* allocation holding key */
    uint32_t len, cap;
} kb__heap;

typedef struct kb__node_chunk {
    struct kb__node_chunk *next;
    kb__timer nodes[256];
} kb__node_chunk;

/* Near-time wheel: KB__WHEEL_SLOTS buckets of 2^KB__WHEEL_SHIFT ps, a span of
 * 65 536 ps (see queue.c). */
#define KB__WHEEL_SHIFT 5
#define KB__WHEEL_SLOTS 2048u
#define KB__WHEEL_WORDS (KB__WHEEL_SLOTS / 64)

struct kb__sim {
    kb__sim_hot hot; /* first: the inline accessors read it */
    kb__heap heap;   /* timers, and untracked entries outside the wheel */
    uint64_t seq;    /* next sequence counter (shifted left by one) */
    /* Near-time wheel (queue.c): untracked entries of the current bucket
     * (number cur_b, 32 ps) in one list per ps, oldest first; those of the
     * next KB__WHEEL_SLOTS - 1 buckets in bucket (t >> KB__WHEEL_SHIFT) mod
     * KB__WHEEL_SLOTS, unsorted, newest first. */
    uint64_t cur_b;
    uint32_t cur_mask; /* bit i: the list of ps i is not empty */
    kb__timer *cur_head[1u << KB__WHEEL_SHIFT], *cur_tail[1u << KB__WHEEL_SHIFT];
    kb__timer *wheel[KB__WHEEL_SLOTS];
    uint64_t wheel_bit[KB__WHEEL_WORDS]; /* bucket non-empty */
    uint64_t wheel_sum;                  /* word of wheel_bit non-zero */
    uint64_t wheel_n;                    /* entries in the buckets */
    kb__timer *pf_next; /* walk of the next bucket's list, one node a pop (queue.c) */
    /* Parameters of the running kb__sim_loop (loops never nest), read by
     * kb__sim_pop_wake so a blocking process can switch directly to the next
     * process exactly when the loop would. */
    bool loop_active;
    bool loop_honor_stop;
    const bool *loop_until;
    kb__time loop_limit;
    kb__timer *free_nodes; /* pooled event nodes; linked through arg */
    kb__node_chunk *chunks;
    kb__proc *current; /* running process, NULL on the main stack */
    bool in_loop;      /* an event loop runs (refuse nested blocking) */
    bool stop;         /* kb__sim_stop was called */
    bool fail_pending; /* a detached process failed / OOM; loop stops */
    /* kb__sim_fail ran: an event or a model's allocation was lost, so the
     * simulation cannot go on; every later run or main-stack wait is
     * refused with KB_ESTATE naming `halt`, the first such failure */
    bool halted;
    kb__err halt;
    uint64_t seed;
    uint64_t nspawned;
    uint64_t nlive;    /* processes started and not finished */
    uint64_t npolling; /* processes sleeping in kb__sleep_poll */
    /* kb__sim_set_progress: the hook runs once the event count reaches
     * progress_next (UINT64_MAX when none is set) */
    kb__progress_fn progress;
    void *progress_user;
    uint64_t progress_every, progress_next;
    kb__proc *live_head, *live_tail;
    kb__proc *main;   /* main-stack pseudo-process */
    kb__ctx main_ctx; /* the scheduler's context while a process runs */
    kb__stack_pool stacks;
    kb__rng rng;
    kb__budget budget; /* host memory held (base/budget.h); the machine sets its limit */
    kb__err err;       /* last failure */
    kb__err fail;      /* pending failure (detached process, OOM) */
    /* under an ASan runtime (kb__asan_present) */
    const void *main_stack_bottom;
    size_t main_stack_size;
    bool from_main; /* the switch in progress leaves the main stack */
};

/* queue.c */
/* Whether at most n entries are queued. O(1) when the heap and the wheel
 * already hold more; else O(entries of the current bucket). */
bool kb__queue_at_most(const kb__sim *sim, uint64_t n);
/* Pops and runs events until *until is true, the queue empties, or (when
 * honor_stop) a stop/failure. Returns 1 if the queue emptied. */
int kb__sim_loop(kb__sim *sim, const bool *until, kb__time limit, bool honor_stop);
/* Queues node (neither pooled nor a tracked timer) `delay` ps from now;
 * returns its sequence number, the handle for kb__sim_unschedule. */
uint64_t kb__sim_schedule(kb__sim *sim, kb__time delay, kb__timer *node);
/* If the running loop would run, as its very next event, an untracked entry
 * whose callback is fn, pops it (advancing the clock and the event count,
 * exactly as the loop does) and returns its node; otherwise NULL. */
kb__timer *kb__sim_pop_wake(kb__sim *sim, kb__event_fn fn);
/* Removes the queued entry (node, seq); O(queue length). 1 if found. */
int kb__sim_unschedule(kb__sim *sim, kb__timer *node, uint64_t seq);
/* Records a failure on sim (KB_ENOMEM from deep inside) and stops loops. */
void kb__sim_fail(kb__sim *sim, int code, const char *what);

/* proc.c */
kb__proc *kb__proc_new_main(kb__sim *sim);
void kb__proc_free_all(kb__sim *sim);
/* Schedules p to resume now with status (index for wait_any); ignored if a
 * wake is already scheduled. */
void kb__proc_wake(kb__sim *sim, kb__proc *p, int status, int index);
/* Switches from the running process p to the scheduler; returns when p is
 * resumed. */
void kb__proc_yield(kb__sim *sim, kb__proc *p);
/* Wakes p now with code if it is blocked; otherwise (code != 0) its next
 * blocking call returns code. Returns 1 if p was woken. */
int kb__proc_interrupt(kb__sim *sim, kb__proc *p, int code);
/* Called by the overflow handler: ends the running process. */
_Noreturn void kb__proc_overflowed(kb__sim *sim, kb__proc *p);
int kb__proc_guard_hit(const kb__proc *p, const void *addr);

/* wait.c: the blocking protocol used by every waitable. */
/* Who is calling: the running process, or sim->main from the main stack.
 * Returns NULL and sets *rc when the call must not block (callback: KB_ESTATE
 * with message; pending cancel: its code). */
kb__proc *kb__wait_caller(kb__sim *sim, const char *op, int *rc);
/* Blocks p (its waiters already queued) until woken; returns wake_status.
 * Leaves no waiter of p in any queue. */
int kb__wait_block(kb__sim *sim, kb__proc *p, const char *kind, const char *name);
void kb__waitq_push(kb__waitq *q, kb__waiter *w);
kb__waiter *kb__waitq_pop(kb__waitq *q);
void kb__waitq_remove(kb__waiter *w);
/* kb__event_wait with the kind and name shown in deadlock reports. */
int kb__event_wait_as(kb__sim *sim, kb__event *ev, const char *op, const char *kind,
                      const char *name);

/* deadlock.c */
int kb__deadlock_report(kb__sim *sim, const char *what);
/* The same report when every pending event is a poller's next check
 * (kb__sleep_poll): the pollers are listed among the waiters. */
int kb__poll_deadlock_report(kb__sim *sim);

#endif
