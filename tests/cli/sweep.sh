#!/bin/bash
# kernbench sweep: every point's record equals the single run of its own
# command line; --jobs 1 and 2 write identical files; a failing point is
# reported and the others stand; --resume completes an interrupted sweep
# running only the missing points; the CSV carries units in its header;
# --report holds the CSV's table.
# usage: sweep.sh KERNBENCH_BINARY SOURCE_DIR
set -u
KB=$1
SRC=$2
. "$SRC/tests/support/cli.bash"
. "$SRC/tests/support/record.bash"

probe=(probe --sweep case=h2d,pe-sram,pe-remote-cube-hbm --sweep bytes=4KiB..16KiB*2)
run=(run --bench ccl_allreduce --set ccl.defaults.n_slots=8 --sweep world=2,4 --sweep bytes=4KiB,6,8KiB)

# same_as_single FILE: each line against the command it records, run alone
same_as_single() {
    local n=0 line
    while IFS= read -r line; do
        n=$((n + 1))
        printf '%s\n' "$line" > "$tmp/point.json"
        mapfile -t cmd < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["command_line"][1:]))' "$tmp/point.json")
        "$KB" "${cmd[@]}" --json "$tmp/single.json" > /dev/null 2>&1
        local st=$?
        [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$tmp/point.json")" = $st ]
        check "$1 point $n: the status of the single run ($st)" $?
        [ $st -eq 2 ] && continue # a usage error writes no record
        cmp -s <(record_minus "$tmp/point.json" command_line options.json point status error unit_of.status) \
            <(record_minus "$tmp/single.json" command_line options.json)
        check "$1 point $n equals its single run (${cmd[*]})" $?
    done < "$2"
    [ $n -gt 0 ]; check "$1: some points" $?
}

"$KB" sweep "${probe[@]}" --jobs 1 --json "$tmp/p1.jsonl" --csv "$tmp/p1.csv" 2> "$tmp/err"
check "probe sweep exits 0: $(cat "$tmp/err")" $?
[ "$(wc -l < "$tmp/p1.jsonl")" -eq 9 ]; check "3 cases x 3 sizes = 9 records" $?
grep -q "9 points: 9 run, 0 resumed, 0 failed" "$tmp/err"; check "probe sweep summary" $?
same_as_single probe "$tmp/p1.jsonl"
"$KB" sweep "${probe[@]}" --jobs 2 --json "$tmp/p2.jsonl" --csv "$tmp/p2.csv" 2> /dev/null
cmp -s "$tmp/p1.jsonl" "$tmp/p2.jsonl"; check "probe: --jobs 1 and 2 give the same JSON lines" $?
cmp -s "$tmp/p1.csv" "$tmp/p2.csv"; check "probe: --jobs 1 and 2 give the same CSV" $?
head -1 "$tmp/p1.csv" | grep -q '^case,bytes,status,error,.*latency_ps \[ps\],.*eff_gbs \[GB/s\]'
check "CSV header: axes, then figures with units: $(head -1 "$tmp/p1.csv")" $?
[ "$(sed -n 2p "$tmp/p1.csv" | cut -d, -f1-3)" = "h2d,4096,0" ]; check "first CSV row is the first point" $?
[ "$(sed -n 4p "$tmp/p1.csv" | cut -d, -f1-2)" = "h2d,16384" ]; check "the last axis varies fastest" $?

# --report: the page carries the CSV's table (docs/web.md); a path that
# cannot be written is a usage error before any point runs
"$KB" sweep "${probe[@]}" --jobs 2 --json "$tmp/p3.jsonl" --report "$tmp/p3.html" 2> /dev/null
check "probe sweep with --report exits 0" $?
python3 - "$tmp/p3.html" "$tmp/p1.csv" <<'PY'
import csv, html, json, re, sys
page = open(sys.argv[1]).read()
data = json.loads(re.search(r'id="kb-data">(.*?)</script>', page, re.S).group(1))
assert data["kind"] == "sweep" and data["machine"] is None, data["kind"]
t = data["sweep"]
rows = list(csv.reader(open(sys.argv[2])))
head = [c["name"] + (" [%s]" % c["unit"] if c["unit"] else "") for c in t["columns"]]
assert head == rows[0], (head, rows[0])
assert [[c if c is not None else "" for c in r] for r in t["rows"]] == rows[1:]
assert [a["key"] for a in t["axes"]] == ["case", "bytes"]
assert t["axes"][1]["values"] == ["4096", "8192", "16384"], t["axes"][1]
assert data["result"]["points"] == 9 and data["result"]["failed"] == 0
PY
check "the sweep report holds the CSV's table and the axes" $?
"$KB" sweep "${probe[@]}" --report /nonexistent-dir/s.html > /dev/null 2> "$tmp/err"
[ $? -eq 2 ]; check "--report to a missing directory is a usage error" $?
grep -q "/nonexistent-dir/s.html" "$tmp/err"; check "which names the path: $(cat "$tmp/err")" $?

