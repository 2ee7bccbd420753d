#!/bin/bash
# faults (docs/faults.md) on the command line: the run header, the record and
# topo list them, `config` writes them back as lists that load to the same hash,
# a bad entry exits 2 naming the key, a cut machine fails the collective
# (exit 1) naming the pair, never hanging.
# usage: faults.sh KERNBENCH_BINARY SOURCE_DIR
set -u
KB=$1
SRC=$2
. "$SRC/tests/support/cli.bash"

slow='faults.slow_pes=[{sip: 0, cube: 0, pe: 1, factor: 0.5}]'
down='faults.down_links=[{from: sip0.cube0.router, to: sip0.cube1.router}]'
"$KB" run --bench vector_add --no-data --set "$slow" --set "$down" > "$tmp/out" 2>&1
check "run with faults exits 0" $?
grep -q "^faults  *slow PE sip0.cube0.pe1 x0.5; down link sip0.cube0.router<->sip0.cube1.router$" \
    "$tmp/out"
check "the run header lists the faults" $?
"$KB" run --bench vector_add --no-data > "$tmp/plain" 2>&1
! grep -q "^faults" "$tmp/plain"; check "no faults line without faults" $?

"$KB" run --bench vector_add --no-data --set "$slow" --json > "$tmp/r.json" 2> /dev/null
python3 - "$tmp/r.json" << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["machine"]["faults"] == "slow PE sip0.cube0.pe1 x0.5", r["machine"]
PY
check "the record carries machine.faults" $?
"$KB" run --bench vector_add --no-data --json 2> /dev/null |
    python3 -c 'import json,sys; assert json.load(sys.stdin)["machine"]["faults"] == "none"'
check "machine.faults is none without faults" $?

"$KB" topo --set "$slow" | grep -q "^faults: slow PE sip0.cube0.pe1 x0.5 "
check "topo lists the faults" $?
! "$KB" topo | grep -q "^faults"; check "topo without faults has no faults line" $?

"$KB" config --set "$slow" --set "$down" > "$tmp/m.yaml"
check "config with faults exits 0" $?
grep -q "^  down_links: \[{from: sip0.cube0.router, to: sip0.cube1.router}\]$" "$tmp/m.yaml"
check "config writes the faults as lists" $?
hash() {
    "$KB" run --bench vector_add --no-data "$@" --json 2> /dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["config_hash"]["machine"])'
}
a=$(hash --set "$slow" --set "$down")
b=$(hash --topology "$tmp/m.yaml")
[ -n "$a" ] && [ "$a" = "$b" ]; check "the faults load back to the same hash ($a, $b)" $?
[ "$a" != "$(hash)" ]; check "faults change the hash" $?

"$KB" run --bench vector_add --no-data --set 'faults.slow_pes=[{sip: 0, cube: 42, pe: 0, factor: 0.5}]' \
    > /dev/null 2> "$tmp/err"
[ $? -eq 2 ]; check "a bad fault exits 2" $?
grep -q "faults.slow_pes\[0\].cube: no cube 42: the machine has cubes per SIP 0..15" "$tmp/err"
check "the error names the key, the value and what exists" $?

# two SIPs of one 1x1 cube of 2 PEs, the SIP link down: the all-reduce is refused
small=(--set sip.cube_mesh=1x1 --set cube.pe_layout.corners=2 --set cube.pe_layout.pe_per_corner=1
    --set cube.hbm.slices=2 --set 'faults.down_links=[{from: sip0.io_noc, to: sip1.io_noc}]')
timeout 120 "$KB" run --bench ccl_allreduce --opt bytes=4096 "${small[@]}" > /dev/null 2> "$tmp/cut"
[ $? -eq 1 ]; check "a cut machine fails the all-reduce (exit 1, no hang)" $?
grep -q "cannot reach its .* neighbour rank .*no route from sip" "$tmp/cut"
check "the error names the pair: $(head -c 300 "$tmp/cut")" $?
exit $fail
