#!/usr/bin/env bash
# asan_client.sh — a client built with -fsanitize=address links the library
# as this build made it (libkernbench.so next to the kernbench executable;
# not sanitized in the normal build) and runs kernels that end in kernel
# errors with local arrays on their stacks (tests/cli/asan_client.c): the
# library's ASan fiber annotations, resolved at run time, keep the coroutine
# stacks clean, so ASan reports nothing.
# usage: asan_client.sh KERNBENCH SOURCE_DIR
set -u
kb=$1
src=$2
bd=$(cd "$(dirname "$kb")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -e "$bd/libkernbench.so" ] || fail "no libkernbench.so in $bd"
# a library built by clang with -fsanitize=undefined needs clang's UBSan
# runtime, which only a clang-linked executable carries: nothing to test
if nm -D --undefined-only "$bd/libkernbench.so" | grep -q __ubsan_ &&
    ! objdump -p "$bd/libkernbench.so" | grep -q 'NEEDED.*libubsan'; then
    echo "skipped: this libkernbench.so needs clang's UBSan runtime"
    exit 0
fi
cc -g -O1 -fsanitize=address -fno-omit-frame-pointer -I"$src/include" \
    "$src/tests/cli/asan_client.c" -L"$bd" -lkernbench -Wl,-rpath,"$bd" -o "$tmp/client" \
    2>"$tmp/err" || fail "client build: $(cat "$tmp/err")"
ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1 OPENBLAS_NUM_THREADS=1 \
    "$tmp/client" >"$tmp/out" 2>&1 || fail "client run: $(tail -40 "$tmp/out")"
grep -q "kernel errors and reused stacks clean" "$tmp/out" || fail "no result: $(cat "$tmp/out")"
