/*
 * error.c — kb_strerror() and the message buffer every layer fills.
 *
 * Messages are formatted once, when the error happens, into a fixed buffer
 * on the object that owns the failing operation; nothing allocates on an
 * error path.
 */
#include "base/error.h"

#include <stdio.h>
#include <string.h>

const char *kb_strerror(int status)
{
    switch (status) {
    case KB_OK:
        return "success";
#define KB__ERR_CASE(name, value, text)                                          \
    case name:                                                                   \
        return text;
        KB_ERRNO_MAP(KB__ERR_CASE)
#undef KB__ERR_CASE
    }
    return "unknown error";
}

const char *kb_version(void)
{
    return KB_VERSION_STRING;
}

int kb__err_set(kb__err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kb__err_vset(e, code, fmt, ap);
    va_end(ap);
    return code;
}

int kb__err_vset(kb__err *e, int code, const char *fmt, va_list ap)
{
    if (!e)
        return code;
    e->code = code;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return code;
}

int kb__err_prefix(kb__err *e, const char *fmt, ...)
{
    char head[KB__ERR_MSG_MAX];
    char tail[KB__ERR_MSG_MAX];
    va_list ap;
    if (!e)
        return KB_EINVAL;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(tail, e->msg, sizeof tail);
    size_t n = strlen(head);
    if (n >= sizeof e->msg)
        n = sizeof e->msg - 1;
    memcpy(e->msg, head, n);
    size_t room = sizeof e->msg - 1 - n;
    size_t t = strnlen(tail, room);
    memcpy(e->msg + n, tail, t);
    e->msg[n + t] = '\0';
    return e->code;
}

void kb__err_clear(kb__err *e)
{
    if (e) {
        e->code = 0;
        e->msg[0] = '\0';
    }
}

void kb__err_copy(kb__err *dst, const kb__err *src)
{
    if (dst && src && dst != src)
        memcpy(dst, src, sizeof *dst);
}
