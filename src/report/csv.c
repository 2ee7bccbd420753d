/*
 * csv.c — the in-memory CSV table and its writer (see csv.h).
 */
#include "report/csv.h"

#include <stdlib.h>
#include <string.h>

#include "kernbench/error.h"

typedef struct column {
    char *name, *unit;
} column;

struct kb__csv {
    column *cols;
    size_t n_cols, cap_cols;
    char **cells; /* [n_rows x cap_cols]: row r, column c at r * cap_cols + c; NULL empty */
    size_t n_rows, cap_rows;
};

kb__csv *kb__csv_create(void)
{
    return calloc(1, sizeof(kb__csv));
}

void kb__csv_destroy(kb__csv *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n_rows * t->cap_cols; i++)
        free(t->cells[i]);
    for (size_t c = 0; c < t->n_cols; c++)
        free(t->cols[c].name), free(t->cols[c].unit);
    free(t->cells);
    free(t->cols);
    free(t);
}

/* Room for cap_rows rows of cap_cols cells, old cells kept in place. */
static int grow(kb__csv *t, size_t rows, size_t cols)
{
    if (rows <= t->cap_rows && cols <= t->cap_cols) return 0;
    size_t nr = rows > t->cap_rows ? 2 * rows : t->cap_rows;
    size_t nc = cols > t->cap_cols ? 2 * cols : t->cap_cols;
    char **cells = calloc(nr * nc, sizeof *cells);
    if (!cells) return KB_ENOMEM;
    for (size_t r = 0; r < t->n_rows; r++)
        for (size_t c = 0; c < t->n_cols; c++)
            cells[r * nc + c] = t->cells[r * t->cap_cols + c];
    free(t->cells);
    t->cells = cells;
    t->cap_rows = nr;
    t->cap_cols = nc;
    return 0;
}

int kb__csv_row(kb__csv *t)
{
    if (grow(t, t->n_rows + 1, t->n_cols ? t->n_cols : 1)) return KB_ENOMEM;
    t->n_rows++;
    return 0;
}

static long find(const kb__csv *t, const char *name)
{
    for (size_t c = 0; c < t->n_cols; c++)
        if (!strcmp(t->cols[c].name, name)) return (long)c;
    return -1;
}

int kb__csv_cell(kb__csv *t, const char *name, const char *unit, const char *text)
{
    if (!t->n_rows) return KB_EINVAL;
    long c = find(t, name);
    if (c < 0) {
        if (t->n_cols == t->cap_cols && grow(t, t->n_rows, t->n_cols + 1)) return KB_ENOMEM;
        column *cols = t->cols;
        if (t->n_cols % 16 == 0) {
            cols = realloc(t->cols, (t->n_cols + 16) * sizeof *cols);
            if (!cols) return KB_ENOMEM;
            t->cols = cols;
        }
        char *n = strdup(name), *u = strdup(unit ? unit : "");
        if (!n || !u) return free(n), free(u), KB_ENOMEM;
        t->cols[t->n_cols] = (column){n, u};
        c = (long)t->n_cols++;
    }
    char **cell = &t->cells[(t->n_rows - 1) * t->cap_cols + (size_t)c];
    char *s = strdup(text);
    if (!s) return KB_ENOMEM;
    free(*cell);
    *cell = s;
    return 0;
}

size_t kb__csv_rows(const kb__csv *t)
{
    return t->n_rows;
}

size_t kb__csv_cols(const kb__csv *t)
{
    return t->n_cols;
}

const char *kb__csv_col_name(const kb__csv *t, size_t c)
{
    return t->cols[c].name;
}

const char *kb__csv_col_unit(const kb__csv *t, size_t c)
{
    return t->cols[c].unit;
}

const char *kb__csv_get(const kb__csv *t, size_t r, size_t c)
{
    return t->cells[r * t->cap_cols + c];
}

static void field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int kb__csv_write(const kb__csv *t, FILE *f)
{
    for (size_t c = 0; c < t->n_cols; c++) {
        char head[512];
        snprintf(head, sizeof head, t->cols[c].unit[0] ? "%s [%s]" : "%s", t->cols[c].name,
                 t->cols[c].unit);
        if (c) fputc(',', f);
        field(f, head);
    }
    fputc('\n', f);
    for (size_t r = 0; r < t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) {
            if (c) fputc(',', f);
            const char *s = kb__csv_get(t, r, c);
            if (s) field(f, s);
        }
        fputc('\n', f);
    }
    return fflush(f) || ferror(f) ? KB_EIO : 0;
}
