#!/usr/bin/env bash
# run.sh — `kernbench run` end to end: the default bench passes, JSON
# parses and carries the figures, usage errors exit 2 listing the benches,
# --no-data keeps the simulated time, a plug-in builds and runs.
# usage: run.sh KERNBENCH SOURCE_DIR
set -u
kb=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# jget FILE EXPR: a value from a JSON file (python3 expression on d)
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# Default run: exit 0, PASS, the report's sections.
"$kb" run >"$tmp/out" 2>"$tmp/err" || fail "default run exited $?: $(cat "$tmp/err")"
grep -q "PASS" "$tmp/out" || fail "default run prints no PASS"
for s in "simulated time" "busy sum us" "link class" "TFLOP/s" "result         PASS"; do
    grep -q "$s" "$tmp/out" || fail "report lacks '$s'"
done
grep -q "^GEMM" "$tmp/out" || fail "report lacks the GEMM line"

# JSON parses and holds the checks and figures.
"$kb" run --bench vector_add --json "$tmp/v.json" >/dev/null || fail "json run"
python3 -m json.tool "$tmp/v.json" >/dev/null || fail "--json output does not parse"
[ "$(jget "$tmp/v.json" 'd["pass"]')" = True ] || fail "json pass is not true"
[ "$(jget "$tmp/v.json" 'd["checks"][0]["pass"]')" = True ] || fail "json check"
[ "$(jget "$tmp/v.json" 'd["sim_ps"] > 0')" = True ] || fail "json sim_ps"
[ "$(jget "$tmp/v.json" '"MATH" in d["units"]')" = True ] || fail "json units"
"$kb" run --json >"$tmp/s.json" || fail "json to stdout"
python3 -m json.tool "$tmp/s.json" >/dev/null || fail "--json on stdout does not parse"

# --json stays valid JSON whatever bytes a path holds: valid UTF-8 is kept,
# other bytes become U+FFFD.
mkdir -p "$tmp/t"
cp "$src/configs/topology.yaml" "$tmp/t/m"$'\xff'"é.yaml"
"$kb" run --bench vector_add --no-data --topology "$tmp/t/m"$'\xff'"é.yaml" --json >"$tmp/u.json" ||
    fail "run with a non-UTF-8 topology path"
python3 -c '
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))["machine"]["topology"]
assert t.endswith("/m\ufffd\u00e9.yaml"), t
' "$tmp/u.json" || fail "--json with a non-UTF-8 path is not valid JSON: $(cat "$tmp/u.json")"

# A directory given as an input file is named as one.
for c in "run --topology" "run --ccl" "list --ccl"; do
    "$kb" $c "$tmp" >/dev/null 2>"$tmp/err"
    [ $? -eq 2 ] || fail "$c DIR should exit 2"
    grep -q "$tmp: cannot read: Is a directory" "$tmp/err" || fail "$c DIR message: $(cat "$tmp/err")"
done
# A report that cannot be written is a failure, named as such.
if [ -w /dev/full ]; then
    for c in "run --bench vector_add --no-data" list "run --bench vector_add --no-data --json"; do
        "$kb" $c >/dev/full 2>"$tmp/err"
        [ $? -eq 1 ] || fail "$c >/dev/full should exit 1"
        grep -q "write error" "$tmp/err" || fail "$c >/dev/full message: $(cat "$tmp/err")"
    done
fi
# An unwritable --json FILE is reported before the simulation runs: the
# bench's own usage errors, found while it runs, never show.
"$kb" run --bench vector_add --opt block=3 --json "$tmp/no/such/dir.json" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "an unwritable --json FILE should exit 2"
grep -q "no/such/dir.json: cannot write" "$tmp/err" || fail "unwritable --json: $(cat "$tmp/err")"
grep -q "block" "$tmp/err" && fail "the bench ran before the --json FILE was checked"

# --trace: a Chrome trace of the run whose collective span is the report's
# collective time; an unwritable file exits 2 naming it, before the run.
"$kb" run --bench ccl_allreduce --opt world=8 --opt bytes=64KiB --trace "$tmp/t.json" \
    --json "$tmp/c.json" >/dev/null || fail "--trace run"
