/* pe_mmu tables: shared sets, per-PE references, translation and faults. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "pe/mmu.h"

#define PAGE 4096u

static kb__mmu mmu;

static void setup(void)
{
    cr_assert_eq(kb__mmu_init(&mmu, 2, 4, 8, PAGE, 1000, NULL), 0);
}

static void teardown(void)
{
    kb__mmu_fini(&mmu);
}

TestSuite(mmu, .init = setup, .fini = teardown);

static kb__mmu_set *make(uint64_t va, uint64_t pages, uint64_t pa)
{
    kb__mmu_seg seg = {va, pages * PAGE, pa};
    kb__mmu_set *s = NULL;
    cr_assert_eq(kb__mmu_set_create(&mmu, &seg, 1, 7, &s, NULL), 0);
    return s;
}

Test(mmu, every_page_of_a_segment_translates_to_its_pa_offset)
{
    kb__mmu_set *s = make(0x100000000, 3, 0x40000);
    cr_assert_eq(kb__mmu_attach(&mmu, 5, s, NULL), 0);
    kb__mmu_set_release(s);
    for (uint64_t off = 0; off < 3 * PAGE; off += 512) {
        uint64_t pa, contig;
        cr_assert_eq(kb__mmu_translate(&mmu, 5, 0x100000000 + off, &pa, &contig, NULL), 0);
        cr_assert_eq(pa, 0x40000 + off);
        cr_assert_eq(contig, 3 * PAGE - off);
    }
}

Test(mmu, unmapped_va_faults_naming_pe_and_va)
{
    kb__err e;
    uint64_t pa = 1;
    int rc = kb__mmu_translate(&mmu, kb__mmu_pe_index(&mmu, 1, 2, 3), 0x100004000, &pa, NULL, &e);
    cr_assert_eq(rc, KB_EFAULT);
    cr_assert_eq(pa, 0);
    cr_assert_str_eq(e.msg, "sip1/cube2/pe3: VA 0x1_0000_4000 is not mapped");
}

Test(mmu, a_set_is_visible_only_on_pes_it_is_attached_to)
{
    kb__mmu_set *s = make(0x200000000, 1, 0x1000);
    cr_assert_eq(kb__mmu_attach(&mmu, 0, s, NULL), 0);
    kb__mmu_set_release(s);
    uint64_t pa;
    cr_assert_eq(kb__mmu_translate(&mmu, 0, 0x200000000, &pa, NULL, NULL), 0);
    cr_assert_eq(kb__mmu_translate(&mmu, 1, 0x200000000, &pa, NULL, NULL), KB_EFAULT);
}

Test(mmu, sharing_a_set_costs_one_reference_per_pe_not_pages)
{
    /* 8192 pages mapped on all 64 PEs: one set, 64 references. */
    kb__mmu_set *s = make(0x100000000, 8192, 0);
    for (uint32_t p = 0; p < mmu.n_pes; p++)
        cr_assert_eq(kb__mmu_attach(&mmu, p, s, NULL), 0);
    kb__mmu_set_release(s);
    cr_assert_eq(mmu.live_sets, 1);
    cr_assert_eq(mmu.live_refs, mmu.n_pes);
    cr_assert_lt(kb__mmu_bytes(&mmu), 64 * 1024);
}

Test(mmu, detach_of_the_last_reference_frees_the_set)
{
    kb__mmu_set *s = make(0x100000000, 2, 0);
    cr_assert_eq(kb__mmu_attach(&mmu, 3, s, NULL), 0);
    cr_assert_eq(kb__mmu_attach(&mmu, 4, s, NULL), 0);
    kb__mmu_set_release(s);
    cr_assert_eq(kb__mmu_detach(&mmu, 3, 0x100000000, 2 * PAGE), 1);
    cr_assert_eq(mmu.live_sets, 1);
    cr_assert_eq(kb__mmu_detach(&mmu, 4, 0x100000000, 2 * PAGE), 1);
    cr_assert_eq(mmu.live_sets, 0);
    cr_assert_eq(mmu.live_refs, 0);
}

Test(mmu, overlapping_attach_is_refused_with_both_ranges)
{
    kb__mmu_set *a = make(0x100000000, 4, 0), *b = make(0x100002000, 4, 0x10000);
    kb__err e;
    cr_assert_eq(kb__mmu_attach(&mmu, 0, a, NULL), 0);
    cr_assert_eq(kb__mmu_attach(&mmu, 0, b, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "overlaps the mapped range [0x100000000, 0x100004000)"), "%s", e.msg);
    kb__mmu_set_release(a);
    kb__mmu_set_release(b);
}

Test(mmu, unaligned_segments_are_refused)
{
    kb__mmu_seg seg = {0x100000000 + 8, PAGE, 0};
    kb__mmu_set *s = (kb__mmu_set *)1;
    kb__err e;
    cr_assert_eq(kb__mmu_set_create(&mmu, &seg, 1, 0, &s, &e), KB_EINVAL);
    cr_assert_null(s);
    cr_assert(strstr(e.msg, "not page-aligned to 4096"), "%s", e.msg);
}

Test(mmu, translation_costs_translate_ps_per_page_touched)
{
    cr_assert_eq(kb__mmu_translate_cost(&mmu, 0, 0), 0);
    cr_assert_eq(kb__mmu_translate_cost(&mmu, 0, 1), 1000);
    cr_assert_eq(kb__mmu_translate_cost(&mmu, PAGE - 1, 2), 2000);
    cr_assert_eq(kb__mmu_translate_cost(&mmu, 0, 10 * PAGE), 10 * 1000);
}

static void name_it(void *ctx, uint64_t va, char *buf, size_t size)
{
    snprintf(buf, size, "(in %s at +0x%llx)", (const char *)ctx,
             (unsigned long long)(va - 0x100000000));
}

Test(mmu, namer_adds_what_the_va_belongs_to)
{
    mmu.namer = name_it;
    mmu.namer_ctx = "tensor 'w'";
    kb__err e;
    uint64_t pa;
    cr_assert_eq(kb__mmu_translate(&mmu, 0, 0x100000010, &pa, NULL, &e), KB_EFAULT);
    cr_assert_str_eq(e.msg,
                     "sip0/cube0/pe0: VA 0x1_0000_0010 is not mapped (in tensor 'w' at +0x10)");
}
