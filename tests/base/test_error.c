#include <criterion/criterion.h>
#include <string.h>

#include "base/error.h"

Test(error, every_code_has_its_own_description)
{
    int codes[] = {KB_EINVAL, KB_ENOMEM, KB_ECONFIG, KB_ENOTFOUND, KB_ERANGE, KB_ENOSPC,
                   KB_EFAULT, KB_EDEADLOCK, KB_EKERNEL, KB_ECANCELED, KB_EUNSUPPORTED,
                   KB_EIO, KB_ESTACK, KB_ESTATE, KB_ECOLLECTIVE, KB_EBUDGET};
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_neq(kb_strerror(codes[i]), "unknown error");
        for (size_t j = i + 1; j < n; j++)
            cr_assert_str_neq(kb_strerror(codes[i]), kb_strerror(codes[j]));
    }
    cr_assert_str_eq(kb_strerror(12345), "unknown error");
}

Test(error, prefix_adds_context_in_front)
{
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__err_set(&e, KB_EINVAL, "bad size %d", -3), KB_EINVAL);
    kb__err_prefix(&e, "tensor %s: ", "t3");
    cr_assert_str_eq(e.msg, "tensor t3: bad size -3");
    cr_assert_eq(e.code, KB_EINVAL);
}