python3 - "$tmp/t.json" "$tmp/c.json" <<'PY' || fail "--trace file"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
run = json.load(open(sys.argv[2]))
spans = [e for e in ev if e["ph"] == "X"]
cats = {e["cat"] for e in spans}
assert {"DMA", "MATH", "program", "launch", "collective"} <= cats, cats
coll = [e for e in spans if e["cat"] == "collective"]
assert len(coll) == 1 and coll[0]["name"] == "all_reduce ring_allreduce", coll
assert sum(1 for e in spans if e["cat"] == "program") == 8
assert abs(coll[0]["dur"] - run["figures"]["collective"]) < 1e-5, (coll, run["figures"])
PY
# --trace-max: the same run with a 64 KiB limit stops recording with a note
# and the instant event, the file still JSON and the report's time unchanged.
"$kb" run --bench ccl_allreduce --opt world=8 --opt bytes=64KiB --trace "$tmp/tm.json" \
    --trace-max 64KiB --json "$tmp/cm.json" >/dev/null 2>"$tmp/err" || fail "--trace-max run"
grep -q "note: --trace .*tm.json reached its size limit (65536 bytes" "$tmp/err" ||
    fail "--trace-max note: $(cat "$tmp/err")"
python3 - "$tmp/tm.json" "$tmp/cm.json" "$tmp/c.json" "$tmp/t.json" <<'PY' || fail "--trace-max file"
import json, os, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
assert ev[-1]["name"] == "trace stopped: size limit of 65536 bytes reached", ev[-1]
assert os.path.getsize(sys.argv[1]) < os.path.getsize(sys.argv[4])
a, b = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
assert a["sim_ps"] == b["sim_ps"], (a["sim_ps"], b["sim_ps"])
PY
for bad in 0 -1 12QB 1.5GiB; do
    "$kb" run --bench vector_add --trace-max "$bad" >/dev/null 2>"$tmp/err"
    [ $? -eq 2 ] || fail "--trace-max $bad should exit 2"
    grep -q -- "--trace-max: expected a size above 0 (4096, 512MiB, 2GB) or 'none', got '$bad'" \
        "$tmp/err" || fail "--trace-max $bad: $(cat "$tmp/err")"
done
# --max-memory: a budget too small for the bench's tensors stops the run
# (exit 1) with the budget's message; a bad size is a usage error; none runs.
"$kb" run --bench vector_add --max-memory 1MiB >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "a run past --max-memory should exit 1"
grep -q "host memory budget exceeded: tensor data needs 2.00 MiB more .* of a budget of 1.00 MiB; raise it with --max-memory SIZE" \
    "$tmp/err" || fail "--max-memory message: $(cat "$tmp/err")"
"$kb" run --bench vector_add --max-memory 1 >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "--max-memory below an empty machine should exit 1"
grep -q "a host memory budget (max_memory, --max-memory) of 1 bytes is below the" "$tmp/err" ||
    fail "--max-memory 1: $(cat "$tmp/err")"
for bad in 0 lots -5MiB; do
    "$kb" run --bench vector_add --max-memory "$bad" >/dev/null 2>"$tmp/err"
    [ $? -eq 2 ] || fail "--max-memory $bad should exit 2"
    grep -q -- "--max-memory: expected a size above 0 (512MiB, 8GiB, 2GB) or 'none', got '$bad'" \
        "$tmp/err" || fail "--max-memory $bad: $(cat "$tmp/err")"
done
"$kb" run --bench vector_add --max-memory none >/dev/null || fail "--max-memory none"
"$kb" probe --case pe-local-hbm --max-memory 64KiB >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "a probe past --max-memory should exit 1"
grep -q "host memory budget exceeded" "$tmp/err" || fail "probe --max-memory: $(cat "$tmp/err")"
"$kb" run --bench vector_add --opt block=3 --trace "$tmp/no/such/t.json" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "an unwritable --trace FILE should exit 2"
grep -q "no/such/t.json: cannot write the trace" "$tmp/err" || fail "unwritable --trace: $(cat "$tmp/err")"
grep -q "block" "$tmp/err" && fail "the bench ran before the --trace FILE was checked"