"$KB" sweep "${run[@]}" --jobs 2 --json "$tmp/r2.jsonl" --csv "$tmp/r2.csv" 2> "$tmp/err"
[ $? -eq 1 ]; check "a sweep with a failing point exits 1" $?
grep -q "point 1 .*failed: .*bytes=6: not a multiple of 4" "$tmp/err"; check "the failing point is reported: $(cat "$tmp/err")" $?
grep -q "6 points: 6 run, 0 resumed, 2 failed" "$tmp/err"; check "run sweep summary" $?
python3 - "$tmp/r2.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 6, len(recs)
for r in recs:
    bad = r["point"]["bytes"] == "6"
    assert (r["status"] != 0) == bad, r["point"]
    assert bad == (r["error"] is not None), r["point"]
    if not bad:
        assert r["pass"] and r["sim_ps"] > 0 and r["bench_options"]["world"] == r["point"]["world"]
        assert r["sets"] == ["ccl.defaults.n_slots=8"]
PY
check "a failing point leaves the others intact" $?
same_as_single run "$tmp/r2.jsonl"
"$KB" sweep "${run[@]}" --jobs 1 --json "$tmp/r1.jsonl" --csv "$tmp/r1.csv" 2> /dev/null
cmp -s "$tmp/r1.jsonl" "$tmp/r2.jsonl"; check "run: --jobs 1 and 2 give the same JSON lines" $?
cmp -s "$tmp/r1.csv" "$tmp/r2.csv"; check "run: --jobs 1 and 2 give the same CSV" $?

# An interrupted sweep: 4 whole records and half of the fifth.
head -4 "$tmp/p1.jsonl" > "$tmp/cut.jsonl"
sed -n 5p "$tmp/p1.jsonl" | head -c 100 >> "$tmp/cut.jsonl"
"$KB" sweep "${probe[@]}" --jobs 2 --resume "$tmp/cut.jsonl" --json "$tmp/cut.jsonl" \
    --csv "$tmp/cut.csv" 2> "$tmp/err"
check "resumed sweep exits 0: $(cat "$tmp/err")" $?
grep -q "9 points: 5 run, 4 resumed, 0 failed" "$tmp/err"; check "resume runs only the 5 missing points: $(cat "$tmp/err")" $?
cmp -s "$tmp/cut.jsonl" "$tmp/p1.jsonl"; check "the resumed file equals the uninterrupted one" $?
cmp -s "$tmp/cut.csv" "$tmp/p1.csv"; check "the resumed CSV equals the uninterrupted one" $?
"$KB" sweep "${probe[@]}" --resume "$tmp/p1.jsonl" --json "$tmp/again.jsonl" 2> "$tmp/err"
grep -q "9 points: 0 run, 9 resumed" "$tmp/err"; check "a complete file: nothing runs again" $?

# Usage errors: one line each.
for bad in "run --sweep wrld=2" "run --bench ccl_allreduce --sweep wrld=2" "prob --sweep x=1" \
    "probe --sweep bytes=1..8*1" "probe --case h2d --sweep case=d2h" "probe" \
    "probe --sweep bytes=1 --jobs 0" "probe --sweep bytes=1 --jobs 010x"; do
    "$KB" sweep $bad > /dev/null 2> "$tmp/err"
    [ $? -eq 2 ]; check "sweep $bad exits 2" $?
    [ "$(wc -l < "$tmp/err")" -eq 1 ]; check "sweep $bad: one line: $(cat "$tmp/err")" $?
done
"$KB" sweep run --bench ccl_allreduce --sweep wrld=2 2>&1 | grep -q "did you mean 'world'"
check "a mistyped axis gets the closest name" $?

exit $fail
