/*
 * mem/store.c — pages for written bytes, pattern extents for fills.
 *
 * Reading a byte: its page if resident, else the extent covering it, else
 * zero. Writing materializes the page (initialized from the extents under
 * it) and copies into it. Fill and extent-copy share one routine,
 * apply_extents(), which replaces everything in a range by a list of
 * extents: drop pages fully inside, patch resident pages partly inside,
 * carve the old extents and splice in the new ones.
 */
#include "mem/store.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE     ((uint64_t)KB__STORE_PAGE)
#define PAGE_OFF (PAGE - 1)

void kb__store_init(kb__store *st)
{
    st->budget = NULL;
    kb__u64map_init(&st->pages);
    st->slabs = NULL;
    st->n_slabs = st->cap_slabs = 0;
    st->slab_next = NULL;
    st->slab_left = 0;
    st->free_pages = NULL;
    st->ext = NULL;
    st->n_ext = st->cap_ext = 0;
    for (size_t i = 0; i < KB__STORE_HOT; i++)
        st->hot[i] = (struct kb__store_hot){UINT64_MAX, NULL};
}

void kb__store_destroy(kb__store *st)
{
    for (size_t i = 0; i < st->n_slabs; i++)
        munmap(st->slabs[i], KB__STORE_SLAB);
    kb__budget_give(st->budget, KB__MEM_DATA, (uint64_t)st->n_slabs * KB__STORE_SLAB);
    free(st->slabs);
    kb__u64map_fini(&st->pages);
    free(st->ext);
    kb__budget *budget = st->budget;
    kb__store_init(st);
    st->budget = budget;
}

static int check_range(uint64_t pa, uint64_t n, const char *op, kb__err *err)
{
    if (n > UINT64_MAX - pa)
        return kb__err_set(err, KB_ERANGE,
                           "store %s of %" PRIu64 " bytes at PA 0x%" PRIx64
                           " runs past the end of the 64-bit address space",
                           op, n, pa);
    return 0;
}

/* The lookaside entry of page pn (Fibonacci hashing). */
static inline size_t hot_index(uint64_t pn)
{
    return (size_t)((pn * 0x9E3779B97F4A7C15u) >> (64 - KB__STORE_HOT_BITS));
}

/* The resident page pn, or NULL. Refreshes the lookaside, which is not part
 * of the store's value (so a read through a const store may update it:
 * stores are never defined const). */
static uint8_t *page_of(const kb__store *st, uint64_t pn)
{
    struct kb__store_hot *h = (struct kb__store_hot *)&st->hot[hot_index(pn)];
    if (h->pn == pn) return h->page;
    uint64_t v;
    if (!kb__u64map_get(&st->pages, pn, &v)) return NULL;
    h->pn = pn;
    h->page = (uint8_t *)(uintptr_t)v;
    return h->page;
}

/* First index in e[0..k) whose extent ends after x. */
static size_t first_ending_after(const kb__store_extent *e, size_t k, uint64_t x)
{
    size_t lo = 0, hi = k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e[mid].end > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* dst[0..len) = the pattern of e over [x, x + len), which e must cover. */
static void pattern_put(const kb__store_extent *e, uint64_t x, uint8_t *dst, uint64_t len)
{
    unsigned ph = (unsigned)((x - e->anchor) % e->plen);
    if (e->plen == 1) {
        memset(dst, e->pat[0], len);
        return;
    }
    for (uint64_t k = 0; k < len; k++) {
        dst[k] = e->pat[ph];
        if (++ph == e->plen) ph = 0;
    }
}

/* dst[0..len) (all zero already when zeroed) = what the extent list
 * e[0..k) says about [x, x + len). */
static void extents_over(const kb__store_extent *e, size_t k, uint64_t x, uint8_t *dst,
                         uint64_t len, bool zeroed)
{
    if (!zeroed) memset(dst, 0, len);
    for (size_t i = first_ending_after(e, k, x); i < k && e[i].start < x + len; i++) {
        uint64_t lo = e[i].start > x ? e[i].start : x;
        uint64_t hi = e[i].end < x + len ? e[i].end : x + len;
        pattern_put(&e[i], lo, dst + (lo - x), hi - lo);
    }
}

static void extents_bytes(const kb__store_extent *e, size_t k, uint64_t x, uint8_t *dst,
                          uint64_t len)
{
    extents_over(e, k, x, dst, len, false);
}

/* A slab-aligned mapping of KB__STORE_SLAB bytes advised as a huge page
 * and faulted in at once, or NULL. Its pages are carved in order, so all of
 * it is used; one populating call instead of a first-touch fault each
 * keeps the cost steady when the host grants no huge page (docs/
 * PERFORMANCE.md: 256 MiB took 0.04-0.58 s of CPU faulted on first touch,
 * 0.06 s populated). */
static uint8_t *slab_map(void)
{
    size_t want = 2 * KB__STORE_SLAB;
    uint8_t *m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)m + KB__STORE_SLAB - 1) & ~(uintptr_t)(KB__STORE_SLAB - 1);
    uint8_t *slab = (uint8_t *)a;
    if (slab > m) munmap(m, (size_t)(slab - m));
    if (slab + KB__STORE_SLAB < m + want)
        munmap(slab + KB__STORE_SLAB, (size_t)(m + want - (slab + KB__STORE_SLAB)));
