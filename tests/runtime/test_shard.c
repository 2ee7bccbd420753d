/*
 * Shard placement: every combination of modes and counts against an
 * element-by-element independent computation, set_device scoping, the
 * default machine, and every error.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/shard.h"

static kb__shard_req req2(const char *name, const int64_t *shape, int ndim, kb__shard_geom g,
                          kb__shard_policy p)
{
    kb__shard_req r = {.name = name,
                       .ndim = ndim,
                       .shape = shape,
                       .elem_size = 2,
                       .policy = p,
                       .geom = g,
                       .device_sip = -1};
    return r;
}

/* Independent model: owner (s, c, p) (level indices) holds global element
 * (i, j) iff, walking the levels in order, each split level's index equals
 * the block of the element within the parent's part. */
static bool owner_holds(const int mode[3], const int cnt[3], const int idx[3], int64_t rows,
                        int64_t cols, int64_t i, int64_t j)
{
    int64_t r = rows, c = cols;
    for (int l = 0; l < 3; l++) {
        if (mode[l] == KB_ROW_WISE) {
            r /= cnt[l];
            if (i / r != idx[l]) return false;
            i %= r;
        } else if (mode[l] == KB_COLUMN_WISE) {
            c /= cnt[l];
            if (j / c != idx[l]) return false;
            j %= c;
        }
    }
    return true;
}

static void check_plan(const kb__shard_plan *pl, const int mode[3], const int cnt[3], int64_t rows,
                       int64_t cols, int sip_base, const char *what)
{
    int expect_copies = 1, rsplit = 1, csplit = 1;
    for (int l = 0; l < 3; l++) {
        if (mode[l] == KB_REPLICATE)
            expect_copies *= cnt[l];
        else if (mode[l] == KB_ROW_WISE)
            rsplit *= cnt[l];
        else
            csplit *= cnt[l];
    }
    cr_assert_eq(pl->n_shards, cnt[0] * cnt[1] * cnt[2], "%s", what);
    cr_assert_eq(pl->copies, expect_copies, "%s", what);
    cr_assert_eq(pl->n_regions, rsplit * csplit, "%s", what);
    int k = 0;
    for (int s = 0; s < cnt[0]; s++)
        for (int c = 0; c < cnt[1]; c++)
            for (int p = 0; p < cnt[2]; p++, k++) {
                const kb__shard *sh = &pl->shards[k];
                cr_assert_eq(sh->sip, sip_base + s, "%s shard %d", what, k);
                cr_assert_eq(sh->cube, c, "%s shard %d", what, k);
                cr_assert_eq(sh->pe, p, "%s shard %d", what, k);
                cr_assert_eq(sh->rows, rows / rsplit, "%s shard %d", what, k);
                cr_assert_eq(sh->cols, cols / csplit, "%s shard %d", what, k);
                cr_assert_eq(sh->bytes, (uint64_t)(rows / rsplit * (cols / csplit) * 2));
                cr_assert_eq(kb__shard_find(pl, sh->region, sh->replica), k, "%s", what);
            }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            int held = 0, region;
            int64_t li, lj;
            cr_assert_eq(kb__shard_locate(pl, i, j, &region, &li, &lj, NULL), 0);
            k = 0;
            for (int s = 0; s < cnt[0]; s++)
                for (int c = 0; c < cnt[1]; c++)
                    for (int p = 0; p < cnt[2]; p++, k++) {
                        const kb__shard *sh = &pl->shards[k];
                        int idx[3] = {s, c, p};
                        bool in = i >= sh->row0 && i < sh->row0 + sh->rows && j >= sh->col0 &&
                                  j < sh->col0 + sh->cols;
                        cr_assert_eq(in, owner_holds(mode, cnt, idx, rows, cols, i, j),
                                     "%s: element (%" PRId64 ", %" PRId64 ") shard %d", what, i, j,
                                     k);
                        if (in) {
                            held++;
                            cr_assert_eq(sh->region, region, "%s", what);
                            cr_assert_eq(i - sh->row0, li);
                            cr_assert_eq(j - sh->col0, lj);
                        }
                    }
            cr_assert_eq(held, expect_copies, "%s: element (%" PRId64 ", %" PRId64 ")", what, i, j);
        }
}

