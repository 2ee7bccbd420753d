#!/bin/bash
# kernbench topo / list: figures computed from parameters, exit codes.
# usage: topo.sh KERNBENCH_BINARY SOURCE_DIR
set -u
KB=$1
SRC=$2
. "$SRC/tests/support/cli.bash"
. "$SRC/tests/support/record.bash"

# json KEY FILE: the number for "KEY": in a topo --json output
json() { sed -n "s/^  \"$1\": \([^,]*\),\{0,1\}$/\1/p" "$2"; }

# same A B: numbers equal to 9 significant digits
same() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && sprintf("%.9g", a) == sprintf("%.9g", b)) }'; }

# --- default machine: from the parameters of configs/topology.yaml
"$KB" topo --json > "$tmp/d.json"
check "topo --json exits 0" $?
S=2; R=4; C=4; P=8; K=8; N=$((R * C))
same "$(json sips "$tmp/d.json")" $S; check "sips" $?
same "$(json pes "$tmp/d.json")" $((S * N * P)); check "pes" $?
same "$(json world_size "$tmp/d.json")" $((S * N * P)); check "world_size" $?
same "$(json hbm_slices "$tmp/d.json")" $((S * N * K)); check "hbm_slices" $?
same "$(json nodes "$tmp/d.json")" $((1 + 3 * S + S * N * (6 + K) + S * N * P * 7)); check "nodes" $?
same "$(json pe_peak_flops "$tmp/d.json")" "$(awk 'BEGIN{printf "%.17g", 2*64*64*1.0e9}')"; check "pe peak" $?
same "$(json system_peak_flops "$tmp/d.json")" "$(awk -v n=$((S * N * P)) 'BEGIN{printf "%.17g", 2*64*64*1.0e9*n}')"; check "system peak" $?
same "$(json hbm_slice_gbs "$tmp/d.json")" "$(awk 'BEGIN{printf "%.17g", 256*0.8}')"; check "hbm slice bw" $?
same "$(json hbm_system_gbs "$tmp/d.json")" "$(awk -v k=$((S * N * K)) 'BEGIN{printf "%.17g", 256*0.8*k}')"; check "hbm system bw" $?
same "$(json hbm_slice_bytes "$tmp/d.json")" $((48 * 1073741824 / K)); check "hbm per slice" $?
same "$(json tcm_usable_bytes "$tmp/d.json")" $(((16 - 4) * 1048576)); check "tcm usable" $?
same "$(json ucie_bisection_links "$tmp/d.json")" $R; check "bisection links" $?
same "$(json ucie_bisection_gbs_per_direction "$tmp/d.json")" $((R * 256)); check "bisection per dir" $?
same "$(json ucie_bisection_gbs_both_directions "$tmp/d.json")" $((2 * R * 256)); check "bisection both" $?
same "$(json pcie_gbs_per_direction "$tmp/d.json")" 64; check "pcie" $?
# what the PEs can draw: a cube's 8 slices x 204.8 pass one 512 GB/s xbar<->noc link
same "$(json hbm_cube_reachable_gbs "$tmp/d.json")" 512; check "hbm cube reachable" $?
grep -q '"hbm_cube_bound": "1 xbar<->noc link"' "$tmp/d.json"; check "hbm cube bound" $?
same "$(json hbm_system_reachable_gbs "$tmp/d.json")" $((S * N * 512)); check "hbm system reachable" $?
same "$(json hbm_slice_reachable_gbs "$tmp/d.json")" "$(awk 'BEGIN{printf "%.17g", 256*0.8}')"; check "hbm slice reachable" $?

# --- the file gives the same output as the built-in machine
"$KB" topo --topology "$SRC/configs/topology.yaml" --json > "$tmp/f.json"
check "topo --topology exits 0" $?
# (the records differ in the command line, the option given and the name;
# the configuration hash is the same)
diff <(record_minus "$tmp/d.json" machine command_line options.topology) \
    <(record_minus "$tmp/f.json" machine command_line options.topology) > /dev/null
check "file and built-in machine agree" $?

# --- overrides change the figures as the formulas say
S=3; R=2; C=6; P=6
"$KB" topo --set system.sips=$S --set sip.cube_mesh=${R}x$C --set cube.pe_layout.corners=2 \
    --set cube.pe_layout.pe_per_corner=3 --set cube.hbm.slices=$P --set pe.gemm.rows=32 \
    --set pe.gemm.clock_ghz=1.5 --json="$tmp/o.json"
check "topo with --set exits 0" $?
N=$((R * C))
same "$(json pes "$tmp/o.json")" $((S * N * P)); check "pes after --set" $?
same "$(json nodes "$tmp/o.json")" $((1 + 3 * S + S * N * (6 + P) + S * N * P * 7)); check "nodes after --set" $?
same "$(json pe_peak_flops "$tmp/o.json")" "$(awk 'BEGIN{printf "%.17g", 2*32*64*1.5e9}')"; check "peak after --set" $?
same "$(json ucie_bisection_links "$tmp/o.json")" $R; check "bisection links 2x6" $?

