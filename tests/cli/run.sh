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

# list shows the benches.
"$kb" list >"$tmp/out" || fail "list"
for b in qkv_gemm qkv_gemm_multi_pe va_offset vector_add softmax matmul layernorm ccl_allreduce; do
    grep -q "^  $b " "$tmp/out" || fail "list lacks $b"
done

# Plug-in: build the example against the in-tree headers and run it.
cc -O2 -shared -fPIC -I"$src/include" "$src/examples/user_bench/scale.c" -o "$tmp/scale.so" \
    2>"$tmp/err" || fail "plug-in build: $(cat "$tmp/err")"
"$kb" run --bench "$tmp/scale.so" --opt alpha=0.5 >"$tmp/out" 2>&1 ||
    fail "plug-in run: $(cat "$tmp/out")"
grep -q "^bench          scale" "$tmp/out" || fail "plug-in report names the bench"
grep -q "PASS" "$tmp/out" || fail "plug-in run prints no PASS"
echo "run.sh: ok"
