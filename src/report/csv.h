/*
 * report/csv.h — the CSV writer beside the JSON records: RFC 4180 fields
 * (a field holding a comma, a quote or a line break is quoted, quotes
 * doubled), rows ended by "\n", a header whose column names carry their
 * unit as "name [unit]" (docs/results.md: the same units as the records).
 *
 * A table is built in memory (columns found as rows are added, in order of
 * first appearance) and written once, so every row has every column.
 * Ownership: the table copies every string. Cost: rows x columns cells.
 */
#ifndef KB_REPORT_CSV_H
#define KB_REPORT_CSV_H

#include <stddef.h>
#include <stdio.h>

typedef struct kb__csv kb__csv;

/* An empty table; NULL when out of memory. */
kb__csv *kb__csv_create(void);
void kb__csv_destroy(kb__csv *t);

/* Starts a new row. 0 or KB_ENOMEM. */
int kb__csv_row(kb__csv *t);
/* Sets the current row's cell in column name (added with unit, "" for
 * none, when new; a known column keeps its first unit). 0 or KB_ENOMEM. */
int kb__csv_cell(kb__csv *t, const char *name, const char *unit, const char *text);

/* The table read back (for the HTML report of a sweep): its size, column
 * c's name and unit, and the text of row r's cell in column c (NULL when
 * the row has none). Indexes must be in range. */
size_t kb__csv_rows(const kb__csv *t);
size_t kb__csv_cols(const kb__csv *t);
const char *kb__csv_col_name(const kb__csv *t, size_t c);
const char *kb__csv_col_unit(const kb__csv *t, size_t c);
const char *kb__csv_get(const kb__csv *t, size_t r, size_t c);

/* Writes the header and every row to f; 0, or KB_EIO on a write error. */
int kb__csv_write(const kb__csv *t, FILE *f);

#endif
