/*
 * state.c — the model-parallel state (Megatron's parallel_state) and the
 * handshake collective calls of this layer use to agree on their
 * arguments.
 *
 * State: one tp_group per group of host ranks (a kb_spawn group, or the
 * driver alone), kept in the runtime's per-group slot, so every kb_spawn
 * starts uninitialised and nothing is global. Each rank has its own
 * tensor-parallel size (0: not initialised), its pipeline-parallel size
 * (stages) and its tensor-, data- and pipeline-parallel groups (kb_new_group
 * handles), as each Megatron process has its own parallel_state;
 * kb_tp_initialize_model_parallel[_pp] sets every rank's at once (every
 * rank makes every group, in the same order: the world / size groups of
 * consecutive ranks; per stage of n = world / stages consecutive ranks, the
 * size groups of its ranks equal mod size; the n groups of ranks equal mod
 * n), kb_tp_destroy_model_parallel clears the caller's.
 *
 * Handshake (kb__tp_agree): claims are written into the group's table,
 * read by every rank of the caller's tensor-parallel group (the world
 * before the state is set) between two barriers of that group. Cost:
 * O(group) host work per rank and two barriers; no simulated time of its
 * own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/machine.h"
#include "tp/internal.h"

typedef struct tp_group {
    int world;
    int *size;   /* [world]: the rank's tensor-parallel size, 0 = not initialised */
    int *stages; /* [world]: the rank's pipeline-parallel size (stages), when size is set */
    int *pes;    /* [world]: PEs per rank asked with kb_tp_set_pes_per_rank, 0 = default */
    kb_group *tp, *dp, *pp; /* [world]: the rank's tensor-, data- and pipeline-parallel groups */
    int64_t *claims;        /* [world × KB__TP_CLAIM_MAX]: the last handshake's values */
    const char **call;      /* [world]: the public call each rank's last handshake is part of */
} tp_group;

static void group_free(void *p)
{
    tp_group *g = p;
    if (!g) return;
    free(g->size);
    free(g->stages);
    free(g->pes);
    free(g->tp);
    free(g->dp);
    free(g->pp);
    free(g->claims);
    free(g->call);
    free(g);
}

/* The caller's group state, created on first use; NULL with err set. */
static tp_group *group_of(kb_machine *m, kb__err *err)
{
    static const char key = 't'; /* this layer's group slot (runtime/ranks.h) */
    kb__rt_group_ext *ext = kb__rt_group_ext_of(m, &key, err);
    if (!ext) return NULL;
    if (ext->p) return ext->p;
    int world = kb_world_size(m);
    tp_group *g = calloc(1, sizeof *g);
    if (g) {
        g->world = world;
        g->size = calloc((size_t)world, sizeof *g->size);
        g->stages = calloc((size_t)world, sizeof *g->stages);
        g->pes = calloc((size_t)world, sizeof *g->pes);
        g->tp = calloc((size_t)world, sizeof *g->tp);
        g->dp = calloc((size_t)world, sizeof *g->dp);
        g->pp = calloc((size_t)world, sizeof *g->pp);
        g->claims = calloc((size_t)world * KB__TP_CLAIM_MAX, sizeof *g->claims);
        g->call = calloc((size_t)world, sizeof *g->call);
    }
    if (!g || !g->size || !g->stages || !g->pes || !g->tp || !g->dp || !g->pp || !g->claims ||
        !g->call) {
        group_free(g);
        kb__err_set(err, KB_ENOMEM, "out of host memory for the parallel state of %d ranks", world);
        return NULL;
    }
    ext->p = g;
    ext->free = group_free;
    return g;
}

int kb__tp_fail(kb_machine *m, const kb__err *e)
{
    return kb__rt_fail(m, e);
}

int kb__tp_sip(const kb_machine *m)
{
    return kb_get_device(m) < 0 ? 0 : kb_get_device(m);
}

/* The largest divisor of d that is <= v (v >= 1). */
static int divisor_below(int d, int v)
{
    while (d % v)
        v--;
    return v;
}

