/*
 * tl_core.c — tl_ctx: program ids, arguments, the tile handle table, tile
 * lifetime (tl_free, scopes), scalar-side reads, and the internal launch.
 *
 * Cost: handle lookups are O(1); tl_scope_end is O(live slots + keep).
 * Reading a value (tl_item, tl_read) blocks until its producer finished and
 * costs pe.tcm.latency_ns of scalar time.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "pe/ipcq.h"

_Static_assert((int)TL_F16 == (int)KB__F16 && (int)TL_BF16 == (int)KB__BF16 &&
                   (int)TL_F32 == (int)KB__F32 && (int)TL_I32 == (int)KB__I32 &&
                   (int)TL_I8 == (int)KB__I8 && (int)TL_BOOL == (int)KB__BOOL &&
                   (int)TL_I16 == (int)KB__I16 && (int)TL_U8 == (int)KB__U8 &&
                   (int)TL_U16 == (int)KB__U16 && (int)TL_U32 == (int)KB__U32 &&
                   (int)TL_U32 + 1 == (int)KB__DTYPE_COUNT,
               "tl_dtype mirrors kb__dtype");
_Static_assert(TL_AXIS_ALL == KB__TILE_AXIS_ALL, "TL_AXIS_ALL mirrors the tile layer");

_Noreturn void kb__tl_raise_err(tl_ctx *k, const kb__err *err)
{
    kb__pe_raise(&k->prog, err->code ? err->code : KB_EKERNEL, "%s", err->msg);
}

/* ---- program and arguments ------------------------------------------------ */

int64_t tl_program_id(tl_ctx *k, int axis)
{
    if (axis < 0 || axis > 2)
        kb__pe_raise(&k->prog, KB_EINVAL, "tl_program_id: axis %d is not 0, 1 or 2", axis);
    return k->prog.pid[axis];
}

int64_t tl_num_programs(tl_ctx *k, int axis)
{
    if (axis < 0 || axis > 2)
        kb__pe_raise(&k->prog, KB_EINVAL, "tl_num_programs: axis %d is not 0, 1 or 2", axis);
    return k->prog.grid[axis];
}

static const kb__tl_arg *arg_of(tl_ctx *k, int i, kb__tl_arg_kind kind, const char *fn)
{
    static const char *const names[] = {"?", "a tensor", "an integer", "a float"};
    const kb__tl_launch_desc *d = k->launch;
    if (i < 0 || i >= d->n_args)
        kb__pe_raise(&k->prog, KB_EINVAL, "%s(%d): the launch has %d argument(s)", fn, i,
                     d->n_args);
    const kb__tl_arg *a = &d->args[i];
    if (a->kind != kind)
        kb__pe_raise(&k->prog, KB_EINVAL, "%s(%d): argument %d is %s, not %s", fn, i, i,
                     names[a->kind], names[kind]);
    return a;
}

/* The view tl_arg_tensor(k, i) returns for tensor argument i. */
static tl_tensor *tensor_view(tl_ctx *k, int i)
{
    const kb__tl_launch_desc *d = k->launch;
    if (d->pe_tensors && d->n_pes)
        return (tl_tensor *)&d
            ->pe_tensors[(size_t)(k->prog.index % d->n_pes) * (size_t)d->n_args + (size_t)i];
    return (tl_tensor *)&d->args[i].t;
}

tl_tensor *tl_arg_tensor(tl_ctx *k, int i)
{
    arg_of(k, i, KB__TL_ARG_TENSOR, "tl_arg_tensor");
    return tensor_view(k, i);
}

void kb__tl_need_tensor(tl_ctx *k, const tl_tensor *t, const char *op)
{
    if (!t)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "%s: the tensor is NULL (expected a tensor argument from tl_arg_tensor)", op);
    const kb__tl_launch_desc *d = k->launch;
    for (int i = 0; i < d->n_args; i++)
        if (d->args[i].kind == KB__TL_ARG_TENSOR && t == tensor_view(k, i)) return;
    kb__pe_raise(&k->prog, KB_EINVAL,
                 "%s: the tensor is not a tensor argument of this program (expected a pointer "
                 "from tl_arg_tensor)",
                 op);
}

int64_t tl_arg_i64(tl_ctx *k, int i)
{
    return arg_of(k, i, KB__TL_ARG_I64, "tl_arg_i64")->i;
}

double tl_arg_f64(tl_ctx *k, int i)
{
    return arg_of(k, i, KB__TL_ARG_F64, "tl_arg_f64")->f;
}

static void tl_body(kb__pe_prog *g, void *arg);

