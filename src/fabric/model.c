/*
 * model.c — the table of fabric models, the calls every layer makes
 * (kb__fab_send, kb__fab_send_at, kb__fab_inject, memories), routed to the
 * fabric's model, and the solo schedule both models agree on.
 *
 * Adding a model: one file with its kb__fabric_model and one row below.
 * Cost: one indirect call per message.
 */
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

/* A tandem of FIFO links fed n packets at once: packet i (all full) ends
 * on link h at E_i(h) = Σ_{m<=h} P_m + Σ_{m<h} ow_m + i · max_{m<=h} P_m
 * (P: a full packet's service, ow: o + w); a shorter last packet ends at
 * max(its arrival, E_{n-2}(h)) + S_h. So the last two arrivals cost O(k),
 * where the per-packet recursion costs O(n·k). */
void kb__fab_solo(const kb__fabric *fab, const kb__route *r, uint64_t bytes, uint32_t p,
                  kb__time *last, kb__time *prev)
{
    uint64_t n = (bytes + p - 1) / p;
    uint32_t s = (uint32_t)(bytes - (n - 1) * p);
    kb__time sum_p = 0, sum_ow = 0, max_p = 0, e_last = 0, e_prev = 0, ow = 0;
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__link *l = &fab->links[r->links[h]];
        kb__time ph = kb__link_svc(fab, l, p), sh = kb__link_svc(fab, l, s);
        kb__time arrive = h ? e_last + ow : 0;
        sum_p += ph;
        if (ph > max_p) max_p = ph;
        e_prev = n >= 2 ? sum_p + sum_ow + (kb__time)(n - 2) * max_p : 0;
        e_last = (arrive > e_prev ? arrive : e_prev) + sh;
        ow = l->ow_ps;
        sum_ow += ow;
    }
    *last = e_last + ow;
    *prev = n >= 2 ? e_prev + ow : *last;
}
