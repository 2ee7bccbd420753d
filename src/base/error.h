/*
 * base/error.h — the error record every layer reports into.
 *
 * Convention: a failing internal function fills a kb__err (code + message
 * saying what, where and which value) and returns the same negative code.
 * Callers may add context in front with kb__err_prefix(). The public API
 * copies the message onto the machine for kb_last_error().
 */
#ifndef KB_BASE_ERROR_H
#define KB_BASE_ERROR_H

#include <stdarg.h>

#include "kernbench/error.h"

#define KB__ERR_MSG_MAX 1024

typedef struct kb__err {
    int code;                   /* 0 or a negative KB_E* */
    char msg[KB__ERR_MSG_MAX];  /* NUL-terminated, possibly truncated */
} kb__err;

/* Stores code and the formatted message in e (e may be NULL); returns code. */
int kb__err_set(kb__err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int kb__err_vset(kb__err *e, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Puts formatted context in front of the current message; returns e->code. */
int kb__err_prefix(kb__err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kb__err_clear(kb__err *e);
void kb__err_copy(kb__err *dst, const kb__err *src);

#endif