/* The tensor of an accessor (fn) called with t and, when has_d, dimension
 * d. The accessors take no tl_ctx, so they find the running program: in a
 * tl_ kernel's program, a NULL t, a t that is not one of its tensor
 * arguments or a d outside 0..ndim-1 ends it with a kernel error naming fn.
 * Outside any program nothing can be ended: NULL for a NULL t or a bad d,
 * and the caller returns its sentinel. */
static const tl_tensor *accessor(const tl_tensor *t, const char *fn, bool has_d, int d)
{
    kb__pe_prog *g = kb__pe_prog_running();
    if (g && g->launch_kern && g->launch_kern->body == tl_body) {
        tl_ctx *k = (tl_ctx *)g;
        kb__tl_need_tensor(k, t, fn);
        if (has_d && (d < 0 || d >= t->ndim))
            kb__pe_raise(&k->prog, KB_EINVAL,
                         "%s(%s, %d): tensor %s has %d dimension(s), so d must be 0..%d", fn,
                         t->name ? t->name : "?", d, t->name ? t->name : "?", t->ndim, t->ndim - 1);
        return t;
    }
    return t && (!has_d || (d >= 0 && d < t->ndim)) ? t : NULL;
}

int tl_tensor_ndim(const tl_tensor *t)
{
    t = accessor(t, "tl_tensor_ndim", false, 0);
    return t ? t->ndim : -1;
}

int64_t tl_tensor_dim(const tl_tensor *t, int d)
{
    t = accessor(t, "tl_tensor_dim", true, d);
    return t ? t->shape[d] : -1;
}

int64_t tl_tensor_global_dim(const tl_tensor *t, int d)
{
    t = accessor(t, "tl_tensor_global_dim", true, d);
    if (!t) return -1;
    return t->global_shape[d] ? t->global_shape[d] : t->shape[d];
}

int64_t tl_tensor_global_offset(const tl_tensor *t, int d)
{
    t = accessor(t, "tl_tensor_global_offset", true, d);
    return t ? t->global_offset[d] : -1;
}

int64_t tl_tensor_stride(const tl_tensor *t, int d)
{
    t = accessor(t, "tl_tensor_stride", true, d);
    return t ? t->strides[d] : -1;
}

tl_dtype tl_tensor_dtype(const tl_tensor *t)
{
    t = accessor(t, "tl_tensor_dtype", false, 0);
    return t ? t->dtype : TL_DTYPE_INVALID;
}

int64_t tl_cdiv(int64_t a, int64_t b)
{
    if (b <= 0) return 0;
    /* C division truncates toward zero: that is the ceiling for a <= 0, one
     * less than it for a > 0 with a remainder. No a + b - 1: it overflows. */
    return a / b + (a % b > 0);
}

int64_t tl_next_power_of_2(int64_t n)
{
    int64_t p = 1;
    while (p < n && p < ((int64_t)1 << 62))
        p <<= 1;
    return p;
}

/* ---- handles --------------------------------------------------------------- */

kb__tl_slot *kb__tl_slot_of(tl_ctx *k, tl_tile t, const char *op)
{
    if (t.slot == 0 || t.slot >= k->n_slots || !k->slots[t.slot].buf ||
        k->slots[t.slot].gen != t.gen)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "%s: invalid tile handle (slot %u, generation %u): never created or "
                     "already freed",
                     op, t.slot, t.gen);
    return &k->slots[t.slot];
}

static uint32_t slot_take(tl_ctx *k)
{
    if (k->free_slot) {
        uint32_t s = k->free_slot;
        k->free_slot = k->slots[s].next_free;
        return s;
    }
    if (k->n_slots == k->cap_slots) {
        uint32_t cap = k->cap_slots ? k->cap_slots * 2 : 64;
        kb__tl_slot *n = realloc(k->slots, cap * sizeof *n);
        if (!n) kb__pe_raise(&k->prog, KB_ENOMEM, "out of host memory for tile handles");
        memset(n + k->cap_slots, 0, (cap - k->cap_slots) * sizeof *n);
        k->slots = n;
        k->cap_slots = cap;
        if (k->n_slots == 0) k->n_slots = 1; /* slot 0 stays unused: TL_NONE */
    }
    return k->n_slots++;
}

tl_tile kb__tl_view(tl_ctx *k, const kb__tile_desc *d, kb__pe_buf *buf)
{
    uint32_t s = slot_take(k);
    kb__tl_slot *sl = &k->slots[s];
    sl->d = *d;
    sl->buf = buf;
    sl->gen = sl->gen ? sl->gen : 1;
    sl->seq = k->next_seq++;
    kb__pe_buf_hold(buf);
    return (tl_tile){s, sl->gen};
}

