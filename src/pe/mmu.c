/*
 * mmu.c — pe_mmu translation tables: shared segment sets, per-PE references.
 *
 * See mmu.h for the structure. Translation is two binary searches; the
 * tables change only when the host maps or unmaps a tensor, so attach and
 * detach keep each PE's reference array sorted by plain insertion.
 */
#include "pe/mmu.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kb__mmu_init(kb__mmu *mmu, uint32_t sips, uint32_t cubes_per_sip, uint32_t pes_per_cube,
                 uint64_t page_size, uint64_t translate_ps, kb__err *err)
{
    memset(mmu, 0, sizeof *mmu);
    if (page_size < 64 || (page_size & (page_size - 1)))
        return kb__err_set(err, KB_ECONFIG,
                           "pe.mmu.page_size: expected a power of two >= 64, got %" PRIu64,
                           page_size);
    if (!sips || !cubes_per_sip || !pes_per_cube)
        return kb__err_set(err, KB_ECONFIG, "mmu: machine has no PEs (%u×%u×%u)", sips,
                           cubes_per_sip, pes_per_cube);
    mmu->sips = sips;
    mmu->cubes_per_sip = cubes_per_sip;
    mmu->pes_per_cube = pes_per_cube;
    mmu->n_pes = sips * cubes_per_sip * pes_per_cube;
    mmu->page_size = page_size;
    mmu->translate_ps = translate_ps;
    mmu->pes = calloc(mmu->n_pes, sizeof *mmu->pes);
    if (!mmu->pes)
        return kb__err_set(err, KB_ENOMEM, "mmu: cannot allocate %u PE tables", mmu->n_pes);
    return 0;
}

static void set_unref(kb__mmu *mmu, kb__mmu_set *set)
{
    if (--set->refs == 0) {
        mmu->live_sets--;
        if (!set->held) free(set);
    }
}

void kb__mmu_fini(kb__mmu *mmu)
{
    if (mmu->pes) {
        for (uint32_t p = 0; p < mmu->n_pes; p++) {
            kb__mmu_pe *t = &mmu->pes[p];
            for (uint32_t i = 0; i < t->n; i++)
                set_unref(mmu, t->refs[i].set);
            free(t->refs);
        }
        free(mmu->pes);
    }
    memset(mmu, 0, sizeof *mmu);
}

static int seg_cmp(const void *a, const void *b)
{
    const kb__mmu_seg *x = a, *y = b;
    return x->va < y->va ? -1 : x->va > y->va;
}

int kb__mmu_set_create(const kb__mmu *mmu, const kb__mmu_seg *segs, size_t n, uint64_t tag,
                       kb__mmu_set **out, kb__err *err)
{
    *out = NULL;
    if (n == 0) return kb__err_set(err, KB_EINVAL, "mmu: a mapping needs at least one segment");
    uint64_t mask = mmu->page_size - 1;
    for (size_t i = 0; i < n; i++) {
        const kb__mmu_seg *s = &segs[i];
        if ((s->va | s->len | s->pa) & mask || s->len == 0 || s->va + s->len < s->va)
            return kb__err_set(err, KB_EINVAL,
                               "mmu: segment %zu (VA 0x%" PRIx64 ", %" PRIu64
                               " bytes, PA 0x%" PRIx64 ") is not page-aligned to %" PRIu64,
                               i, s->va, s->len, s->pa, mmu->page_size);
    }
    kb__mmu_set *set = malloc(sizeof *set + n * sizeof set->segs[0]);
    if (!set) return kb__err_set(err, KB_ENOMEM, "mmu: cannot allocate %zu segments", n);
    memcpy(set->segs, segs, n * sizeof *segs);
    qsort(set->segs, n, sizeof *segs, seg_cmp);
    for (size_t i = 1; i < n; i++) {
        if (set->segs[i - 1].va + set->segs[i - 1].len > set->segs[i].va) {
            uint64_t va = set->segs[i].va;
            free(set);
            return kb__err_set(err, KB_EINVAL, "mmu: segments overlap at VA 0x%" PRIx64, va);
        }
    }
    set->refs = 0;
    set->held = 1;
    set->tag = tag;
    set->n = n;
    set->va_lo = set->segs[0].va;
    set->va_hi = set->segs[n - 1].va + set->segs[n - 1].len;
    *out = set;
    return 0;
}

void kb__mmu_set_release(kb__mmu_set *set)
{
    if (!set) return;
    set->held = 0;
    if (set->refs == 0) free(set);
}