# --- the table has the same figures with units
"$KB" topo > "$tmp/t.txt"
check "topo table exits 0" $?
grep -Eq '^  PEs \(world size\) +256$' "$tmp/t.txt"; check "table: PEs" $?
grep -Eq '^    reachable by its PEs +512\.0 GB/s, bounded by 1 xbar<->noc link$' "$tmp/t.txt"
check "table: reachable HBM per cube with its bound" $?
grep -Eq '^  HBM bandwidth per slice +204\.8 GB/s$' "$tmp/t.txt"; check "table: hbm slice bw" $?
grep -Eq '^  GEMM peak per PE \(f16\) +8\.192 TFLOP/s$' "$tmp/t.txt"; check "table: peak" $?
grep -Eq '^  HBM per cube +48 GiB$' "$tmp/t.txt"; check "table: hbm per cube" $?
grep -Eq '^  TCM usable per PE +12 MiB$' "$tmp/t.txt"; check "table: tcm usable" $?

# --- errors: bad input exits 2 with the location on stderr
"$KB" topo --set cube.hbm.efficiency=1.5 > /dev/null 2> "$tmp/e1"
check "bad --set value exits 2" $(( $? != 2 ))
grep -q "^kernbench topo: --set cube.hbm.efficiency=1.5: cube.hbm.efficiency: must be <= 1, got '1.5'$" "$tmp/e1"
check "bad --set value message" $?
"$KB" topo --set cube.hbmm.slices=8 > /dev/null 2> "$tmp/e2"
check "bad --set path exits 2" $(( $? != 2 ))
grep -q "did you mean 'hbm'?" "$tmp/e2"; check "bad --set path hint" $?
printf 'cube:\n  hbm:\n    slices: eight\n' > "$tmp/bad.yaml"
"$KB" topo --topology "$tmp/bad.yaml" > /dev/null 2> "$tmp/e3"
check "bad file exits 2" $(( $? != 2 ))
grep -q "^kernbench topo: $tmp/bad.yaml:3:13: cube.hbm.slices: expected a non-negative integer, got 'eight'$" "$tmp/e3"
check "bad file message has file:line:col" $?
"$KB" topo --topology "$tmp/missing.yaml" > /dev/null 2>&1
check "missing file exits 2" $(( $? != 2 ))
"$KB" topo --bogus > /dev/null 2>&1
check "unknown option exits 2" $(( $? != 2 ))
"$KB" topo --set > /dev/null 2>&1
check "--set without a value exits 2" $(( $? != 2 ))
# topo has no collectives configuration: a ccl. setting is refused, not ignored
for s in ccl.bogus=1 ccl.defaults.n_slots=0; do
    "$KB" topo --set "$s" > /dev/null 2> "$tmp/e4"
    check "topo --set $s exits 2" $(( $? != 2 ))
    grep -q "^kernbench topo: --set $s: topo does not use the collectives configuration" "$tmp/e4"
    check "topo --set $s message" $?
done
"$KB" topo --help | grep -q "usage: kernbench topo"
check "topo --help" $?

# --- parameters in the record: exactly what `config --diff` says --set changed
sets=(--set sip.cube_mesh=2x2 --set fabric.packet_bytes=512 --set pe.gemm.clock_ghz=1.5)
"$KB" topo --json > "$tmp/p0.json" && "$KB" topo "${sets[@]}" --json > "$tmp/p1.json"
check "topo --json with and without --set" $?
"$KB" config --diff "${sets[@]}" > "$tmp/diff.txt"
python3 - "$tmp/p0.json" "$tmp/p1.json" "$tmp/diff.txt" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["parameters"]
b = json.load(open(sys.argv[2]))["parameters"]
assert list(a) == list(b), "the same paths in the same order"
changed = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
want = {}
for line in open(sys.argv[3]):
    path, rest = line.rstrip("\n").split(": ", 1)
    old, new = rest.split(" -> ")
    want[path] = (old, new)
assert changed == want, (changed, want)
assert b["sip.cube_mesh"] == "2x2"
PY
check "topo's parameters differ from the built-in ones exactly where config --diff says" $?

# --- list
"$KB" list > "$tmp/l.txt"
check "list exits 0" $?
for c in h2d d2h pe-local-hbm pe-same-cube-hbm pe-remote-cube-hbm pe-remote-sip-hbm \
    pe-tcm-to-tcm pe-sram; do
    grep -Eq "^  $c " "$tmp/l.txt"; check "list names probe case $c" $?
done
grep -Eq "^  ring_allreduce " "$tmp/l.txt"; check "list names the collective algorithms" $?
"$KB" list --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["probe_cases"][0] == "h2d"'
check "list --json" $?
"$KB" list --bogus > /dev/null 2>&1
check "list unknown option exits 2" $(( $? != 2 ))

exit $fail