static void run_all_combinations(const int64_t *shape, int ndim)
{
    const kb__shard_geom g = {2, 4, 2};
    const int avail[3] = {g.sips, g.cubes_per_sip, g.pes_per_cube};
    const int opts[3][3] = {{0, 1, 2}, {0, 2, 4}, {0, 1, 2}};
    int64_t rows = ndim == 2 ? shape[0] : 1, cols = ndim == 2 ? shape[1] : shape[0];
    int tried = 0, ok = 0;
    for (int m = 0; m < 27; m++)
        for (int o = 0; o < 27; o++) {
            int mode[3] = {m % 3, m / 3 % 3, m / 9}, asked[3], cnt[3];
            bool row_multi = false;
            for (int l = 0; l < 3; l++) {
                asked[l] = opts[l][(o / (l == 0 ? 1 : l == 1 ? 3 : 9)) % 3];
                cnt[l] = asked[l] ? asked[l] : avail[l];
                row_multi = row_multi || (mode[l] == KB_ROW_WISE && cnt[l] > 1);
            }
            kb__shard_policy pol = {mode[0], mode[1], mode[2], asked[0], asked[1], asked[2], 0, 0};
            kb__shard_req r = req2("t", shape, ndim, g, pol);
            kb__shard_plan pl;
            kb__err e;
            char what[96];
            snprintf(what, sizeof what, "modes %d/%d/%d counts %d/%d/%d", mode[0], mode[1], mode[2],
                     asked[0], asked[1], asked[2]);
            int rc = kb__shard_plan_make(&pl, &r, &e);
            tried++;
            if (ndim == 1 && row_multi) {
                cr_assert_eq(rc, KB_EINVAL, "%s", what);
                cr_assert(strstr(e.msg, "split it column_wise"), "%s", e.msg);
                continue;
            }
            cr_assert_eq(rc, 0, "%s: %s", what, rc ? e.msg : "");
            check_plan(&pl, mode, cnt, rows, cols, 0, what);
            kb__shard_plan_fini(&pl);
            ok++;
        }
    cr_assert_eq(tried, 27 * 27);
    cr_assert_gt(ok, 0);
}

Test(shard, every_policy_and_count_places_a_2d_tensor_as_the_element_model_says)
{
    const int64_t shape[2] = {16, 32};
    run_all_combinations(shape, 2);
}

Test(shard, every_policy_and_count_places_a_non_square_2d_tensor)
{
    const int64_t shape[2] = {48, 16};
    run_all_combinations(shape, 2);
}

Test(shard, every_policy_and_count_places_a_1d_tensor_as_one_row)
{
    const int64_t shape[1] = {64};
    run_all_combinations(shape, 1);
}

Test(shard, default_machine_rows_over_pes_columns_over_cubes_replicated_on_sips)
{
    const int64_t shape[2] = {128, 256};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_policy pol = {KB_REPLICATE, KB_COLUMN_WISE, KB_ROW_WISE, 0, 0, 0, 0, 0};
    kb__shard_req r = req2("w", shape, 2, g, pol);
    r.elem_size = 4;
    kb__shard_plan pl;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    cr_assert_eq(pl.n_shards, 2 * 16 * 8);
    cr_assert_eq(pl.n_regions, 16 * 8);
    cr_assert_eq(pl.copies, 2);
    const kb__shard *s = &pl.shards[1 * 128 + 5 * 8 + 3]; /* sip1 cube5 pe3 */
    cr_assert_eq(s->sip, 1);
    cr_assert_eq(s->cube, 5);
    cr_assert_eq(s->pe, 3);
    cr_assert_eq(s->rows, 128 / 8);
    cr_assert_eq(s->cols, 256 / 16);
    cr_assert_eq(s->row0, 3 * (128 / 8));
    cr_assert_eq(s->col0, 5 * (256 / 16));
    cr_assert_eq(s->bytes, (uint64_t)(128 / 8) * (256 / 16) * 4);
    cr_assert_eq(s->replica, 1);
    cr_assert_eq(pl.shards[5 * 8 + 3].region, s->region);
    cr_assert_eq(pl.shards[5 * 8 + 3].replica, 0);
    kb__shard_plan_fini(&pl);
}