int kb__tp_where(kb_machine *m, const char *who, kb__tp_where_t *w, kb__err *err)
{
    int sips = 1, cubes = 1, pes = 1;
    kb_machine_shape(m, &sips, &cubes, &pes);
    tp_group *g = group_of(m, err);
    if (!g) return err->code;
    int rank = kb_rank(m), per_sip = cubes * pes, asked = g->pes[rank];
    /* ranks that share a SIP by the default binding: rank r is the (r / SIPs)-th of its SIP */
    int sharing = (kb_world_size(m) + sips - 1) / sips, j = rank / sips, c = asked;
    if (!c) {
        c = per_sip / (sharing > 0 ? sharing : 1);
        c = c >= pes ? c / pes * pes : divisor_below(pes, c < 1 ? 1 : c);
    }
    if ((int64_t)(j + 1) * c > per_sip)
        return kb__err_set(err, KB_EINVAL,
                           "%s: rank %d is rank %d of the ranks bound to a SIP by default (rank / "
                           "%d SIPs) and takes %d PEs from PE %lld of the SIP, which runs past its "
                           "%d PEs (kb_tp_set_pes_per_rank: a smaller count)",
                           who, rank, j, sips, c, (long long)j * c, per_sip);
    int64_t first = (int64_t)j * c;
    w->sip = kb__tp_sip(m);
    w->pes = c;
    w->first_cube = (int)(first / pes);
    w->num_cubes = c >= pes ? c / pes : 1;
    w->first_pe = c >= pes ? 0 : (int)(first % pes);
    w->num_pes = c >= pes ? pes : c;
    w->bound = kb_get_device(m) >= 0;
    return 0;
}

kb_policy kb__tp_policy(const kb__tp_where_t *w, kb_split split)
{
    /* num_sips 0 lets kb_set_device scope the tensor to the bound SIP */
    return (kb_policy){KB_REPLICATE, split,      split,         w->bound ? 0 : 1,
                       w->num_cubes, w->num_pes, w->first_cube, w->first_pe};
}

int kb_tp_set_pes_per_rank(kb_machine *m, int pes)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    int sips = 1, cubes = 1, per_cube = 1;
    kb_machine_shape(m, &sips, &cubes, &per_cube);
    tp_group *g = group_of(m, &e);
    if (!g) return kb__tp_fail(m, &e);
    int ok = pes == 0 || (pes > 0 && pes <= per_cube && per_cube % pes == 0) ||
             (pes > per_cube && pes % per_cube == 0 && pes / per_cube <= cubes);
    if (!ok) {
        kb__err_set(&e, KB_EINVAL,
                    "kb_tp_set_pes_per_rank: %d PEs: expected 0 (the default: the SIP's PEs "
                    "shared by the ranks bound to it), a divisor of the %d PEs of a cube, or a "
                    "multiple of them up to the %d PEs of a SIP",
                    pes, per_cube, cubes * per_cube);
        return kb__tp_fail(m, &e);
    }
    g->pes[kb_rank(m)] = pes;
    return 0;
}

int kb_tp_get_pes_per_rank(kb_machine *m, int *out)
{
    if (out) *out = -1;
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    kb__tp_where_t w;
    if (!out) kb__err_set(&e, KB_EINVAL, "kb_tp_get_pes_per_rank: out is NULL");
    if (e.code || kb__tp_where(m, "kb_tp_get_pes_per_rank", &w, &e)) return kb__tp_fail(m, &e);
    *out = w.pes;
    return 0;
}

/* err := "handshake: " + the failed barrier's message. */
static int barrier_failed(kb_machine *m, int rc, kb__err *err)
{
    return kb__err_set(err, rc, "handshake with the other ranks: %s", kb_last_error(m));
}

/* Every rank of [base, base + n) is in the same call; else names the first
 * that is not. */
static int same_call(const tp_group *g, int base, int n, const char *call, kb__err *err)
{
    for (int r = base; r < base + n; r++)
        if (strcmp(g->call[r], call))
            return kb__err_set(err, KB_EINVAL,
                               "%s: the ranks are in different calls: rank %d is in %s (every "
                               "rank must make the same kb_tp_ calls in the same order)",
                               call, r, g->call[r]);
    return 0;
}

int kb__tp_agree(kb_machine *m, const char *call, const int64_t *mine, int n, kb__tp_check_fn check,
                 void *ctx, kb__err *err)
{
    tp_group *g = group_of(m, err);
    if (!g) return err->code;
    int rank = kb_rank(m), size = g->size[rank];
    /* the caller's tensor-parallel group: consecutive ranks from base */
    int base = size ? rank / size * size : 0, members = size ? size : g->world;
    kb_group grp = size ? g->tp[rank] : KB_GROUP_WORLD;
    int64_t *slot = g->claims + (size_t)rank * KB__TP_CLAIM_MAX;
    memset(slot, 0, KB__TP_CLAIM_MAX * sizeof *slot);
    memcpy(slot, mine, (size_t)n * sizeof *mine);
    g->call[rank] = call;
    int rc = members > 1 ? kb_barrier_group(m, grp) : 0;
    if (rc) return barrier_failed(m, rc, err);
    rc = same_call(g, base, members, call, err);
    if (!rc) rc = check(g->claims + (size_t)base * KB__TP_CLAIM_MAX, base, members, ctx, err);
    int rc2 = members > 1 ? kb_barrier_group(m, grp) : 0;
    if (rc2) return barrier_failed(m, rc2, err);
    return rc;
}