# --no-data: same simulated time, checks skipped.
"$kb" run --bench softmax --no-data --json "$tmp/n.json" >/dev/null || fail "no-data run"
"$kb" run --bench softmax --json "$tmp/d.json" >/dev/null || fail "data run"
[ "$(jget "$tmp/n.json" 'd["sim_ps"]')" = "$(jget "$tmp/d.json" 'd["sim_ps"]')" ] ||
    fail "--no-data changes the simulated time"
[ "$(jget "$tmp/n.json" 'len(d["checks"])')" = 0 ] || fail "--no-data still checks"

# Usage errors: exit 2 with a message.
"$kb" run --bench no_such_bench >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "unknown bench should exit 2"
grep -q "unknown bench 'no_such_bench'" "$tmp/err" || fail "unknown bench message"
grep -q "qkv_gemm" "$tmp/err" || fail "unknown bench should list the benches"
"$kb" run --bench vector_add --opt blok=3 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "unknown --opt should exit 2"
grep -q "block" "$tmp/err" || fail "unknown --opt should list the options"
"$kb" run --opt novalue >/dev/null 2>&1
[ $? -eq 2 ] || fail "--opt without = should exit 2"
"$kb" run --device sip:99 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--device on a missing SIP should exit 2"
"$kb" run --frobnicate >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown option should exit 2"
"$kb" run --bench ./missing.so >/dev/null 2>&1
[ $? -eq 2 ] || fail "a missing plug-in should exit 2"

# --device sip:1 runs on the other SIP.
"$kb" run --bench qkv_gemm --device sip:1 >"$tmp/out" 2>&1 || fail "device sip:1: $(cat "$tmp/out")"

# ccl.* settings reach the collective configuration, checked like the topology's.
"$kb" run --bench ccl_allreduce --opt world=8 --opt bytes=8192 --set ccl.defaults.n_slots=8 \
    >"$tmp/out" 2>&1 || fail "ccl_allreduce with --set ccl.: $(cat "$tmp/out")"
grep -q "PASS" "$tmp/out" || fail "ccl_allreduce prints no PASS"
grep -q "^bus_bw" "$tmp/out" || fail "ccl_allreduce reports no bus bandwidth"
grep -q "^rs_bound *the " "$tmp/out" || fail "ccl_allreduce names no reduce-scatter bottleneck"
"$kb" run --bench ccl_allreduce --set ccl.defaults.n_slotz=8 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a misspelt ccl key should exit 2"
grep -q "did you mean 'n_slots'" "$tmp/err" || fail "a misspelt ccl key gets a hint"

# --ccl FILE: the user's ccl.yaml and its algorithms; --set ccl.* applies on
# top of it, and the bench's --opt algorithm on top of both.
cat >"$tmp/ccl.yaml" <<'EOF'
defaults:
  n_slots: 8
  algorithm: {all_reduce: my_ring}
algorithms:
  my_ring: {module: ring_allreduce, collective: all_reduce, topology: ring_1d, buffer_kind: sram}
EOF
ar="--bench ccl_allreduce --no-data --opt world=8 --opt bytes=65536"
"$kb" run --ccl "$tmp/ccl.yaml" $ar >"$tmp/out" 2>&1 || fail "run --ccl: $(cat "$tmp/out")"
grep -q "^algorithm *my_ring$" "$tmp/out" || fail "run --ccl does not run the file's default"
# figure NAME FILE: a bench figure from a --json report
figure() { jget "$2" "d['figures']['$1']"; }
"$kb" run $ar --json "$tmp/a4.json" >/dev/null || fail "ring, built-in slots"
"$kb" run $ar --set ccl.defaults.n_slots=16 --json "$tmp/a16.json" >/dev/null || fail "16 slots"
"$kb" run $ar --set ccl.defaults.n_slots=16 --opt algorithm=ring_allreduce \
    --json "$tmp/b16.json" >/dev/null || fail "16 slots, --opt algorithm"
[ "$(figure collective "$tmp/a4.json")" != "$(figure collective "$tmp/a16.json")" ] ||
    fail "n_slots does not change the all-reduce time: the comparison below proves nothing"
[ "$(figure collective "$tmp/a16.json")" = "$(figure collective "$tmp/b16.json")" ] ||
    fail "--opt algorithm drops the --set ccl.* overrides"