#ifdef MADV_HUGEPAGE
    madvise(slab, KB__STORE_SLAB, MADV_HUGEPAGE); /* advice only: 4 KiB pages work too */
#endif
#ifdef MADV_POPULATE_WRITE
    madvise(slab, KB__STORE_SLAB, MADV_POPULATE_WRITE); /* advice only (Linux >= 5.14) */
#endif
    return slab;
}

/* A page buffer, or NULL; *zeroed tells whether it is all zero (never
 * used since its slab was mapped: the kernel zeroes fresh pages) or of
 * undefined contents (recycled). */
static uint8_t *page_alloc(kb__store *st, bool *zeroed)
{
    *zeroed = false;
    if (st->free_pages) {
        uint8_t *p = st->free_pages;
        memcpy(&st->free_pages, p, sizeof st->free_pages);
        return p;
    }
    if (!st->slab_left) {
        if (st->n_slabs == st->cap_slabs) {
            size_t cap = st->cap_slabs ? 2 * st->cap_slabs : 16;
            uint8_t **v = realloc(st->slabs, cap * sizeof *v);
            if (!v) return NULL;
            st->slabs = v;
            st->cap_slabs = cap;
        }
        if (kb__budget_take(st->budget, KB__MEM_DATA, KB__STORE_SLAB)) return NULL;
        uint8_t *slab = slab_map();
        if (!slab) {
            kb__budget_give(st->budget, KB__MEM_DATA, KB__STORE_SLAB);
            return NULL;
        }
        st->slabs[st->n_slabs++] = slab;
        st->slab_next = slab;
        st->slab_left = KB__STORE_SLAB / PAGE;
    }
    uint8_t *p = st->slab_next;
    st->slab_next += PAGE;
    st->slab_left--;
    *zeroed = true;
    return p;
}

static void page_free(kb__store *st, uint8_t *p)
{
    memcpy(p, &st->free_pages, sizeof st->free_pages);
    st->free_pages = p;
}

/* The page pn, created from the extents under it if not resident. */
static int page_make(kb__store *st, uint64_t pn, uint8_t **out, kb__err *err)
{
    uint8_t *p = page_of(st, pn);
    if (!p) {
        bool zeroed;
        p = page_alloc(st, &zeroed);
        if (!p && st->budget && st->budget->refused)
            return kb__err_set(err, KB_EBUDGET, "%s", st->budget->msg);
        if (!p) return kb__err_set(err, KB_ENOMEM, "store: out of host memory for a page");
        extents_over(st->ext, st->n_ext, pn << KB__STORE_PAGE_SHIFT, p, PAGE, zeroed);
        if (kb__u64map_put(&st->pages, pn, (uint64_t)(uintptr_t)p)) {
            page_free(st, p);
            return kb__err_set(err, KB_ENOMEM, "store: out of host memory for the page index");
        }
    }
    *out = p;
    return 0;
}

