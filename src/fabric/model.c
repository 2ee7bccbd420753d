/*
 * model.c — the table of fabric models, the calls every layer makes
 * (kb__fab_send, kb__fab_send_at, kb__fab_inject, memories), routed to the
 * fabric's model, and the solo schedule both models agree on.
 *
 * Adding a model: one file with its kb__fabric_model and one row below.
 * Cost: one indirect call per message.
 */
#include <stdlib.h>
#include <string.h>

#include "fabric/internal.h"

/* The models, in the order `kernbench` lists them; the first is the default. */
static const kb__fabric_model *const models[] = {&kb__fab_packet_model, &kb__fab_flow_model};

#define N_MODELS (sizeof models / sizeof models[0])

const kb__fabric_model *kb__fabric_model_find(const char *name)
{
    for (size_t i = 0; name && i < N_MODELS; i++)
        if (!strcmp(models[i]->name, name)) return models[i];
    return NULL;
}

size_t kb__fabric_model_count(void)
{
    return N_MODELS;
}

const kb__fabric_model *kb__fabric_model_at(size_t i)
{
    return i < N_MODELS ? models[i] : NULL;
}

const char *kb__fabric_model_list(void)
{
    return "packet, flow";
}

int kb__fabric_set_model(kb__fabric *fab, const kb__fabric_model *model, kb__err *err)
{
    if (!model || model->version != KB__FABRIC_MODEL_VERSION)
        return kb__err_set(err, KB_EINVAL, "fabric: model %s has table version %d, expected %d",
                           model ? model->name : "(none)", model ? model->version : 0,
                           KB__FABRIC_MODEL_VERSION);
    if (fab->model) fab->model->fini(fab);
    fab->model = model;
    fab->model_state = NULL;
    int rc = model->init(fab, err);
    if (rc) fab->model = &kb__fab_packet_model; /* its init cannot fail */
    return rc;
}

const kb__fabric_model *kb__fabric_model_of(const kb__fabric *fab)
{
    return fab->model;
}

kb__fab_grain kb__fabric_grain(const kb__fabric *fab)
{
    return fab->model->grain;
}

int kb__fabric_ring_warmup(const kb__fabric *fab)
{
    return fab->model->calibrates_rings ? (int)fab->ring_warmup : 0;
}

int kb__fabric_attach_memory(kb__fabric *fab, uint32_t node, double bw_gbs, kb__err *err)
{
    return fab->model->attach_memory(fab, node, bw_gbs, err);
}

void kb__fab_send(kb__sim *sim, kb__fab_msg *msg)
{
    msg->fab->model->send(sim, msg);
}

void kb__fab_send_at(kb__sim *sim, kb__fab_msg *msg, kb__time at)
{
    msg->fab->model->send_at(sim, msg, at);
}

int kb__fab_inject(kb__sim *sim, kb__fab_msg *msg, kb__time *at, int in_order)
{
    return msg->fab->model->inject(sim, msg, at, in_order);
}

/* A tandem of FIFO servers (the links, and the serial workers of the
 * nodes crossed between them, whose delay after service is 0) fed n
 * packets at once: packet i (all full) ends on server h at E_i(h) =
 * Σ_{m<=h} P_m + Σ_{m<h} ow_m + i · max_{m<=h} P_m (P: a full packet's
 * service, ow: o + w); a shorter last packet ends at max(its arrival,
 * E_{n-2}(h)) + S_h. So the last two arrivals cost O(k), where the
 * per-packet recursion costs O(n·k). */
typedef struct solo_acc {
    uint64_t n;
    kb__time sum_p, sum_ow, max_p, e_last, e_prev, ow;
    int first;
} solo_acc;

static void solo_server(solo_acc *a, kb__time ph, kb__time sh, kb__time ow)
{
    kb__time arrive = a->first ? 0 : a->e_last + a->ow;
    a->first = 0;
    a->sum_p += ph;
    if (ph > a->max_p) a->max_p = ph;
    a->e_prev = a->n >= 2 ? a->sum_p + a->sum_ow + (kb__time)(a->n - 2) * a->max_p : 0;
    a->e_last = (arrive > a->e_prev ? arrive : a->e_prev) + sh;
    a->ow = ow;
    a->sum_ow += ow;
}