# --opt buffer goes to the algorithm that runs: here the file's my_ring (in
# sram), so sram changes nothing and hbm does.
"$kb" run --ccl "$tmp/ccl.yaml" $ar --json "$tmp/m.json" >/dev/null || fail "my_ring"
"$kb" run --ccl "$tmp/ccl.yaml" $ar --opt buffer=sram --json "$tmp/ms.json" >/dev/null ||
    fail "my_ring, buffer=sram"
"$kb" run --ccl "$tmp/ccl.yaml" $ar --opt buffer=hbm --json "$tmp/mh.json" >/dev/null ||
    fail "my_ring, buffer=hbm"
[ "$(figure collective "$tmp/m.json")" = "$(figure collective "$tmp/ms.json")" ] ||
    fail "buffer=sram changes my_ring, whose queues are in sram already"
[ "$(figure collective "$tmp/m.json")" != "$(figure collective "$tmp/mh.json")" ] ||
    fail "buffer=hbm does not reach my_ring"
"$kb" run --ccl "$tmp/ccl.yaml" $ar --opt algorithm=ring_allreduce >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "an algorithm the --ccl file lacks is a bad option value: exit 2"
grep -q "'ring_allreduce'" "$tmp/err" || fail "the missing algorithm is not named: $(cat "$tmp/err")"
"$kb" run $ar --opt algorithm=ring_alreduce >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a misspelt algorithm should exit 2"
grep -q "\-\-opt algorithm=ring_alreduce: .*did you mean 'ring_allreduce'" "$tmp/err" ||
    fail "misspelt algorithm message: $(cat "$tmp/err")"
printf 'defaults:\n  n_slots: [1\n' >"$tmp/bad.yaml"
"$kb" run --ccl "$tmp/bad.yaml" $ar >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a broken --ccl file should exit 2"
grep -q "bad.yaml:[0-9]*:[0-9]*: " "$tmp/err" || fail "no FILE:LINE:COL: $(cat "$tmp/err")"
"$kb" run --ccl "$tmp/none.yaml" $ar >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a missing --ccl file should exit 2"
grep -q "none.yaml: cannot open" "$tmp/err" || fail "missing file message: $(cat "$tmp/err")"

# A bench option value the bench cannot use is a usage error (exit 2) that
# names the option as typed.
# usage_opt TEXT ARGS...: run must exit 2 with TEXT in its message
usage_opt() {
    local want=$1
    shift
    "$kb" run --no-data "$@" >/dev/null 2>"$tmp/err"
    [ $? -eq 2 ] || fail "run $* should exit 2: $(cat "$tmp/err")"
    grep -qF -- "$want" "$tmp/err" || fail "run $*: message lacks '$want': $(cat "$tmp/err")"
}
usage_opt "--opt world=12" --bench ccl_allreduce --opt world=12
usage_opt "--opt bytes=6" --bench ccl_allreduce --opt bytes=6 --opt world=4
usage_opt "--opt world=2 --opt algorithm=mesh_allreduce" --bench ccl_allreduce \
    --opt algorithm=mesh_allreduce --opt world=2
# Settings that fit 2 ranks but not the default world fail in kb_init_process_group:
# said as such, not blamed on --opt world.
usage_opt "kb_init_process_group installs the default all_reduce over its default world" \
    --bench ccl_allreduce --set ccl.defaults.n_slots=1024 --opt buffer=sram --opt world=2
"$kb" run --no-data --bench ccl_allreduce --set ccl.defaults.n_slots=1024 \
    --set ccl.defaults.world_size=2 --opt buffer=sram --opt world=2 >"$tmp/out" 2>&1 ||
    fail "a default world of 2 ranks should fit: $(cat "$tmp/out")"