tl_tile kb__tl_new(tl_ctx *k, const kb__tile_desc *d, kb__pe_buf **buf_out, bool zero)
{
    kb__pe_buf *b = kb__pe_buf_new(&k->prog, kb__tile_bytes(d), zero);
    tl_tile t = kb__tl_view(k, d, b);
    kb__pe_buf_drop(b); /* the slot holds the only handle */
    if (buf_out) *buf_out = b;
    return t;
}

static void slot_release(tl_ctx *k, uint32_t s)
{
    kb__tl_slot *sl = &k->slots[s];
    kb__pe_buf_drop(sl->buf);
    sl->buf = NULL;
    sl->gen++;
    if (sl->gen == 0) sl->gen = 1;
    sl->next_free = k->free_slot;
    k->free_slot = s;
}

void tl_free(tl_ctx *k, tl_tile x)
{
    kb__tl_slot_of(k, x, "tl_free");
    slot_release(k, x.slot);
}

uint64_t tl_scope_begin(tl_ctx *k)
{
    return k->next_seq;
}

void tl_scope_end(tl_ctx *k, uint64_t scope, int n_keep, const tl_tile *keep)
{
    if (n_keep < 0 || (n_keep > 0 && !keep))
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "tl_scope_end: n_keep %d with keep %s (expected n_keep >= 0 tiles in keep)",
                     n_keep, keep ? "set" : "NULL");
    if (scope > k->next_seq)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "tl_scope_end: scope %llu was never returned by tl_scope_begin (the next "
                     "would be %llu)",
                     (unsigned long long)scope, (unsigned long long)k->next_seq);
    for (int i = 0; i < n_keep; i++)
        kb__tl_slot_of(k, keep[i], "tl_scope_end");
    for (uint32_t s = 1; s < k->n_slots; s++) {
        kb__tl_slot *sl = &k->slots[s];
        if (!sl->buf || sl->seq < scope) continue;
        bool kept = false;
        for (int i = 0; i < n_keep && !kept; i++)
            kept = keep[i].slot == s;
        if (!kept) slot_release(k, s);
    }
}

/* The header of a block of host scratch: on the program's doubly linked
 * list (16 bytes, so the block keeps malloc's alignment). */
typedef struct kb__tl_scratch {
    struct kb__tl_scratch *next, *prev;
} kb__tl_scratch;

void *kb__tl_scratch_get(tl_ctx *k, size_t bytes)
{
    kb__tl_scratch *h =
        bytes <= SIZE_MAX - sizeof *h ? malloc(sizeof *h + (bytes ? bytes : 1)) : NULL;
    if (!h)
        kb__pe_raise(&k->prog, KB_ENOMEM, "out of host memory for %zu bytes of kernel scratch",
                     bytes);
    h->prev = NULL;
    h->next = k->scratch;
    if (k->scratch) k->scratch->prev = h;
    k->scratch = h;
    return h + 1;
}

void kb__tl_scratch_put(tl_ctx *k, void *p)
{
    if (!p) return;
    kb__tl_scratch *h = (kb__tl_scratch *)p - 1;
    if (h->prev)
        h->prev->next = h->next;
    else
        k->scratch = h->next;
    if (h->next) h->next->prev = h->prev;
    free(h);
}

void kb__tl_release_all(tl_ctx *k)
{
    while (k->scratch)
        kb__tl_scratch_put(k, k->scratch + 1);
    for (uint32_t s = 1; s < k->n_slots; s++)
        if (k->slots[s].buf) slot_release(k, s);
    free(k->slots);
    k->slots = NULL;
    k->n_slots = k->cap_slots = k->free_slot = 0;
    free(k->span_buf);
    k->span_buf = NULL;
    k->span_cap = 0;
    kb__tl_mem_fini(k);
}

/* ---- scalar-side reads ----------------------------------------------------- */

static kb__tl_slot *read_slot(tl_ctx *k, tl_tile x, const char *op)
{
    kb__tl_slot *sl = kb__tl_slot_of(k, x, op);
    kb__pe_wait_buf(&k->prog, sl->buf);
    kb__pe_scalar_time(&k->prog, kb__ps_from_ns(k->prog.pe->p.tcm.latency_ns));
    kb__pe_sync(&k->prog);
    return sl;
}

double tl_item(tl_ctx *k, tl_tile x)
{
    kb__tl_slot *sl = read_slot(k, x, "tl_item");
    if (kb__tile_numel(&sl->d) != 1) {
        char shp[64];
        kb__pe_raise(&k->prog, KB_EINVAL, "tl_item: tile of shape %s has %lld elements, not 1",
                     kb__tile_shape_str(&sl->d, shp, sizeof shp),
                     (long long)kb__tile_numel(&sl->d));
    }
    if (kb__dtype_is_float(sl->d.dtype)) {
        float f;
        kb__dtype_load_f32(sl->d.dtype, kb__pe_buf_bytes(sl->buf), &f, 1);
        return f;
    }
    int64_t v;
    kb__dtype_load_i64(sl->d.dtype, kb__pe_buf_bytes(sl->buf), &v, 1);
    return (double)v;
}