int kb__store_write(kb__store *st, uint64_t pa, const void *src, size_t n, kb__err *err)
{
    int rc = check_range(pa, n, "write", err);
    const uint8_t *s = src;
    while (rc == 0 && n) {
        uint64_t off = pa & PAGE_OFF;
        size_t chunk = PAGE - off < n ? (size_t)(PAGE - off) : n;
        uint8_t *p = NULL;
        rc = page_make(st, pa >> KB__STORE_PAGE_SHIFT, &p, err);
        if (rc) break;
        memcpy(p + off, s, chunk);
        pa += chunk;
        s += chunk;
        n -= chunk;
    }
    return rc;
}

int kb__store_read(const kb__store *st, uint64_t pa, void *dst, size_t n, kb__err *err)
{
    int rc = check_range(pa, n, "read", err);
    if (rc) return rc;
    uint8_t *d = dst;
    while (n) {
        uint64_t off = pa & PAGE_OFF;
        size_t chunk = PAGE - off < n ? (size_t)(PAGE - off) : n;
        const uint8_t *p = page_of(st, pa >> KB__STORE_PAGE_SHIFT);
        if (p)
            memcpy(d, p + off, chunk);
        else
            extents_bytes(st->ext, st->n_ext, pa, d, chunk);
        pa += chunk;
        d += chunk;
        n -= chunk;
    }
    return 0;
}

static void page_drop(kb__store *st, uint64_t pn)
{
    uint64_t v;
    if (!kb__u64map_del(&st->pages, pn, &v)) return;
    page_free(st, (uint8_t *)(uintptr_t)v);
    struct kb__store_hot *h = &st->hot[hot_index(pn)];
    if (h->pn == pn) *h = (struct kb__store_hot){UINT64_MAX, NULL};
}

/* Frees every resident page inside pages [fp, lp): probes each page number
 * or scans the table, whichever is shorter. Never allocates. The scan stays
 * at a slot after a deletion: backward-shift deletion only moves members
 * that follow in the probe run into the hole, and the ones that wrap past
 * the end of the table were already examined. */
static void drop_pages(kb__store *st, uint64_t fp, uint64_t lp)
{
    if (fp >= lp || st->pages.count == 0) return;
    if (lp - fp <= st->pages.cap) {
        for (uint64_t pn = fp; pn < lp; pn++)
            page_drop(st, pn);
        return;
    }
    for (size_t i = 0; i < st->pages.cap;) {
        uint64_t key = st->pages.slots[i].key;
        if (key != KB__U64MAP_EMPTY && key >= fp && key < lp)
            page_drop(st, key);
        else
            i++;
    }
}

/* Byte x (>= x->anchor) of extent x's pattern. */
static uint8_t extent_byte(const kb__store_extent *x, uint64_t at)
{
    return x->pat[(at - x->anchor) % x->plen];
}

/* True when p and q give every byte from `at` on the same value (both
 * anchors <= at): the same period and the same bytes over one period. */
static bool same_pattern(const kb__store_extent *p, const kb__store_extent *q, uint64_t at)
{
    if (p->plen != q->plen) return false;
    for (uint64_t i = 0; i < p->plen; i++)
        if (extent_byte(p, at + i) != extent_byte(q, at + i)) return false;
    return true;
}

/* Removes extents [i, j). */
static void remove_extents(kb__store *st, size_t i, size_t j)
{
    memmove(st->ext + i, st->ext + j, (st->n_ext - j) * sizeof *st->ext);
    st->n_ext -= j - i;
}

/* Adds e, which replaces extents [i0, i1) (those overlapping it), by
 * growing a neighbour with the same pattern that touches it; false when
 * none does. A fill arrives packet by packet in address order, so this
 * keeps one extent per fill instead of one per packet (inserting each
 * would move the whole tail of the array: quadratic in the packets), also
 * when the fill overwrites an older one: the older extent shrinks from its
 * start in place. */