int kb__tp_state(kb_machine *m, const char *who, int *tp_size, int *tp_rank, kb__err *err)
{
    tp_group *g = group_of(m, err);
    if (!g) return err->code;
    int size = g->size[kb_rank(m)];
    if (!size)
        return kb__err_set(err, KB_ESTATE,
                           "%s: model parallel is not initialized (call "
                           "kb_tp_initialize_model_parallel first)",
                           who);
    *tp_size = size;
    *tp_rank = kb_rank(m) % size;
    return 0;
}

kb_group kb__tp_group(kb_machine *m)
{
    kb__err e;
    tp_group *g = group_of(m, &e);
    return g && g->size[kb_rank(m)] ? g->tp[kb_rank(m)] : KB_GROUP_WORLD;
}

/* ---- kb_tp_initialize_model_parallel ------------------------------------------ */

/* Every rank passed the same sizes (claim 0: tensor, 1: pipeline); else
 * lists the first that differs, rank by rank (the first 16). */
static int same_sizes(const int64_t *all, int base, int world, void *ctx, kb__err *err)
{
    (void)base; /* the world: base 0; ctx: the public call's name */
    static const char *const what[2] = {"tensor_model_parallel_size",
                                        "pipeline_model_parallel_size"};
    for (int j = 0; j < 2; j++) {
        int r = 1;
        while (r < world && all[(size_t)r * KB__TP_CLAIM_MAX + j] == all[j])
            r++;
        if (r == world) continue;
        kb__err_set(err, KB_EINVAL,
                    "%s: the ranks passed different %s values (every rank must pass the same):",
                    (const char *)ctx, what[j]);
        size_t len = strlen(err->msg);
        for (int k = 0; k < world && len < sizeof err->msg - 1; k++) {
            int w = k < 16 ? snprintf(err->msg + len, sizeof err->msg - len, " rank %d: %lld;", k,
                                      (long long)all[(size_t)k * KB__TP_CLAIM_MAX + j])
                           : snprintf(err->msg + len, sizeof err->msg - len, " ...");
            if (w > 0) len += (size_t)w;
            if (k >= 16) break;
        }
        return KB_EINVAL;
    }
    return 0;
}

/* The sizes themselves, once every rank agreed on them. */
static int check_sizes(const char *who, int size, int stages, int world, kb__err *err)
{
    if (size < 1)
        return kb__err_set(err, KB_EINVAL, "%s: tensor_model_parallel_size %d: must be >= 1", who,
                           size);
    if (stages < 1)
        return kb__err_set(err, KB_EINVAL, "%s: pipeline_model_parallel_size %d: must be >= 1", who,
                           stages);
    if (world % ((int64_t)size * stages)) {
        char pp[64] = "";
        if (stages > 1) snprintf(pp, sizeof pp, " x pipeline_model_parallel_size %d", stages);
        return kb__err_set(err, KB_EINVAL,
                           "%s: tensor_model_parallel_size %d%s does not divide the world size "
                           "%d (host ranks)",
                           who, size, pp, world);
    }
    return 0;
}

/* Makes the groups (header comment) and keeps the caller's three. With
 * n = world / stages ranks per stage: rank r is stage r / n, tensor-parallel
 * rank r mod size, data-parallel rank (r mod n) / size. */