Test(shard, set_device_scopes_a_default_replicated_sip_level_to_that_sip)
{
    const int64_t shape[2] = {16, 16};
    kb__shard_geom g = {2, 4, 2};
    kb__shard_policy pol = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};
    kb__shard_req r = req2("x", shape, 2, g, pol);
    r.device_sip = 1;
    kb__shard_plan pl;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    cr_assert_eq(pl.n_shards, 1);
    cr_assert_eq(pl.shards[0].sip, 1);
    cr_assert_eq(pl.shards[0].rows, 16);
    kb__shard_plan_fini(&pl);
    int mode[3] = {KB_REPLICATE, KB_ROW_WISE, KB_COLUMN_WISE}, cnt[3] = {1, 4, 2};
    pol = (kb__shard_policy){KB_REPLICATE, KB_ROW_WISE, KB_COLUMN_WISE, 0, 0, 0, 0, 0};
    r.policy = pol;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    check_plan(&pl, mode, cnt, 16, 16, 1, "scoped to sip1");
    kb__shard_plan_fini(&pl);
}

Test(shard, set_device_does_not_scope_explicit_or_split_sip_levels)
{
    const int64_t shape[2] = {16, 16};
    kb__shard_geom g = {2, 4, 2};
    kb__shard_plan pl;
    kb__shard_req r = req2("x", shape, 2, g, (kb__shard_policy){KB_REPLICATE, 0, 0, 2, 1, 1, 0, 0});
    r.device_sip = 1;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    cr_assert_eq(pl.n_shards, 2);
    cr_assert_eq(pl.shards[0].sip, 0);
    kb__shard_plan_fini(&pl);
    r.policy = (kb__shard_policy){KB_ROW_WISE, 0, 0, 0, 1, 1, 0, 0};
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    cr_assert_eq(pl.n_shards, 2);
    cr_assert_eq(pl.shards[1].sip, 1);
    cr_assert_eq(pl.shards[1].row0, 8);
    kb__shard_plan_fini(&pl);
}

static void expect_error(kb__shard_req *r, int code, const char *msg)
{
    kb__shard_plan pl;
    kb__err e;
    pl.n_shards = 77;
    cr_assert_eq(kb__shard_plan_make(&pl, r, &e), code, "%s", e.msg);
    cr_assert_eq(pl.n_shards, 0);
    cr_assert_null(pl.shards);
    cr_assert(strstr(e.msg, msg), "message '%s' lacks '%s'", e.msg, msg);
}

Test(shard, a_split_that_does_not_divide_gives_balanced_shards)
{
    const int64_t shape[2] = {1823, 64};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_req r = req2(
        "t", shape, 2, g, (kb__shard_policy){KB_ROW_WISE, KB_ROW_WISE, KB_ROW_WISE, 0, 0, 0, 0, 0});
    kb__shard_plan pl;
    kb__err e;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(pl.n_shards, 256);
    cr_assert_not(pl.even);
    /* Level by level: 1823 over 2 SIPs = 912 + 911; 912 over 16 cubes = 57
     * each, 911 = 15 x 57 + 56; 57 over 8 PEs = 8 + 7 x 7, 56 = 8 x 7. */
    int64_t next = 0, eights = 0;
    for (int k = 0; k < 256; k++) {
        const kb__shard *sh = &pl.shards[k];
        int sip = k / 128, cube = k / 8 % 16, pe = k % 8;
        int64_t cube_rows = sip == 0 ? 57 : cube < 15 ? 57 : 56;
        int64_t want = cube_rows == 57 && pe == 0 ? 8 : 7;
        cr_assert_eq(sh->rows, want, "shard %d", k);
        cr_assert_eq(sh->row0, next, "shard %d", k); /* contiguous, in order */
        cr_assert_eq(sh->cols, 64);
        cr_assert_eq(sh->bytes, (uint64_t)(sh->rows * 64 * 2));
        cr_assert_eq(sh->region, k);
        next += sh->rows;
        eights += sh->rows == 8;
    }
    cr_assert_eq(next, 1823);
    cr_assert_eq(eights, 31);
    cr_assert_eq(pl.max_bytes, 8 * 64 * 2);
    for (int64_t i = 0; i < 1823; i += 13) {
        int region;
        int64_t li, lj;
        cr_assert_eq(kb__shard_locate(&pl, i, 5, &region, &li, &lj, &e), 0);
        const kb__shard *sh = &pl.shards[region];
        cr_assert(i >= sh->row0 && i < sh->row0 + sh->rows);
        cr_assert_eq(li, i - sh->row0);
        cr_assert_eq(lj, 5);
    }
    kb__shard_plan_fini(&pl);
}