void tl_read(tl_ctx *k, tl_tile x, void *dst, size_t bytes)
{
    kb__tl_slot *sl = read_slot(k, x, "tl_read");
    size_t have = kb__tile_bytes(&sl->d);
    if (bytes != have)
        kb__pe_raise(&k->prog, KB_EINVAL, "tl_read: destination has %zu B, the tile %zu B", bytes,
                     have);
    if (!dst) kb__pe_raise(&k->prog, KB_EINVAL, "tl_read: destination is NULL");
    memcpy(dst, kb__pe_buf_bytes(sl->buf), have);
}

int64_t tl_numel(tl_ctx *k, tl_tile x)
{
    return kb__tile_numel(&kb__tl_slot_of(k, x, "tl_numel")->d);
}

int tl_ndim(tl_ctx *k, tl_tile x)
{
    return kb__tl_slot_of(k, x, "tl_ndim")->d.ndim;
}

int64_t tl_shape(tl_ctx *k, tl_tile x, int d)
{
    kb__tl_slot *sl = kb__tl_slot_of(k, x, "tl_shape");
    if (d < 0 || d >= sl->d.ndim)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "tl_shape: the tile has %d dimension(s), so d must be 0..%d, got %d",
                     sl->d.ndim, sl->d.ndim - 1, d);
    return sl->d.shape[d];
}

tl_dtype tl_dtype_of(tl_ctx *k, tl_tile x)
{
    return (tl_dtype)kb__tl_slot_of(k, x, "tl_dtype_of")->d.dtype;
}

/* ---- internal launch --------------------------------------------------------- */

static void tl_body(kb__pe_prog *g, void *arg)
{
    tl_ctx *k = (tl_ctx *)g;
    const kb__tl_launch_desc *d = arg;
    d->fn(k);
    if (d->coll && g->pe->ipcq) kb__ipcq_program_end(g->pe->ipcq); /* no more queue use */
}

static int tl_prog_init(kb__pe_prog *g, void *arg, kb__err *err)
{
    (void)err;
    tl_ctx *k = (tl_ctx *)g;
    k->launch = arg;
    return 0;
}

static void tl_prog_fini(kb__pe_prog *g, void *arg)
{
    (void)arg;
    kb__tl_release_all((tl_ctx *)g);
}

static void tl_pe_done(void *arg, uint32_t pe_idx)
{
    const kb__tl_launch_desc *d = arg;
    if (d->pe_done) d->pe_done(d->pe_done_arg, pe_idx);
}

/* A collective launch of n programs: the PEs' queue set counts them for its
 * deadlock check, when every PE with queues shares one set. */
static void begin_queues(kb__pe *const *pes, uint32_t n_pes, uint32_t n)
{
    kb__ipcq_set *s = NULL;
    for (uint32_t i = 0; i < n_pes; i++) {
        kb__ipcq_ep *ep = pes[i]->ipcq;
        if (!ep) continue;
        if (s && ep->set != s) return;
        s = ep->set;
    }
    kb__ipcq_launch_begin(s, n);
}

int kb__tl_launch_start(kb__sim *sim, kb__pe *const *pes, uint32_t n_pes,
                        const kb__tl_launch_desc *d, kb__pe_launch **out, kb__err *err)
{
    if (d->n_args < 0 || d->n_args > KB__TL_MAX_ARGS)
        return kb__err_set(err, KB_EINVAL, "launch of kernel %s: %d arguments (at most %d)",
                           d->name, d->n_args, KB__TL_MAX_ARGS);
    for (uint32_t i = 0; i < n_pes; i++)
        pes[i]->dma_port = (void *)&d->mem;
    if (d->coll) begin_queues(pes, n_pes, d->grid[0] * d->grid[1] * d->grid[2]);
    kb__pe_kernel kern = {
        .name = d->name,
        .prog_size = sizeof(tl_ctx),
        .op_size = kb__tl_op_size(),
        .body = tl_body,
        .prog_init = tl_prog_init,
        .prog_fini = tl_prog_fini,
        .pe_done = tl_pe_done,
        .arg = (void *)d,
        .cancel_queues = d->coll != NULL,
    };
    return kb__pe_launch_start(sim, pes, n_pes, d->grid, &kern, out, err);
}