/* First reference whose hi > va (refs sorted, non-overlapping). */
static uint32_t ref_search(const kb__mmu_pe *t, uint64_t va)
{
    uint32_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->refs[mid].hi <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void pe_name(const kb__mmu *mmu, uint32_t pe, char *buf, size_t size)
{
    uint32_t per_sip = mmu->cubes_per_sip * mmu->pes_per_cube;
    snprintf(buf, size, "sip%u/cube%u/pe%u", pe / per_sip, pe % per_sip / mmu->pes_per_cube,
             pe % mmu->pes_per_cube);
}

int kb__mmu_attach(kb__mmu *mmu, uint32_t pe, kb__mmu_set *set, kb__err *err)
{
    if (pe >= mmu->n_pes)
        return kb__err_set(err, KB_ERANGE, "mmu: PE %u out of range (machine has %u)", pe,
                           mmu->n_pes);
    kb__mmu_pe *t = &mmu->pes[pe];
    uint32_t i = ref_search(t, set->va_lo);
    if (i < t->n && t->refs[i].lo < set->va_hi) {
        char who[48];
        pe_name(mmu, pe, who, sizeof who);
        return kb__err_set(err, KB_EINVAL,
                           "mmu: %s: VA [0x%" PRIx64 ", 0x%" PRIx64
                           ") overlaps the mapped range [0x%" PRIx64 ", 0x%" PRIx64 ")",
                           who, set->va_lo, set->va_hi, t->refs[i].lo, t->refs[i].hi);
    }
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 4;
        kb__mmu_ref *r = realloc(t->refs, cap * sizeof *r);
        if (!r)
            return kb__err_set(err, KB_ENOMEM, "mmu: cannot grow a PE table to %u entries", cap);
        t->refs = r;
        t->cap = cap;
    }
    memmove(&t->refs[i + 1], &t->refs[i], (t->n - i) * sizeof *t->refs);
    t->refs[i] = (kb__mmu_ref){set->va_lo, set->va_hi, set};
    t->n++;
    if (set->refs++ == 0) mmu->live_sets++;
    mmu->live_refs++;
    return 0;
}

size_t kb__mmu_detach(kb__mmu *mmu, uint32_t pe, uint64_t va, uint64_t len)
{
    if (pe >= mmu->n_pes) return 0;
    kb__mmu_pe *t = &mmu->pes[pe];
    uint32_t i = ref_search(t, va), j = i;
    while (j < t->n && t->refs[j].lo >= va && t->refs[j].hi - va <= len)
        set_unref(mmu, t->refs[j++].set);
    if (j == i) return 0;
    memmove(&t->refs[i], &t->refs[j], (t->n - j) * sizeof *t->refs);
    t->n -= j - i;
    mmu->live_refs -= j - i;
    return j - i;
}

static const kb__mmu_seg *seg_find(const kb__mmu_set *set, uint64_t va)
{
    size_t lo = 0, hi = set->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (set->segs[mid].va + set->segs[mid].len <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < set->n && set->segs[lo].va <= va) return &set->segs[lo];
    return NULL;
}

int kb__mmu_translate(const kb__mmu *mmu, uint32_t pe, uint64_t va, uint64_t *pa, uint64_t *contig,
                      kb__err *err)
{
    *pa = 0;
    if (contig) *contig = 0;
    if (pe >= mmu->n_pes)
        return kb__err_set(err, KB_ERANGE, "mmu: PE %u out of range (machine has %u)", pe,
                           mmu->n_pes);
    const kb__mmu_pe *t = &mmu->pes[pe];
    uint32_t i = ref_search(t, va);
    const kb__mmu_seg *s = NULL;
    if (i < t->n && t->refs[i].lo <= va) s = seg_find(t->refs[i].set, va);
    if (!s) {
        char who[48], vs[32], what[256] = "";
        pe_name(mmu, pe, who, sizeof who);
        if (mmu->namer) mmu->namer(mmu->namer_ctx, va, what, sizeof what);
        return kb__err_set(err, KB_EFAULT, "%s: VA %s is not mapped%s%s", who,
                           kb__mmu_format_va(va, vs, sizeof vs), what[0] ? " " : "", what);
    }
    *pa = s->pa + (va - s->va);
    if (contig) *contig = s->va + s->len - va;
    return 0;
}

uint64_t kb__mmu_translate_cost(const kb__mmu *mmu, uint64_t va, uint64_t len)
{
    if (len == 0) return 0;
    int sh = __builtin_ctzll(mmu->page_size); /* a power of two (checked when made) */
    uint64_t first = va >> sh, last = (va + len - 1) >> sh;
    return (last - first + 1) * mmu->translate_ps;
}

uint64_t kb__mmu_set_pages(const kb__mmu *mmu, const kb__mmu_set *set)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < set->n; i++)
        bytes += set->segs[i].len;
    return bytes / mmu->page_size;
}

size_t kb__mmu_bytes(const kb__mmu *mmu)
{
    size_t b = mmu->n_pes * sizeof *mmu->pes;
    for (uint32_t p = 0; p < mmu->n_pes; p++) {
        const kb__mmu_pe *t = &mmu->pes[p];
        b += t->cap * sizeof *t->refs;
        for (uint32_t i = 0; i < t->n; i++) {
            const kb__mmu_set *s = t->refs[i].set;
            /* Each set is counted once, by its share of references. */
            b += (sizeof *s + s->n * sizeof s->segs[0]) / s->refs;
        }
    }
    return b;
}

const char *kb__mmu_format_va(uint64_t va, char *buf, size_t size)
{
    char hex[17];
    int n = snprintf(hex, sizeof hex, "%" PRIx64, va);
    char out[40] = "0x";
    size_t o = 2;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 4 == 0) out[o++] = '_';
        out[o++] = hex[i];
    }
    out[o] = '\0';
    snprintf(buf, size, "%s", out);
    return buf;
}
