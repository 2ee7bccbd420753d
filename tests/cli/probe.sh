#!/usr/bin/env bash
# probe.sh — `kernbench probe` end to end: every case reported, usage errors
# exit 2 with a clear message, runs are deterministic, --no-data gives the
# same timing, the sections requested appear.
# usage: probe.sh KERNBENCH SOURCE_DIR
set -u
kb=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$src/tests/support/record.bash"

cases="h2d d2h pe-local-hbm pe-same-cube-hbm pe-remote-cube-hbm pe-remote-sip-hbm pe-tcm-to-tcm pe-sram"

# Summary of every case, exit 0.
"$kb" probe >"$tmp/out" 2>"$tmp/err" || fail "probe exited $?: $(cat "$tmp/err")"
for c in $cases; do
    grep -q "^$c " "$tmp/out" || fail "summary lacks case $c"
done
grep -q "latency ns" "$tmp/out" || fail "summary lacks the latency column with its unit"

# Unknown case: exit 2, message names the case and lists the valid ones.
"$kb" probe --case pe-nowhere >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "unknown case should exit 2"
grep -q "unknown case 'pe-nowhere'" "$tmp/err" || fail "unknown case message: $(cat "$tmp/err")"
grep -q "pe-tcm-to-tcm" "$tmp/err" || fail "unknown case should list valid cases"

# Bad sizes and counts: exit 2.
for bad in "--bytes 0" "--bytes lots" "--contend 0" "--bytes"; do
    "$kb" probe $bad >/dev/null 2>"$tmp/err"
    [ $? -eq 2 ] || fail "'probe $bad' should exit 2"
    [ -s "$tmp/err" ] || fail "'probe $bad' should say why"
done
"$kb" probe --frobnicate >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown option should exit 2"

# A bad --set is bad input: exit 2, with the message.
"$kb" probe --set fabric.packet_bytes=zero >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "bad --set should exit 2"
grep -q "packet_bytes" "$tmp/err" || fail "bad --set message: $(cat "$tmp/err")"

# Sections.
"$kb" probe --case pe-remote-cube-hbm --route --sweep --contend 3 >"$tmp/out" 2>&1 ||
    fail "probe with every section failed: $(cat "$tmp/out")"
grep -q "^route: pe-remote-cube-hbm" "$tmp/out" || fail "no route section"
grep -q "UCIE" "$tmp/out" || fail "route lacks the UCIe hops"
grep -q "^sweep: pe-remote-cube-hbm" "$tmp/out" || fail "no sweep section"
grep -q "^   1048576 " "$tmp/out" || fail "sweep does not reach 1 MiB"
grep -q "K\*N/B bound" "$tmp/out" || fail "no contention bound"

# Determinism: the same run twice gives identical JSON.
args="--sweep --route --contend 2 --bytes 10000"
"$kb" probe $args --json "$tmp/a.json" >/dev/null || fail "json run 1"
"$kb" probe $args --json "$tmp/b.json" >/dev/null || fail "json run 2"
# (the records name their own --json file)
cmp -s <(record_minus "$tmp/a.json" command_line options.json) \
    <(record_minus "$tmp/b.json" command_line options.json) || fail "two identical runs differ"
grep -q '"case": "pe-sram"' "$tmp/a.json" || fail "json lacks a case"
grep -q '"latency_ps"' "$tmp/a.json" || fail "json lacks latency"

# --json with no file: JSON on stdout instead of tables.
"$kb" probe --case h2d --json >"$tmp/c.json" || fail "json to stdout"
head -c 1 "$tmp/c.json" | grep -q '{' || fail "json on stdout should start with {"

# --no-data: same timing.
"$kb" probe $args --no-data --json "$tmp/n.json" >/dev/null || fail "no-data run"
cmp -s <(record_minus "$tmp/n.json" command_line options no_data) \
    <(record_minus "$tmp/a.json" command_line options no_data) || fail "--no-data changes the timing"

# A machine without a second SIP skips that case when all run, fails when asked.
"$kb" probe --set system.sips=1 >"$tmp/out" 2>&1 || fail "one-SIP machine: $(cat "$tmp/out")"
grep -q "pe-remote-sip-hbm.*not supported" "$tmp/out" || fail "one-SIP machine should skip"
"$kb" probe --set system.sips=1 --case pe-remote-sip-hbm >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "asking for an impossible case should exit 1"
# probe has no collectives configuration: a ccl. setting is refused, not ignored.
for s in ccl.bogus=1 ccl.defaults.n_slots=0; do
    "$kb" probe --case h2d --set "$s" >/dev/null 2>"$tmp/err"
    [ $? -eq 2 ] || fail "probe --set $s should exit 2"
    grep -q "^kernbench probe: --set $s: probe does not use the collectives configuration" \
        "$tmp/err" || fail "probe --set $s message: $(cat "$tmp/err")"
done

# Fabric models: --fabric flow gives every case alone the packet model's
# latency; --compare prints both and the error; bad models are usage errors.
"$kb" probe --fabric flow --compare packet >"$tmp/out" 2>"$tmp/err" || fail "probe --fabric flow --compare packet exited $?: $(cat "$tmp/err")"
grep -q "^compare: flow against packet" "$tmp/out" || fail "--compare prints no comparison"
grep -q "^h2d .*+0.000%" "$tmp/out" || fail "h2d alone differs between the models: $(grep '^h2d' "$tmp/out")"
grep -q "^wall " "$tmp/out" || fail "--compare prints no wall times"
"$kb" probe --fabric fluid >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "unknown --fabric should exit 2"
grep -q "unknown fabric model 'fluid'; models: packet, flow" "$tmp/err" || fail "unknown --fabric message: $(cat "$tmp/err")"
"$kb" probe --compare packet >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--compare with the run's own model should exit 2"
grep -q "already uses the packet fabric model" "$tmp/err" || fail "same-model --compare message: $(cat "$tmp/err")"
echo "probe.sh: ok"