static int make_groups(kb_machine *m, tp_group *g, int size, int stages, const char *who,
                       kb__err *err)
{
    int world = g->world, rank = kb_rank(m), n = world / stages, dp_n = n / size;
    int *list = malloc((size_t)world * sizeof *list);
    if (!list) return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", who);
    int rc = 0;
    for (int i = 0; i < world / size && !rc; i++) { /* tensor-parallel: consecutive ranks */
        kb_group h;
        for (int k = 0; k < size; k++)
            list[k] = i * size + k;
        rc = kb_new_group(m, list, size, &h);
        if (!rc && i == rank / size) g->tp[rank] = h;
    }
    /* data-parallel: the ranks of one stage equal mod size */
    for (int s = 0; s < stages && !rc; s++)
        for (int j = 0; j < size && !rc; j++) {
            kb_group h;
            for (int k = 0; k < dp_n; k++)
                list[k] = s * n + j + k * size;
            rc = kb_new_group(m, list, dp_n, &h);
            if (!rc && s == rank / n && j == rank % size) g->dp[rank] = h;
        }
    for (int j = 0; j < n && !rc; j++) { /* pipeline: the ranks equal mod n, one per stage */
        kb_group h;
        for (int k = 0; k < stages; k++)
            list[k] = j + k * n;
        rc = kb_new_group(m, list, stages, &h);
        if (!rc && j == rank % n) g->pp[rank] = h;
    }
    free(list);
    if (rc) return kb__err_set(err, rc, "%s: making the groups: %s", who, kb_last_error(m));
    return 0;
}

static int init_parallel(kb_machine *m, const char *who, int size, int stages)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!kb_is_initialized(m)) {
        kb__err_set(&e, KB_ESTATE,
                    "%s: no process group (call kb_init_process_group(m, \"ahbm\") first)", who);
        return kb__tp_fail(m, &e);
    }
    tp_group *g = group_of(m, &e);
    if (!g) return kb__tp_fail(m, &e);
    int rank = kb_rank(m);
    if (g->size[rank]) {
        kb__err_set(&e, KB_ESTATE,
                    "%s: model parallel is already initialized on rank %d (size %d); call "
                    "kb_tp_destroy_model_parallel first",
                    who, rank, g->size[rank]);
        return kb__tp_fail(m, &e);
    }
    int64_t mine[2] = {size, stages};
    int rc = kb__tp_agree(m, who, mine, 2, same_sizes, (void *)who, &e);
    if (!rc) rc = check_sizes(who, size, stages, g->world, &e);
    if (!rc) rc = make_groups(m, g, size, stages, who, &e);
    if (rc) return kb__tp_fail(m, &e);
    g->size[rank] = size;
    g->stages[rank] = stages;
    return 0;
}

int kb_tp_initialize_model_parallel(kb_machine *m, int tensor_model_parallel_size)
{
    return init_parallel(m, "kb_tp_initialize_model_parallel", tensor_model_parallel_size, 1);
}

int kb_tp_initialize_model_parallel_pp(kb_machine *m, int tensor_model_parallel_size,
                                       int pipeline_model_parallel_size)
{
    return init_parallel(m, "kb_tp_initialize_model_parallel_pp", tensor_model_parallel_size,
                         pipeline_model_parallel_size);
}

/* ---- getters ------------------------------------------------------------------------ */

int kb_tp_model_parallel_is_initialized(kb_machine *m, int *out)
{
    if (out) *out = 0;
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!out) {
        kb__err_set(&e, KB_EINVAL, "kb_tp_model_parallel_is_initialized: out is NULL");
        return kb__tp_fail(m, &e);
    }
    tp_group *g = group_of(m, &e);
    if (!g) return kb__tp_fail(m, &e);
    *out = g->size[kb_rank(m)] != 0;
    return 0;
}

typedef enum which {
    TP_RANK,
    TP_WORLD,
    DP_RANK,
    DP_WORLD,
    PP_RANK,
    PP_WORLD,
    TP_GROUP,
    DP_GROUP,
    PP_GROUP
} which;

/* *out := what w names (a group: its handle's id), -1 on failure. */
static int get(kb_machine *m, int *out, which w, const char *who)
{
    if (out) *out = -1;
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    int size = 0, tp_rank = 0;
    if (!out) kb__err_set(&e, KB_EINVAL, "%s: out is NULL", who);
    if (e.code || kb__tp_state(m, who, &size, &tp_rank, &e)) return kb__tp_fail(m, &e);
    int stages = group_of(m, &e)->stages[kb_rank(m)];
    switch (w) {
    case TP_RANK:
        *out = tp_rank;
        break;
    case TP_WORLD:
        *out = size;
        break;
    case DP_RANK:
        *out = kb_rank(m) % (kb_world_size(m) / stages) / size;
        break;
    case DP_WORLD:
        *out = kb_world_size(m) / stages / size;
        break;
    case PP_RANK:
        *out = kb_rank(m) / (kb_world_size(m) / stages);
        break;
    case PP_WORLD:
        *out = stages;
        break;
    case TP_GROUP:
        *out = kb__tp_group(m).id;
        break;
    case DP_GROUP:
        *out = group_of(m, &e)->dp[kb_rank(m)].id;
        break;
    case PP_GROUP:
        *out = group_of(m, &e)->pp[kb_rank(m)].id;
        break;
    }
    return 0;
}