Test(shard, a_split_over_more_owners_than_rows_names_tensor_shape_level_and_dimension)
{
    const int64_t shape[2] = {2, 256};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_req r = req2("t3", shape, 2, g, (kb__shard_policy){0, 0, KB_ROW_WISE, 0, 0, 3, 0, 0});
    kb__shard_plan pl;
    kb__err e;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "tensor t3: shape [2, 256] cannot be split row_wise over 3 PEs "
                            "(dimension 0 = 2 is smaller than 3: some would hold nothing)");
    const int64_t five[2] = {5, 8};
    r.shape = five;
    r.policy = (kb__shard_policy){0, KB_ROW_WISE, KB_ROW_WISE, 0, 2, 3, 0, 0};
    expect_error(&r, KB_EINVAL,
                 "over 3 PEs (each cube's part has dimension 0 = 2 at the least, which is smaller "
                 "than 3: some would hold nothing)");
    r.policy = (kb__shard_policy){KB_COLUMN_WISE, 0, 0, 0, 0, 0, 0, 0};
    const int64_t thin[2] = {4, 1};
    r.shape = thin;
    expect_error(&r, KB_EINVAL, "column_wise over 2 SIPs (dimension 1 = 1 is smaller than 2");
}

Test(shard, counts_beyond_the_machine_or_negative_name_the_level_and_maximum)
{
    const int64_t shape[2] = {64, 64};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_req r = req2("t", shape, 2, g, (kb__shard_policy){0, 0, 0, 0, 0, 9, 0, 0});
    expect_error(&r, KB_EINVAL, "num_pes = 9 is outside 0..8 (the 8 PEs per cube)");
    r.policy = (kb__shard_policy){0, 0, 0, 0, 17, 0, 0, 0};
    expect_error(&r, KB_EINVAL, "num_cubes = 17 is outside 0..16 (the 16 cubes per SIP)");
    r.policy = (kb__shard_policy){0, 0, 0, 3, 0, 0, 0, 0};
    expect_error(&r, KB_EINVAL, "num_sips = 3 is outside 0..2 (the 2 SIPs of the machine)");
    r.policy = (kb__shard_policy){0, 0, 0, -1, 0, 0, 0, 0};
    expect_error(&r, KB_EINVAL, "num_sips = -1");
}

/* first_cube / first_pe move the owners up, the same in every SIP; a count
 * of 0 takes the units from the first to the last. */
Test(shard, first_cube_and_first_pe_start_the_owners_there)
{
    const int64_t shape[2] = {8, 12};
    kb__shard_geom g = {2, 4, 8};
    kb__shard_req r =
        req2("t", shape, 2, g,
             (kb__shard_policy){KB_REPLICATE, KB_ROW_WISE, KB_COLUMN_WISE, 0, 2, 3, 1, 5});
    kb__shard_plan pl;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    cr_assert_eq(pl.n_shards, 2 * 2 * 3);
    for (int k = 0; k < pl.n_shards; k++) {
        const kb__shard *sh = &pl.shards[k];
        int s = k / 6, c = k / 3 % 2, p = k % 3;
        cr_expect_eq(sh->sip, s, "shard %d", k);
        cr_expect_eq(sh->cube, 1 + c, "shard %d", k);
        cr_expect_eq(sh->pe, 5 + p, "shard %d", k);
        cr_expect_eq(sh->row0, c * 4, "shard %d: cube block c holds rows 4c..", k);
        cr_expect_eq(sh->col0, p * 4, "shard %d: PE block p holds columns 4p..", k);
    }
    kb__shard_plan_fini(&pl);
    r.policy = (kb__shard_policy){KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 0, 0, 3, 6};
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    cr_expect_eq(pl.count[1], 1, "cube 3 to the last, cube 3");
    cr_expect_eq(pl.count[2], 2, "PEs 6 and 7");
    cr_expect_eq(pl.shards[1].pe, 7);
    kb__shard_plan_fini(&pl);
}

