#!/bin/bash
# Usage errors: one line naming the problem, the closest name when there is
# one, and where to read more; a bare `kernbench` prints the usage.
# usage: usage.sh KERNBENCH_BINARY SOURCE_DIR
set -u
KB=$1
SRC=$2
. "$SRC/tests/support/cli.bash"

"$KB" > "$tmp/out" 2> "$tmp/err"
check "bare kernbench exits 0" $?
grep -q "^usage: kernbench <command>" "$tmp/out"; check "bare kernbench prints the usage" $?

# one_line WANT ARGS...: exit 2, one line on stderr containing WANT
one_line() {
    local want=$1
    shift
    "$KB" "$@" > /dev/null 2> "$tmp/err"
    [ $? -eq 2 ]; check "'$*' exits 2" $?
    [ "$(wc -l < "$tmp/err")" -eq 1 ]; check "'$*': one line, got $(wc -l < "$tmp/err")" $?
    grep -qF -- "$want" "$tmp/err"; check "'$*': '$want' in: $(cat "$tmp/err")" $?
}

one_line "did you mean 'run'?" rn
one_line "did you mean '--bench'?" run --bnech qkv_gemm
one_line "did you mean '--topology'?" run --config x.yaml
one_line "did you mean '--topology'?" probe --config x.yaml
one_line "did you mean 'qkv_gemm'?" run --bench qkv_gem
one_line "did you mean 'pe-local-hbm'?" probe --case pe-local-hbn
one_line "did you mean 'algorithm'?" run --bench ccl_allreduce --opt algoritm=x
one_line "(kernbench run --help)" run --frobnicate
one_line "(kernbench probe --help)" probe --bytes 3x
one_line "unexpected argument 'extra'" topo extra
one_line "--set needs a value" topo --set

exit $fail