static bool extend_neighbour(kb__store *st, size_t i0, size_t i1, const kb__store_extent *e)
{
    kb__store_extent *prev = i0 ? &st->ext[i0 - 1] : NULL;
    if (prev && prev->end == e->start && same_pattern(prev, e, e->start)) {
        prev->end = e->end;
        size_t covered = i1; /* [i0, covered) lie inside e; none starts before it */
        if (i1 > i0 && st->ext[i1 - 1].end > e->end) {
            st->ext[i1 - 1].start = e->end; /* its anchor stays <= its start */
            covered = i1 - 1;
        }
        remove_extents(st, i0, covered);
        kb__store_extent *next = i0 < st->n_ext ? &st->ext[i0] : NULL;
        if (next && next->start == prev->end && same_pattern(prev, next, next->start)) {
            prev->end = next->end;
            remove_extents(st, i0, i0 + 1);
        }
        return true;
    }
    kb__store_extent *next = i0 < st->n_ext ? &st->ext[i0] : NULL;
    if (i0 == i1 && next && next->start == e->end && same_pattern(next, e, e->end)) {
        next->start = e->start;
        next->anchor = e->anchor; /* same bytes from e's anchor on, and anchor <= start */
        memcpy(next->pat, e->pat, e->plen);
        return true;
    }
    return false;
}

/* Replaces the extents over [a, b) by e[0..k) (sorted, inside [a, b)). */
static int splice_extents(kb__store *st, uint64_t a, uint64_t b, const kb__store_extent *e,
                          size_t k, kb__err *err)
{
    size_t i0 = first_ending_after(st->ext, st->n_ext, a);
    size_t i1 = i0;
    while (i1 < st->n_ext && st->ext[i1].start < b)
        i1++;
    if (i0 == i1 && k == 0) return 0; /* nothing to carve, nothing to add */
    if (k == 1 && extend_neighbour(st, i0, i1, e)) return 0;
    bool left = i0 < i1 && st->ext[i0].start < a;
    bool right = i0 < i1 && st->ext[i1 - 1].end > b;
    size_t n_new = st->n_ext - (i1 - i0) + left + right + k;
    if (n_new > st->cap_ext) {
        size_t cap = st->cap_ext ? st->cap_ext : 16;
        while (cap < n_new)
            cap *= 2;
        kb__store_extent *ne = realloc(st->ext, cap * sizeof *ne);
        if (!ne) return kb__err_set(err, KB_ENOMEM, "store: out of host memory for fill extents");
        st->ext = ne;
        st->cap_ext = cap;
    }
    kb__store_extent lpiece, rpiece;
    if (left) {
        lpiece = st->ext[i0];
        lpiece.end = a;
    }
    if (right) {
        rpiece = st->ext[i1 - 1];
        rpiece.start = b;
    }
    size_t at = i0 + left + k + right;
    memmove(st->ext + at, st->ext + i1, (st->n_ext - i1) * sizeof *st->ext);
    if (left) st->ext[i0] = lpiece;
    memcpy(st->ext + i0 + left, e, k * sizeof *e);
    if (right) st->ext[i0 + left + k] = rpiece;
    st->n_ext = n_new;
    return 0;
}

/* Makes [a, b) read exactly as the extent list e[0..k) says (zero where no
 * extent lies). Pages fully inside are dropped; resident pages partly
 * inside keep their bytes outside [a, b) and get the new ones inside. */
static int apply_extents(kb__store *st, uint64_t a, uint64_t b, const kb__store_extent *e, size_t k,
                         kb__err *err)
{
    uint64_t fp = (a >> KB__STORE_PAGE_SHIFT) + ((a & PAGE_OFF) != 0);
    uint64_t lp = b >> KB__STORE_PAGE_SHIFT;
    int rc = splice_extents(st, a, b, e, k, err);
    if (rc) return rc;
    drop_pages(st, fp, lp);
    uint64_t edges[2] = {a >> KB__STORE_PAGE_SHIFT, (b - 1) >> KB__STORE_PAGE_SHIFT};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && edges[1] == edges[0]) break;
        uint8_t *p = page_of(st, edges[i]);
        if (!p) continue;
        uint64_t ps = edges[i] << KB__STORE_PAGE_SHIFT;
        uint64_t lo = a > ps ? a : ps;
        uint64_t hi = b - ps < PAGE ? b : ps + PAGE;
        extents_bytes(e, k, lo, p + (lo - ps), hi - lo);
    }
    return 0;
}