Test(shard, a_first_unit_outside_the_level_or_a_count_running_past_it_is_refused)
{
    const int64_t shape[2] = {64, 64};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_req r = req2("t", shape, 2, g, (kb__shard_policy){0, 0, 0, 0, 0, 0, 0, 8});
    expect_error(&r, KB_EINVAL, "tensor t: first_pe = 8 is outside 0..7 (the 8 PEs per cube)");
    r.policy = (kb__shard_policy){0, 0, 0, 0, 0, 0, -1, 0};
    expect_error(&r, KB_EINVAL, "first_cube = -1 is outside 0..15 (the 16 cubes per SIP)");
    r.policy = (kb__shard_policy){0, 0, 0, 0, 0, 4, 0, 6};
    expect_error(&r, KB_EINVAL,
                 "num_pes = 4 from first_pe = 6 runs past the 8 PEs per cube (units 6..9)");
}

Test(shard, four_or_more_dimensions_are_not_supported)
{
    const int64_t shape[5] = {2, 4, 8, 16, 2};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_req r = req2("act", shape, 4, g, (kb__shard_policy){0, 0, 0, 0, 0, 0, 0, 0});
    expect_error(&r, KB_EUNSUPPORTED,
                 "tensor act: 4-D tensors are not supported (shape [2, 4, 8, 16]; tensors have 1 "
                 "to 3 dimensions)");
    r.ndim = 5;
    expect_error(&r, KB_EUNSUPPORTED, "5-D tensors are not supported (shape [2, 4, 8, 16]...;");
}

/* A 3-D tensor [B, R, C]: row_wise splits B, column_wise C, R stays whole;
 * every (b, r, c) lies in exactly one region, checked against the plan's
 * boxes by a host loop. */
Test(shard, a_3d_tensor_splits_dimension_0_row_wise_and_the_last_column_wise)
{
    const int64_t shape[3] = {5, 3, 7};
    kb__shard_geom g = {2, 2, 4};
    /* sip row_wise over 2 (B: 3 + 2), cube replicate, pe column_wise over 3 (C: 3 + 2 + 2) */
    kb__shard_req r =
        req2("x3", shape, 3, g,
             (kb__shard_policy){KB_ROW_WISE, KB_REPLICATE, KB_COLUMN_WISE, 0, 0, 3, 0, 0});
    kb__shard_plan pl;
    kb__err e;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(pl.rows, 5);
    cr_assert_eq(pl.mid, 3);
    cr_assert_eq(pl.cols, 7);
    cr_assert_eq(pl.n_shards, 2 * 2 * 3);
    cr_assert_eq(pl.n_regions, 2 * 3);
    cr_assert_eq(pl.copies, 2);
    cr_assert_not(pl.even);
    const int64_t b0[2] = {0, 3}, nb[2] = {3, 2}, c0[3] = {0, 3, 5}, nc[3] = {3, 2, 2};
    for (int i = 0; i < pl.n_shards; i++) {
        const kb__shard *s = &pl.shards[i];
        cr_assert_eq(s->row0, b0[s->sip]);
        cr_assert_eq(s->rows, nb[s->sip]);
        cr_assert_eq(s->col0, c0[s->pe]);
        cr_assert_eq(s->cols, nc[s->pe]);
        cr_assert_eq(s->bytes, (uint64_t)(nb[s->sip] * 3 * nc[s->pe] * 2));
        cr_assert_eq(s->replica, s->cube);
    }
    int hits[5][7] = {{0}};
    for (int i = 0; i < pl.n_shards; i++) {
        const kb__shard *s = &pl.shards[i];
        if (s->replica) continue;
        for (int64_t b = s->row0; b < s->row0 + s->rows; b++)
            for (int64_t c = s->col0; c < s->col0 + s->cols; c++)
                hits[b][c]++;
    }
    for (int b = 0; b < 5; b++)
        for (int c = 0; c < 7; c++)
            cr_assert_eq(hits[b][c], 1, "(%d, :, %d)", b, c);
    kb__shard_plan_fini(&pl);
}