usage_opt "--opt block=3" --bench vector_add --opt block=3
usage_opt "--opt n=7" --bench vector_add --opt n=7
usage_opt "--opt bm=3" --bench matmul --opt bm=3
usage_opt "--opt dist=rows" --bench matmul --opt dist=rows
usage_opt "--opt dist=all" --bench matmul --opt dist=all --opt m=3
usage_opt "--opt rows=7" --bench softmax --opt rows=7
usage_opt "--opt rows=7" --bench layernorm --opt rows=7
usage_opt "--opt m=3" --bench qkv_gemm_multi_pe --opt m=3
usage_opt "--opt block=3" --bench va_offset --opt block=3
# Option values never reach the configuration as YAML: an algorithm is a
# plain name, buffer one of tcm, sram, hbm.
usage_opt "--opt algorithm=mesh_allreduce # x" --bench ccl_allreduce \
    --opt 'algorithm=mesh_allreduce # x'
usage_opt "--opt algorithm=tree_allreduce # x" --bench ccl_allreduce \
    --opt 'algorithm=tree_allreduce # x' --opt buffer=hbm
usage_opt "--opt algorithm=a.b" --bench ccl_allreduce --opt algorithm=a.b
usage_opt '--opt buffer="hbm"' --bench ccl_allreduce --opt buffer='"hbm"'
usage_opt "--opt buffer=hbm # x" --bench ccl_allreduce --opt 'buffer=hbm # x'
# The algorithm note carries the longest algorithm name (63 characters)
# whole; one character more is refused at its key in the file.
long=ring_$(printf 'x%.0s' $(seq 58))
cat >"$tmp/long.yaml" <<EOF
defaults:
  algorithm: {all_reduce: $long}
algorithms:
  $long: {module: ring_allreduce, collective: all_reduce, topology: ring_1d}
EOF
"$kb" run --ccl "$tmp/long.yaml" $ar >"$tmp/out" 2>&1 || fail "long algorithm name: $(cat "$tmp/out")"
grep -q "^algorithm *$long\$" "$tmp/out" ||
    fail "the algorithm note cuts a long name: $(grep ^algorithm "$tmp/out")"
"$kb" run --ccl "$tmp/long.yaml" $ar --opt buffer=hbm >"$tmp/out" 2>&1 ||
    fail "long algorithm name, buffer=hbm: $(cat "$tmp/out")"
sed "s/$long/${long}x/g" "$tmp/long.yaml" >"$tmp/longer.yaml"
"$kb" run --ccl "$tmp/longer.yaml" $ar >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a 64-character algorithm name should exit 2"
grep -q "longer.yaml:4:3: algorithms.${long}x: expected an algorithm name of 1 to 63" "$tmp/err" ||
    fail "a 64-character algorithm name: $(cat "$tmp/err")"
usage_opt "--opt algorithm=9ring" --bench ccl_allreduce --opt algorithm=9ring

# --device sip:1 puts a one-SIP world on SIP 1: same time, SIP 1's links.
"$kb" run $ar --device sip:1 --json "$tmp/d1.json" >/dev/null || fail "ccl_allreduce --device sip:1"
[ "$(jget "$tmp/d1.json" 'd["busiest_links"][0]["name"].split(".")[0]')" = sip1 ] ||
    fail "--device sip:1: the all-reduce did not run on SIP 1"
[ "$(figure collective "$tmp/d1.json")" = "$(figure collective "$tmp/a4.json")" ] ||
    fail "--device sip:1 changes the all-reduce time of a symmetric machine"

# list shows the benches and the collective algorithms (of --ccl FILE too).
"$kb" list >"$tmp/out" || fail "list"
for b in qkv_gemm qkv_gemm_multi_pe va_offset vector_add softmax matmul layernorm ccl_allreduce \
    ccl_reduce_scatter ccl_all_gather ccl_broadcast ccl_reduce ccl_all_to_all tp_mlp; do
    grep -q "^  $b " "$tmp/out" || fail "list lacks $b"
done
grep -Eq "^  ring_allreduce +all_reduce on ring_1d, module ring_allreduce, 4 x 4096 B slots in tcm \(default all_reduce\)$" \
    "$tmp/out" || fail "list does not describe ring_allreduce"
for a in mesh_allreduce tree_allreduce ring_reduce_scatter ring_all_gather ring_broadcast \
    ring_all_to_all ring_reduce ring_all_to_all_v hello_send; do
    grep -q "^  $a " "$tmp/out" || fail "list lacks algorithm $a"
