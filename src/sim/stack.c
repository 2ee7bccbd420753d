/*
 * stack.c — process stacks, first contexts, and stack-overflow detection.
 *
 * Stacks are mmap'ed with one PROT_NONE guard page below the usable range
 * and kept on per-size free lists, so spawning many short processes maps
 * each stack once. Each stack costs two kernel mappings (the guard splits
 * the region); Linux's default vm.max_map_count (65530) thus bounds live
 * processes to about 30000.
 *
 * Overflow: a SIGSEGV handler, on an alternate signal stack, checks whether
 * the fault address is in the guard page of the process running on this
 * thread; if so it ends that process with KB_ESTACK (kb__proc_overflowed
 * switches to the scheduler and never returns to the faulting code). Any
 * other fault reinstalls the previous disposition and returns, so the fault
 * repeats and gets the default (or the previously installed) handling.
 *
 * Global state — with the runtime's machine tags (runtime/machine.c) the
 * one exception to "no mutable globals"; here all of it signal-handling
 * state: the previous SIGSEGV disposition (process-wide, written once under
 * pthread_once), and per thread the simulator whose loop runs on it
 * (tls_sim) and whether the alternate stack is installed.
 * kb__proc_on_thread also reads tls_sim (it never writes it).
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim/internal.h"

/* ---- stack pool ---------------------------------------------------------- */

void kb__stack_pool_init(kb__stack_pool *pool)
{
    memset(pool, 0, sizeof *pool);
    long page = sysconf(_SC_PAGESIZE);
    pool->page = page > 0 ? (size_t)page : 4096;
}

static void unpoison(kb__stack *st);

void kb__stack_pool_fini(kb__stack_pool *pool)
{
    while (pool->all) {
        kb__stack *st = pool->all;
        pool->all = st->all;
        unpoison(st); /* the next mapping at these addresses is not a stack */
        munmap((char *)st->lo - pool->page, st->size + pool->page);
        free(st);
    }
    pool->ncls = 0;
}

static struct kb__stack_class *class_of(kb__stack_pool *pool, size_t size)
{
    for (int i = 0; i < pool->ncls; i++)
        if (pool->cls[i].size == size) return &pool->cls[i];
    return NULL;
}

/* Under an ASan runtime (the library's or only the client's): frames abandoned by processes that
 * ended without returning (raise, overflow) leave poisoned redzones in the shadow memory, and a new
 * mapping (a stack, or any other mmap of the process) may reuse the
 * addresses of an old one; each new owner starts clean, and a stack is
 * cleaned before it is unmapped. */
static void unpoison(kb__stack *st)
{
    if (__asan_unpoison_memory_region) __asan_unpoison_memory_region(st->lo, st->size);
}

kb__stack *kb__stack_get(kb__stack_pool *pool, size_t size)
{
    size = (size + pool->page - 1) / pool->page * pool->page;
    struct kb__stack_class *c = class_of(pool, size);
    if (c && c->free) {
        kb__stack *st = c->free;
        c->free = st->next;
        unpoison(st);
        return st;
    }
    kb__stack *st = malloc(sizeof *st);
    if (!st) return NULL;
    size_t len = size + pool->page;
    char *map =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) {
        free(st);
        return NULL;
    }
    if (mprotect(map, pool->page, PROT_NONE) != 0) {
        munmap(map, len);
        free(st);
        return NULL;
    }
    st->lo = map + pool->page;
    st->size = size;
    st->next = NULL;
    st->all = pool->all;
    pool->all = st;
    unpoison(st);
    return st;
}

void kb__stack_put(kb__stack_pool *pool, kb__stack *st)
{
    struct kb__stack_class *c = class_of(pool, st->size);
    if (!c && pool->ncls < (int)(sizeof pool->cls / sizeof pool->cls[0])) {
        c = &pool->cls[pool->ncls++];
        c->size = st->size;
        c->free = NULL;
    }
    if (!c) return; /* an unusual ninth size: stays mapped until destroy */
    st->next = c->free;
    c->free = st;
}

/* ---- first context ------------------------------------------------------- */

#if KB__CTX_ASM
void kb__ctx_entry(void);