void kb__fab_solo(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p,
                  kb__time *last, kb__time *prev)
{
    solo_acc a = {.n = (bytes + p - 1) / p, .first = 1};
    uint32_t s = (uint32_t)(bytes - (a.n - 1) * p);
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__fab_worker *wk = kb__fab_worker_at(fab, r, h);
        if (wk) solo_server(&a, kb__fab_worker_svc(fab, wk, p), kb__fab_worker_svc(fab, wk, s), 0);
        const kb__link *l = &fab->links[r->links[h]];
        solo_server(&a, kb__link_svc(fab, l, p), kb__link_svc(fab, l, s), l->ow_ps);
    }
    *last = a.e_last + a.ow;
    *prev = a.n >= 2 ? a.e_prev + a.ow : *last;
}

/* One server of a route's tandem: a full and the short packet's service,
 * and the delay after it. */
typedef struct solo_srv {
    kb__time p, s, ow;
} solo_srv;

/* The servers of route r (a node's worker before its out-link), into v
 * (room for 2 · r->n); returns how many. */
static uint32_t servers(const kb__fabric *fab, const kb__route *r, uint32_t p, uint32_t s,
                        solo_srv *v)
{
    uint32_t k = 0;
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__fab_worker *wk = kb__fab_worker_at(fab, r, h);
        if (wk)
            v[k++] = (solo_srv){kb__fab_worker_svc(fab, wk, p), kb__fab_worker_svc(fab, wk, s), 0};
        const kb__link *l = &fab->links[r->links[h]];
        v[k++] = (solo_srv){kb__link_svc(fab, l, p), kb__link_svc(fab, l, s), l->ow_ps};
    }
    return k;
}

int kb__fab_solo_short(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p,
                       uint32_t at, kb__time lead, kb__time *last, kb__time *prev)
{
    uint64_t n = (bytes + p - 1) / p;
    uint32_t s = (uint32_t)(bytes - (n - 1) * p);
    solo_srv inl[16], *v = 2 * r->n <= 16 ? inl : malloc(2 * r->n * sizeof *v);
    kb__time einl[16], *e = 2 * r->n <= 16 ? einl : malloc(2 * r->n * sizeof *e);
    if (!v || !e) {
        if (v != inl) free(v);
        if (e != einl) free(e);
        return KB_ENOMEM;
    }
    uint32_t k = servers(fab, r, p, s, v);
    /* the `at` full packets before it, offered at `lead` (0 when at > 0):
     * the closed form of the one before it on every server */
    kb__time sum_p = 0, sum_ow = 0, max_p = 0;
    for (uint32_t q = 0; q < k; q++) {
        sum_p += v[q].p;
        max_p = v[q].p > max_p ? v[q].p : max_p;
        e[q] = at ? lead + sum_p + sum_ow + (kb__time)(at - 1) * max_p : 0;
        sum_ow += v[q].ow;
    }
    /* the short packet, offered at 0, then the full ones after it, offered
     * at `lead`, one after the other through the tandem */
    kb__time before = 0;
    for (uint64_t i = at; i < n; i++) {
        int short_one = i == at;
        kb__time t = short_one ? 0 : lead;
        before = e[k - 1] + v[k - 1].ow;
        for (uint32_t q = 0; q < k; q++) {
            kb__time start = t > e[q] ? t : e[q];
            e[q] = start + (short_one ? v[q].s : v[q].p);
            t = e[q] + v[q].ow;
        }
    }
    *last = e[k - 1] + v[k - 1].ow;
    *prev = n >= 2 ? before : *last;
    if (v != inl) free(v);
    if (e != einl) free(e);
    return 0;
}

kb__time kb__fab_drain(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p)
{
    uint64_t n = (bytes + p - 1) / p;
    uint32_t s = (uint32_t)(bytes - (n - 1) * p);
    const kb__link *b = &fab->links[r->bottleneck];
    kb__time full = kb__link_svc(fab, b, p), last = kb__link_svc(fab, b, s);
    for (uint32_t h = 1; r->workers && h < r->n; h++) {
        const kb__fab_worker *wk = kb__fab_worker_at(fab, r, h);
        if (wk && kb__fab_worker_svc(fab, wk, p) > full)
            full = kb__fab_worker_svc(fab, wk, p), last = kb__fab_worker_svc(fab, wk, s);
    }
    return (kb__time)(n - 1) * full + last;
}
