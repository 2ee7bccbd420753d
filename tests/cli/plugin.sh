#!/usr/bin/env bash
# plugin.sh — a plug-in bench may call any public kb_/tl_ function, not only
# those the kernbench executable uses itself: builds tests/cli/plugin_api.c
# (tl_exp2, kb_tensor_describe, kb_busiest_links, the inter-PE queue
# functions) against the in-tree headers and runs it.
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
echo "plugin.sh: ok"