void kb__ctx_make(kb__ctx *c, void *lo, size_t size, void (*entry)(void *), void *arg)
{
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
#if defined(__x86_64__)
    uint64_t *sp = (uint64_t *)(top - 80);
    memset(sp, 0, 80);
    uint32_t mxcsr = 0x1f80; /* defaults: all exceptions masked, round to nearest */
    uint16_t fpcw = 0x037f;
    memcpy(&sp[0], &mxcsr, sizeof mxcsr);
    memcpy((char *)&sp[0] + 4, &fpcw, sizeof fpcw);
    sp[3] = (uint64_t)(uintptr_t)entry; /* r13 */
    sp[4] = (uint64_t)(uintptr_t)arg;   /* r12 */
    sp[7] = (uint64_t)(uintptr_t)kb__ctx_entry;
#else
    uint64_t *sp = (uint64_t *)(top - 176);
    memset(sp, 0, 176);
    sp[0] = (uint64_t)(uintptr_t)entry;          /* x19 */
    sp[1] = (uint64_t)(uintptr_t)arg;            /* x20 */
    sp[11] = (uint64_t)(uintptr_t)kb__ctx_entry; /* x30 */
#endif
    c->sp = sp;
}
#else
/* makecontext passes int arguments only: the pointers travel as halves. */
static void ucontext_entry(unsigned entry_hi, unsigned entry_lo, unsigned arg_hi, unsigned arg_lo)
{
    uintptr_t e = ((uintptr_t)entry_hi << 16 << 16) | entry_lo;
    uintptr_t a = ((uintptr_t)arg_hi << 16 << 16) | arg_lo;
    ((void (*)(void *))e)((void *)a);
}

void kb__ctx_make(kb__ctx *c, void *lo, size_t size, void (*entry)(void *), void *arg)
{
    uintptr_t e = (uintptr_t)entry, a = (uintptr_t)arg;
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = lo;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, (void (*)(void))ucontext_entry, 4, (unsigned)(e >> 16 >> 16), (unsigned)e,
                (unsigned)(a >> 16 >> 16), (unsigned)a);
}
#endif

/* ---- overflow detection -------------------------------------------------- */

static pthread_once_t segv_once = PTHREAD_ONCE_INIT;
static struct sigaction segv_previous;
static int segv_install_failed;
static __thread kb__sim *tls_sim;
static __thread int tls_altstack_done;

#define ALTSTACK_BYTES (64u * 1024u)

static void segv_handler(int sig, siginfo_t *si, void *uctx)
{
    kb__sim *sim = tls_sim;
    kb__proc *p = sim ? sim->current : NULL;
    if (p && kb__proc_guard_hit(p, si->si_addr)) kb__proc_overflowed(sim, p);
    /* Not ours: put the previous disposition back; returning re-executes
     * the faulting instruction, which then gets that handling. */
    sigaction(SIGSEGV, &segv_previous, NULL);
}

static void segv_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &segv_previous) != 0) segv_install_failed = 1;
}

static int altstack_install(void)
{
    stack_t old;
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE) &&
        old.ss_size >= ALTSTACK_BYTES / 2)
        return 0; /* this thread already has one (a sanitizer's, say) */
    void *mem =
        mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return -1;
    stack_t ss = {.ss_sp = mem, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(mem, ALTSTACK_BYTES);
        return -1;
    }
    return 0; /* kept for the thread's lifetime */
}

int kb__overflow_guard_install(kb__err *err)
{
    pthread_once(&segv_once, segv_install);
    if (segv_install_failed)
        return kb__err_set(err, KB_ENOMEM,
                           "simulator: cannot install the SIGSEGV handler that "
                           "detects process stack overflows");
    if (!tls_altstack_done) {
        if (altstack_install() != 0)
            return kb__err_set(err, KB_ENOMEM,
                               "simulator: cannot allocate the %u-byte signal stack that "
                               "reports process stack overflows",
                               ALTSTACK_BYTES);
        tls_altstack_done = 1;
    }
    return 0;
}

kb__sim *kb__overflow_guard_enter(kb__sim *sim)
{
    kb__sim *prev = tls_sim;
    tls_sim = sim;
    return prev;
}

void kb__overflow_guard_leave(kb__sim *prev)
{
    tls_sim = prev;
}

kb__sim *kb__sim_on_thread(void)
{
    return tls_sim;
}
