#!/bin/bash
# kernbench-perf: --repeat reports the median run and the spread; bad
# options exit 2 naming what was expected.
# usage: perf.sh KERNBENCH_BINARY SOURCE_DIR (kernbench-perf sits beside it)
set -u
PERF=$(dirname "$1")/kernbench-perf
SRC=$2
. "$SRC/tests/support/cli.bash"

# json KEY FILE: the number KEY of the one workload in the record
json() {
    python3 -c 'import json, sys
w = json.load(open(sys.argv[2]))["workloads"]
print(*[x[sys.argv[1]] for x in w.values()])' "$1" "$2"
}

"$PERF" --only switch --repeat 3 --json > "$tmp/r.json"
check "--repeat 3 exits 0" $?
lo=$(json wall_min_s "$tmp/r.json")
mid=$(json wall_s "$tmp/r.json")
hi=$(json wall_max_s "$tmp/r.json")
awk -v a="$lo" -v b="$mid" -v c="$hi" 'BEGIN { exit !(a != "" && c != "" && a <= b && b <= c) }'
check "wall_min_s <= wall_s <= wall_max_s ($lo, $mid, $hi)" $?

"$PERF" --only switch > "$tmp/one.txt"
check "one run exits 0" $?
! grep -q wall_min_s "$tmp/one.txt"
check "one run reports no spread" $?

for bad in 0 101 3x -2 ""; do
    "$PERF" --only switch --repeat "$bad" > /dev/null 2> "$tmp/err.txt"
    [ $? -eq 2 ]
    check "--repeat '$bad' exits 2" $?
    grep -q "expected a count from 1 to 100" "$tmp/err.txt"
    check "--repeat '$bad' says what it expects" $?
done

"$PERF" --only tp_mlp --json > "$tmp/tp.json"
check "tp_mlp exits 0" $?
[ "$(json pass "$tmp/tp.json")" = 1.0 ]
check "tp_mlp's checks pass" $?

"$PERF" --help | grep -q "transformer_llama2_7b_flow .*(only with --only)"
check "--help lists the long workload as run only with --only" $?

"$PERF" --only nosuch > /dev/null 2> "$tmp/err.txt"
[ $? -eq 2 ]
check "an unknown workload exits 2" $?
grep -q "unknown workload 'nosuch'" "$tmp/err.txt"
check "an unknown workload is named" $?

exit $fail