Test(shard, a_3d_split_too_fine_names_the_user_dimension)
{
    const int64_t shape[3] = {4, 16, 2};
    kb__shard_geom g = {1, 1, 8};
    kb__shard_req r =
        req2("x3", shape, 3, g,
             (kb__shard_policy){KB_REPLICATE, KB_REPLICATE, KB_COLUMN_WISE, 0, 0, 4, 0, 0});
    expect_error(&r, KB_EINVAL,
                 "tensor x3: shape [4, 16, 2] cannot be split column_wise over 4 PEs (dimension "
                 "2 = 2 is smaller than 4: some would hold nothing)");
    r.policy.pe = KB_ROW_WISE;
    r.policy.num_pes = 8;
    expect_error(&r, KB_EINVAL, "(dimension 0 = 4 is smaller than 8");
}

Test(shard, zero_or_negative_dimensions_and_bad_arguments_are_invalid)
{
    int64_t shape[2] = {64, 0};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_req r = req2("t", shape, 2, g, (kb__shard_policy){0, 0, 0, 0, 0, 0, 0, 0});
    expect_error(&r, KB_EINVAL, "dimension 1 of shape [64, 0] is 0");
    shape[1] = -5;
    expect_error(&r, KB_EINVAL, "dimension 1 of shape [64, -5] is -5");
    shape[1] = 64;
    r.ndim = 0;
    expect_error(&r, KB_EINVAL, "at least 1 dimension");
    r.ndim = 2;
    r.elem_size = 0;
    expect_error(&r, KB_EINVAL, "element size");
    r.elem_size = 2;
    r.policy.cube = (kb_split)7;
    expect_error(&r, KB_EINVAL, "policy for cubes is 7");
    r.policy.cube = KB_REPLICATE;
    r.device_sip = 2;
    expect_error(&r, KB_EINVAL, "current device sip 2 is not a SIP of this machine (0..1");
    r.device_sip = -1;
    r.geom.pes_per_cube = 0;
    expect_error(&r, KB_EINVAL, "geometry");
}

Test(shard, shard_bytes_that_overflow_64_bits_are_invalid)
{
    const int64_t shape[2] = {INT64_MAX / 2, 16};
    kb__shard_geom g = {1, 1, 1};
    kb__shard_req r = req2("huge", shape, 2, g, (kb__shard_policy){0, 0, 0, 0, 0, 0, 0, 0});
    expect_error(&r, KB_EINVAL, "overflows 64 bits");
}

Test(shard, row_wise_on_a_1d_tensor_over_one_owner_is_allowed)
{
    const int64_t shape[1] = {10};
    kb__shard_geom g = {2, 16, 8};
    kb__shard_req r =
        req2("b", shape, 1, g, (kb__shard_policy){KB_ROW_WISE, KB_COLUMN_WISE, 0, 1, 2, 1, 0, 0});
    kb__shard_plan pl;
    cr_assert_eq(kb__shard_plan_make(&pl, &r, NULL), 0);
    cr_assert_eq(pl.n_shards, 2);
    cr_assert_eq(pl.shards[1].col0, 5);
    cr_assert_eq(pl.shards[1].rows, 1);
    kb__shard_plan_fini(&pl);
    r.policy.num_sips = 2;
    expect_error(&r, KB_EINVAL,
                 "tensor b: shape [10] cannot be split row_wise over 2 SIPs (a 1-D tensor is one "
                 "row [1, 10]; split it column_wise)");
}

Test(shard, locate_rejects_elements_outside_the_tensor)
{
    const int64_t shape[2] = {4, 4};
    kb__shard_geom g = {1, 1, 1};
    kb__shard_req r = req2("t", shape, 2, g, (kb__shard_policy){0, 0, 0, 0, 0, 0, 0, 0});
    kb__shard_plan pl;
    int region;
    int64_t li, lj;
    kb__shard_plan_make(&pl, &r, NULL);
    cr_assert_eq(kb__shard_locate(&pl, 4, 0, &region, &li, &lj, NULL), KB_ERANGE);
    cr_assert_eq(kb__shard_locate(&pl, 0, -1, &region, &li, &lj, NULL), KB_ERANGE);
    cr_assert_eq(kb__shard_find(&pl, 0, 1), -1);
    kb__shard_plan_fini(&pl);
}