done
"$kb" list --ccl "$tmp/ccl.yaml" --set ccl.algorithms.my_ring.n_slots=2 >"$tmp/out" ||
    fail "list --ccl"
grep -Eq "^  my_ring +all_reduce on ring_1d, module ring_allreduce, 2 x 4096 B slots in sram \(default all_reduce\)$" \
    "$tmp/out" || fail "list --ccl does not describe my_ring: $(cat "$tmp/out")"
grep -q "^  ring_allreduce " "$tmp/out" && fail "list --ccl still shows the built-in algorithms"
"$kb" list --json | python3 -c 'import json,sys; assert "ring_allreduce" in json.load(sys.stdin)["collective_algorithms"]' ||
    fail "list --json lacks the algorithms"
"$kb" list --json | python3 -c '
import json, sys
d = {a["name"]: a for a in json.load(sys.stdin)["collective_algorithm_details"]}
assert d["ring_allreduce"] == {"name": "ring_allreduce", "collective": "all_reduce",
    "topology": "ring_1d", "module": "ring_allreduce", "buffer_kind": "tcm", "n_slots": 4,
    "slot_size": 4096, "default_for": ["all_reduce"]}, d["ring_allreduce"]
assert d["tree_allreduce"]["topology"] == "tree" and d["tree_allreduce"]["default_for"] == []
' || fail "list --json: the algorithms' details"
# Module names (any text) are escaped in JSON; an algorithm name holding
# such characters is refused where it is written.
printf 'algorithms:\n  q: {module: "q\\"uote\\\\d", collective: all_reduce, topology: tree}\n' >"$tmp/q.yaml"
"$kb" list --ccl "$tmp/q.yaml" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["collective_algorithm_details"][0]["module"] == "q\"uote\\d", d
' || fail "list --json does not escape a module name with a quote and a backslash"
printf 'algorithms:\n  "q\\"uote": {module: m, topology: tree}\n' >"$tmp/q.yaml"
"$kb" list --ccl "$tmp/q.yaml" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "an algorithm name with a quote should exit 2"
grep -qF "q.yaml:2:3: algorithms.q\"uote: expected an algorithm name of 1 to 63 letters" "$tmp/err" ||
    fail "an algorithm name with a quote: $(cat "$tmp/err")"
"$kb" list --ccl "$tmp/bad.yaml" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "list with a broken --ccl file should exit 2"
grep -q "bad.yaml:[0-9]*:[0-9]*: " "$tmp/err" || fail "list: no FILE:LINE:COL: $(cat "$tmp/err")"
"$kb" list --set pe.dma.channels=3 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "list --set of a machine key should exit 2"
grep -q "expected ccl.KEY=VALUE" "$tmp/err" || fail "list --set message: $(cat "$tmp/err")"

# Plug-in: build the example against the in-tree headers and run it.
cc -O2 -shared -fPIC -I"$src/include" "$src/examples/user_bench/scale.c" -o "$tmp/scale.so" \
    2>"$tmp/err" || fail "plug-in build: $(cat "$tmp/err")"
"$kb" run --bench "$tmp/scale.so" --opt alpha=0.5 >"$tmp/out" 2>&1 ||
    fail "plug-in run: $(cat "$tmp/out")"
grep -q "^bench          scale" "$tmp/out" || fail "plug-in report names the bench"
grep -q "PASS" "$tmp/out" || fail "plug-in run prints no PASS"

# Fabric models: --compare runs the bench under both and prints per phase (tp_mlp on
# 8 PEs per rank: at its default 128 the two runs take minutes under a sanitizer build).
"$kb" run --bench tp_mlp --opt pes=8 --fabric flow --compare packet >"$tmp/cmp" 2>"$tmp/err" || fail "run --fabric flow --compare packet exited $?: $(cat "$tmp/err")"
grep -q "^compare  *flow  *packet" "$tmp/cmp" || fail "run --compare prints no comparison"
grep -q "^  all_reduce " "$tmp/cmp" || fail "run --compare prints no phase"
grep -q "checks       the same in both models" "$tmp/cmp" || fail "numbers differ between the models"
"$kb" run --bench tp_mlp --fabric packet --compare packet >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "run --compare with the run's own model should exit 2"
echo "run.sh: ok"
