#!/usr/bin/env bash
# fidelity.sh — scripts/fidelity.sh's command line (the tables themselves
# take an hour and more; docs/fidelity.md): --help describes the default
# and --full runs and exits 0, bad options and a missing kernbench exit 2
# naming what was wrong.
# usage: fidelity.sh KERNBENCH SOURCE_DIR
set -u
kb=$1
src=$2
script=$src/scripts/fidelity.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$script" --help >"$tmp/out" 2>"$tmp/err" || fail "--help exited $?"
grep -q -- "--full" "$tmp/out" || fail "--help does not describe --full: $(cat "$tmp/out")"
grep -q -- "--timeout" "$tmp/out" || fail "--help does not describe --timeout"
grep -q "ranks 2, 8, 64" "$tmp/out" || fail "--help does not give the default run's ranks"

bash "$script" --bogus "$kb" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "an unknown option should exit 2"
grep -q "unknown option '--bogus'" "$tmp/err" || fail "unknown option message: $(cat "$tmp/err")"

for bad in "x" "-3" ""; do
    bash "$script" --timeout "$bad" "$kb" >"$tmp/out" 2>"$tmp/err"
    [ $? -eq 2 ] || fail "--timeout '$bad' should exit 2"
    grep -q "needs whole seconds, got '$bad'" "$tmp/err" || fail "--timeout '$bad': $(cat "$tmp/err")"
done

bash "$script" "$tmp/no-such-kernbench" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "a missing kernbench should exit 2"
grep -q "no kernbench at '$tmp/no-such-kernbench'" "$tmp/err" || fail "missing kernbench: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "nothing should be printed on stdout for a missing kernbench"
exit 0
