/*
 * kernbench/error.h — status codes shared by every public call.
 *
 * A public function returns 0 on success or one negative KB_E* code, and
 * output pointers are NULL on failure. The object the call was made on (the
 * machine, usually) keeps a message that says what went wrong and where;
 * kb_strerror() only names the code.
 */
#ifndef KERNBENCH_ERROR_H
#define KERNBENCH_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KB_BUILDING_LIBRARY)
#define KB_API __attribute__((visibility("default")))
#else
#define KB_API
#endif

/* One table: name, value, description. kb_strerror() is generated from it. */
#define KB_ERRNO_MAP(X)                                                        \
    X(KB_EINVAL, -1, "invalid argument")                                     \
    X(KB_ENOMEM, -2, "out of host memory")                                   \
    X(KB_ECONFIG, -3, "machine description error")                           \
    X(KB_ENOTFOUND, -4, "no such object")                                    \
    X(KB_ERANGE, -5, "address or index out of range")                        \
    X(KB_ENOSPC, -6, "device memory exhausted")                              \
    X(KB_EFAULT, -7, "virtual address not mapped")                           \
    X(KB_EDEADLOCK, -8, "simulation deadlock")                               \
    X(KB_EKERNEL, -9, "kernel error")                                        \
    X(KB_ECANCELED, -10, "canceled")                                         \
    X(KB_EUNSUPPORTED, -11, "not supported yet")                             \
    X(KB_EIO, -12, "file error")                                             \
    X(KB_ESTACK, -13, "coroutine stack overflow")                            \
    X(KB_ESTATE, -14, "object in the wrong state for this call")             \
    X(KB_ECOLLECTIVE, -15, "collective error")                               \
    X(KB_EBUDGET, -16, "host memory budget exceeded")

enum kb_status {
    KB_OK = 0,
#define KB__ERR_ENUM(name, value, text) name = value,
    KB_ERRNO_MAP(KB__ERR_ENUM)
#undef KB__ERR_ENUM
};

/* The fixed description of a status code ("unknown error" for others). */
KB_API const char *kb_strerror(int status);

/* The library version, "MAJOR.MINOR.PATCH". */
KB_API const char *kb_version(void);

#ifdef __cplusplus
}
#endif
#endif
