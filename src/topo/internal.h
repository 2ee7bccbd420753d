/*
 * topo/internal.h — helpers shared by the topo/ files.
 */
#ifndef KB_TOPO_INTERNAL_H
#define KB_TOPO_INTERNAL_H

#include "topo/kinds.h"
#include "topo/params.h"

/* One parsed parameter value, before it is stored into the params. */
typedef struct kb__param_value {
    uint64_t u;          /* U32, U64, SIZE */
    double d;            /* DOUBLE, TIME, BW */
    uint32_t rows, cols; /* MESH */
    int kind;            /* KIND: kind index */
} kb__param_value;

/* Parses s as entry e's type (no range check); 1 on success. */
int kb__topo_param_parse_text(const kb__param *e, const char *s, kb__param_value *v);
/* Writes v into e's field of p. */
void kb__topo_param_store(kb__topo_params *p, const kb__param *e, const kb__param_value *v);

#endif