int kb__store_fill(kb__store *st, uint64_t pa, uint64_t n, const void *pattern, size_t pattern_len,
                   kb__err *err)
{
    if (pattern_len == 0 || pattern_len > KB__STORE_PATTERN_MAX)
        return kb__err_set(err, KB_EINVAL,
                           "store fill at PA 0x%" PRIx64 ": pattern of %zu bytes (must be 1..%d)",
                           pa, pattern_len, KB__STORE_PATTERN_MAX);
    int rc = check_range(pa, n, "fill", err);
    if (rc || n == 0) return rc;
    kb__store_extent e = {.start = pa, .end = pa + n, .anchor = pa, .plen = (uint8_t)pattern_len};
    memcpy(e.pat, pattern, pattern_len);
    bool zero = true;
    for (size_t i = 0; i < pattern_len; i++)
        zero = zero && e.pat[i] == 0;
    return apply_extents(st, pa, pa + n, &e, zero ? 0 : 1, err);
}

/* True if any page overlapping [a, b) is resident (a < b). */
static bool range_has_pages(const kb__store *st, uint64_t a, uint64_t b)
{
    uint64_t fp = a >> KB__STORE_PAGE_SHIFT, lp = (b - 1) >> KB__STORE_PAGE_SHIFT;
    if (st->pages.count == 0) return false;
    if (lp - fp < st->pages.cap) {
        for (uint64_t pn = fp; pn <= lp; pn++)
            if (page_of(st, pn)) return true;
        return false;
    }
    for (size_t i = 0; i < st->pages.cap; i++) {
        uint64_t key = st->pages.slots[i].key;
        if (key != KB__U64MAP_EMPTY && key >= fp && key <= lp) return true;
    }
    return false;
}

/* Copy of a source that lives only in extents: shift them to dst. */
static int copy_extents(kb__store *st, uint64_t dst, uint64_t src, uint64_t n, kb__err *err)
{
    size_t i0 = first_ending_after(st->ext, st->n_ext, src), k = 0;
    while (i0 + k < st->n_ext && st->ext[i0 + k].start < src + n)
        k++;
    kb__store_extent *t = malloc((k ? k : 1) * sizeof *t);
    if (!t) return kb__err_set(err, KB_ENOMEM, "store: out of host memory");
    for (size_t i = 0; i < k; i++) {
        const kb__store_extent *e = &st->ext[i0 + i];
        uint64_t lo = e->start > src ? e->start : src;
        uint64_t hi = e->end < src + n ? e->end : src + n;
        t[i] = *e;
        t[i].start = lo - src + dst;
        t[i].end = hi - src + dst;
        t[i].anchor = t[i].start - (lo - e->anchor) % e->plen;
    }
    int rc = apply_extents(st, dst, dst + n, t, k, err);
    free(t);
    return rc;
}

#define BOUNCE (64u * 1024u)

/* Byte copy through a bounce buffer, backward when dst overlaps src's tail. */
static int copy_bytes(kb__store *st, uint64_t dst, uint64_t src, uint64_t n, kb__err *err)
{
    uint8_t *buf = malloc(BOUNCE);
    if (!buf) return kb__err_set(err, KB_ENOMEM, "store: out of host memory");
    bool backward = dst > src && dst - src < n;
    int rc = 0;
    for (uint64_t done = 0; rc == 0 && done < n;) {
        uint64_t chunk = n - done < BOUNCE ? n - done : BOUNCE;
        uint64_t at = backward ? n - done - chunk : done;
        rc = kb__store_read(st, src + at, buf, (size_t)chunk, err);
        if (rc == 0) rc = kb__store_write(st, dst + at, buf, (size_t)chunk, err);
        done += chunk;
    }
    free(buf);
    return rc;
}

int kb__store_copy(kb__store *st, uint64_t dst, uint64_t src, uint64_t n, kb__err *err)
{
    int rc = check_range(src, n, "copy source", err);
    if (rc == 0) rc = check_range(dst, n, "copy destination", err);
    if (rc || n == 0 || dst == src) return rc;
    if (!range_has_pages(st, src, src + n)) return copy_extents(st, dst, src, n, err);
    return copy_bytes(st, dst, src, n, err);
}

size_t kb__store_bytes_resident(const kb__store *st)
{
    return st->pages.count * (size_t)PAGE + kb__u64map_bytes(&st->pages) +
           st->cap_ext * sizeof *st->ext;
}

size_t kb__store_pages_resident(const kb__store *st)
{
    return st->pages.count;
}

size_t kb__store_n_extents(const kb__store *st)
{
    return st->n_ext;
}
