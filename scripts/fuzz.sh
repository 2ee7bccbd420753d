#!/bin/sh
# fuzz.sh BUILD_DIR SECONDS — runs every libFuzzer target of BUILD_DIR
# (fuzz_NAME, built with -DKB_FUZZ=ON by clang) for SECONDS each, seeded
# with fuzz/corpus/NAME (read only: new inputs go to a scratch directory).
# Fails on the first finding (crash, leak, timeout, out-of-memory,
# undefined behaviour: the targets do not recover from any) and leaves the
# input that found it in BUILD_DIR/fuzz-findings. Prints one line per
# target: executions, executions per second, coverage and features reached.
set -eu
bd=$1
secs=$2
src=$(cd "$(dirname "$0")/.." && pwd)
found="$bd/fuzz-findings"
mkdir -p "$found"
status=0
for t in "$bd"/fuzz_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    corpus="$src/fuzz/corpus/${name#fuzz_}"
    [ -d "$corpus" ] || { echo "fuzz: no corpus $corpus for $name" >&2; exit 1; }
    scratch=$(mktemp -d)
    log="$bd/$name.log"
    if OPENBLAS_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 "$t" -max_total_time="$secs" \
        -timeout=20 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
        -artifact_prefix="$found/$name-" "$scratch" "$corpus" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
        ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1)
        echo "fuzz $name: ${secs} s, $runs executions ($rate/s), $cov, $ft, no finding"
    else
        echo "fuzz $name: FINDING (log $log, input in $found):" >&2
        grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -20 >&2
        status=1
    fi
    rm -rf "$scratch"
done
exit $status
