#!/usr/bin/env bash
# plugin.sh — a plug-in bench may call any public kb_/tl_ function, not only
# those the kernbench executable uses itself: builds tests/cli/plugin_api.c
# (tl_exp2, kb_tensor_describe, kb_busiest_links, the inter-PE queue
# functions) against the in-tree headers and runs it; then the collective
# example examples/user_ccl (a registered all-reduce kernel of its own) and
# the pipeline example examples/pipeline (stages on host ranks) and the
# expert-parallel one examples/moe (all-to-all).
# usage: plugin.sh KERNBENCH SOURCE_DIR
set -u
kb=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cc -O2 -shared -fPIC -I"$src/include" "$src/tests/cli/plugin_api.c" -o "$tmp/api.so" \
    2>"$tmp/err" || fail "plug-in build: $(cat "$tmp/err")"
"$kb" run --bench "$tmp/api.so" >"$tmp/out" 2>&1 || fail "plug-in run: $(cat "$tmp/out")"
grep -q "^bench          plugin_api" "$tmp/out" || fail "report does not name the plug-in"
grep -q "result         PASS" "$tmp/out" || fail "plug-in checks failed: $(cat "$tmp/out")"

cc -O2 -shared -fPIC -I"$src/include" "$src/examples/user_ccl/pass_allreduce.c" -o "$tmp/pass.so" \
    2>"$tmp/err" || fail "collective plug-in build: $(cat "$tmp/err")"
"$kb" run --bench "$tmp/pass.so" --opt world=8 --opt bytes=64KiB --json "$tmp/p.json" \
    >"$tmp/out" 2>&1 || fail "collective plug-in run: $(cat "$tmp/out")"
python3 - "$tmp/p.json" <<'EOF' || fail "collective plug-in report: $(cat "$tmp/p.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["pass"] and [c["name"] for c in d["checks"]] == ["pass_ring", "ring_allreduce"], d["checks"]
f = d["figures"]
# (p - 1) N bytes per rank against 2 (p - 1) / p N: passing is slower at 8 ranks
assert f["pass_us"] > 2 * f["ring_us"] > 0, f
EOF
# the pipeline example: stages on host ranks overlap their kernels while two of
# them pass a tensor, so 4 stages take well under twice the time per
# micro-batch of 2 (without the overlap they took 1.76 times as long); and
# transfers of different pairs of stages overlap, so 8 stages take well under
# twice the time per micro-batch of 4 (1.80 times when they went one at a time)
cc -O2 -shared -fPIC -I"$src/include" "$src/examples/pipeline/pipeline.c" -o "$tmp/pipe.so" \
    2>"$tmp/err" || fail "pipeline plug-in build: $(cat "$tmp/err")"
for s in 2 4 8; do
    "$kb" run --bench "$tmp/pipe.so" --opt stages=$s --json "$tmp/pipe$s.json" >"$tmp/out" 2>&1 ||
        fail "pipeline plug-in run, $s stages: $(cat "$tmp/out")"
done
python3 - "$tmp/pipe2.json" "$tmp/pipe4.json" "$tmp/pipe8.json" <<'EOF2' || fail "pipeline report: $(cat "$tmp/pipe8.json")"
import json, sys
two, four, eight = (json.load(open(p)) for p in sys.argv[1:4])
assert two["pass"] and four["pass"] and eight["pass"], (two["checks"], four["checks"], eight["checks"])
t2, t4, t8 = (r["figures"]["per_micro_batch"] for r in (two, four, eight))
assert 0 < t4 < 1.5 * t2, (t2, t4)
assert t8 < 1.5 * t4, (t4, t8)
EOF2
# the expert-parallel example: tokens go to their experts and back through two
# all-to-alls (even routing, and hashed routing with kb_all_to_all_v); every
# rank's tokens come back exact, and the combine, which moves the same bytes
# over the queues the dispatch installed, takes no longer than it
cc -O2 -shared -fPIC -I"$src/include" "$src/examples/moe/moe.c" -o "$tmp/moe.so" \
    2>"$tmp/err" || fail "moe plug-in build: $(cat "$tmp/err")"
for e in 2 4; do
    "$kb" run --bench "$tmp/moe.so" --opt experts=$e --opt capacity=16 --json "$tmp/moe$e.json" \
        >"$tmp/out" 2>&1 || fail "moe plug-in run, $e experts: $(cat "$tmp/out")"
done
"$kb" run --bench "$tmp/moe.so" --opt experts=4 --opt capacity=16 --opt routing=hash \
    --json "$tmp/moeh.json" >"$tmp/out" 2>&1 || fail "moe plug-in run, hashed: $(cat "$tmp/out")"
python3 - "$tmp/moe2.json" "$tmp/moe4.json" "$tmp/moeh.json" <<'EOF3' || fail "moe report: $(cat "$tmp/moe4.json")"
import json, sys
for p in sys.argv[1:4]:
    d = json.load(open(p))
    assert d["pass"], d["checks"]
    f = d["figures"]
    assert 0 < f["combine"] <= f["dispatch"], f
EOF3
# a plug-in built against another bench ABI, or one from before the ABI
# was recorded, is refused with both versions named (exit 2, nothing run)
cat > "$tmp/abi.c" <<'EOC'
#include <kernbench/bench.h>
static int run(kb_machine *m, kb_bench_opts *o, kb_bench_result *r) { return 0; }
#ifdef ABI
__attribute__((visibility("default"))) const unsigned kb_bench_plugin_abi = ABI;
#endif
__attribute__((visibility("default"))) const kb_bench kb_bench_plugin = {"abi", "x", 0, 0, run};
EOC
cc -shared -fPIC -I"$src/include" -DABI=999 "$tmp/abi.c" -o "$tmp/abi999.so" || fail "abi build"
cc -shared -fPIC -I"$src/include" "$tmp/abi.c" -o "$tmp/abinone.so" || fail "abi build (none)"
"$kb" run --bench "$tmp/abi999.so" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a plug-in of another ABI should exit 2"
grep -q "built with bench ABI 999, this kernbench has bench ABI [0-9]*: rebuild" "$tmp/err" ||
    fail "ABI mismatch message: $(cat "$tmp/err")"
"$kb" run --bench "$tmp/abinone.so" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a plug-in without an ABI version should exit 2"
grep -q "no bench ABI version" "$tmp/err" || fail "missing ABI message: $(cat "$tmp/err")"
echo "plugin.sh: ok"
