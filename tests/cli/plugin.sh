#!/usr/bin/env bash
# plugin.sh — a plug-in bench may call any public kb_/tl_ function, not only
# those the kernbench executable uses itself: builds tests/cli/plugin_api.c
# (tl_exp2, kb_tensor_describe, kb_busiest_links, the inter-PE queue
# functions) against the in-tree headers and runs it; then the collective
# example examples/user_ccl (a registered all-reduce kernel of its own).
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
echo "plugin.sh: ok"