int kb_tp_get_tensor_model_parallel_rank(kb_machine *m, int *out)
{
    return get(m, out, TP_RANK, "kb_tp_get_tensor_model_parallel_rank");
}

int kb_tp_get_tensor_model_parallel_world_size(kb_machine *m, int *out)
{
    return get(m, out, TP_WORLD, "kb_tp_get_tensor_model_parallel_world_size");
}

int kb_tp_get_data_parallel_rank(kb_machine *m, int *out)
{
    return get(m, out, DP_RANK, "kb_tp_get_data_parallel_rank");
}

int kb_tp_get_data_parallel_world_size(kb_machine *m, int *out)
{
    return get(m, out, DP_WORLD, "kb_tp_get_data_parallel_world_size");
}

int kb_tp_get_pipeline_model_parallel_rank(kb_machine *m, int *out)
{
    return get(m, out, PP_RANK, "kb_tp_get_pipeline_model_parallel_rank");
}

int kb_tp_get_pipeline_model_parallel_world_size(kb_machine *m, int *out)
{
    return get(m, out, PP_WORLD, "kb_tp_get_pipeline_model_parallel_world_size");
}

int kb_tp_get_pipeline_model_parallel_group(kb_machine *m, kb_group *out)
{
    return get(m, out ? &out->id : NULL, PP_GROUP, "kb_tp_get_pipeline_model_parallel_group");
}

int kb_tp_get_tensor_model_parallel_group(kb_machine *m, kb_group *out)
{
    return get(m, out ? &out->id : NULL, TP_GROUP, "kb_tp_get_tensor_model_parallel_group");
}

int kb_tp_get_data_parallel_group(kb_machine *m, kb_group *out)
{
    return get(m, out ? &out->id : NULL, DP_GROUP, "kb_tp_get_data_parallel_group");
}

int kb_tp_destroy_model_parallel(kb_machine *m)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    tp_group *g = group_of(m, &e);
    if (!g) return kb__tp_fail(m, &e);
    g->size[kb_rank(m)] = 0;
    return 0;
}

int kb_tp_placement(kb_machine *m, kb_policy *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    kb__tp_where_t w;
    if (!out) kb__err_set(&e, KB_EINVAL, "kb_tp_placement: out is NULL");
    if (e.code || kb__tp_where(m, "kb_tp_placement", &w, &e)) return kb__tp_fail(m, &e);
    *out = kb__tp_policy(&w, KB_REPLICATE);
    return 0;
}

static const char *split_name(kb_split s)
{
    return s == KB_ROW_WISE ? "row_wise" : s == KB_COLUMN_WISE ? "column_wise" : "replicate";
}

int kb__tp_check_layout(kb_machine *m, kb_tensor x, const kb__tp_where_t *w, kb_split split,
                        const char *who, const char *role, kb__err *e)
{
    kb_tensor_info xi;
    kb_shard_info xs;
    int rc = kb_tensor_get_info(m, x, &xi);
    if (!rc) rc = kb_tensor_get_shard(m, x, 0, &xs);
    if (rc) return kb__err_set(e, rc, "%s: %s: %s", who, role, kb_last_error(m));
    const kb_policy *p = &xi.policy;
    int same = xs.sip == w->sip && xi.n_shards == w->pes && p->cube == split && p->pe == split &&
               p->num_cubes == w->num_cubes && p->num_pes == w->num_pes &&
               p->first_cube == w->first_cube && p->first_pe == w->first_pe;
    if (same) return 0;
    return kb__err_set(e, KB_EINVAL,
                       "%s: %s '%s' must be %s over the rank's %d PEs (sip%d, cubes %d..%d, PEs "
                       "%d..%d of each: kb_tp_placement, with cube and pe %s); it is %s / %s over "
                       "%d shard(s) from sip%d/cube%d/pe%d (cubes %d from %d, PEs %d from %d)",
                       who, role, xi.name, split_name(split), w->pes, w->sip, w->first_cube,
                       w->first_cube + w->num_cubes - 1, w->first_pe, w->first_pe + w->num_pes - 1,
                       split_name(split), split_name(p->cube), split_name(p->pe), xi.n_shards,
                       xs.sip, xs.cube, xs.pe, p->num_cubes, p->first_cube, p->num_pes,
                       p->first_pe);
}
