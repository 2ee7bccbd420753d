#!/usr/bin/env bash
# fidelity.sh — scripts/fidelity.sh's command line (the tables themselves
# take an hour and more; docs/fidelity.md): --help describes the default
# and --full runs and exits 0, bad options and a missing kernbench exit 2
# naming what was wrong, and --only probe runs the probe tables alone.
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
grep -q -- "--only TABLE" "$tmp/out" || fail "--help does not describe --only"

bash "$script" --bogus "$kb" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "an unknown option should exit 2"
grep -q "unknown option '--bogus'" "$tmp/err" || fail "unknown option message: $(cat "$tmp/err")"

for bad in "x" "-3" ""; do
    bash "$script" --timeout "$bad" "$kb" >"$tmp/out" 2>"$tmp/err"
    [ $? -eq 2 ] || fail "--timeout '$bad' should exit 2"
    grep -q "needs whole seconds, got '$bad'" "$tmp/err" || fail "--timeout '$bad': $(cat "$tmp/err")"
done

for bad in "bogus" ""; do
    bash "$script" --only "$bad" "$kb" >"$tmp/out" 2>"$tmp/err"
    [ $? -eq 2 ] || fail "--only '$bad' should exit 2"
    grep -q "needs probe, collectives, kernels or calibrated, got '$bad'" "$tmp/err" || fail "--only '$bad': $(cat "$tmp/err")"
done

# the probe tables take well under a second; the others are left out
bash "$script" --only probe "$kb" >"$tmp/out" 2>"$tmp/err" || fail "--only probe exited $?: $(cat "$tmp/err")"
grep -q "^## Probe cases" "$tmp/out" || fail "--only probe printed no probe table: $(cat "$tmp/out")"
grep -q "^| pe-tcm-to-tcm | 4097 |" "$tmp/out" || fail "--only probe printed no row at 4097 bytes"
grep -q -e "^## Collectives" -e "^## Kernel" -e "^## Calibrated" "$tmp/out" && fail "--only probe printed another table"

bash "$script" "$tmp/no-such-kernbench" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "a missing kernbench should exit 2"
grep -q "no kernbench at '$tmp/no-such-kernbench'" "$tmp/err" || fail "missing kernbench: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "nothing should be printed on stdout for a missing kernbench"
exit 0
