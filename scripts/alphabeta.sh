#!/usr/bin/env bash
# alphabeta.sh — every collective algorithm's α-β prediction against its
# simulated span (kernel_span / alpha_beta, the benches' `ratio`), as the
# tables of docs/ccl.md: algorithms x ranks x bytes per rank x slots, timing
# only (--no-data, which gives the same times).
# usage: scripts/alphabeta.sh [--full] [--ranks "N ..."] [--set K=V ...] [KERNBENCH] > table.md
#   KERNBENCH: the kernbench binary (default build/kernbench)
#   (default)  ranks 2, 4, 8, 16; 1 MiB and 4 MiB per rank; 4 and 16 slots
#   --full     also 32 and 256 ranks and 64 KiB (the 256-rank rows take
#              minutes each)
#   --ranks L  only these world sizes (a space-separated list, e.g. "32"),
#              with the sizes of the set chosen
#   --set K=V  a machine or ccl key for every run (repeatable), e.g. two
#              SIPs of one cube: --set sip.cube_mesh=1x1 --ranks 16
# Last, the ring all-reduce with 4 slots and senders that poll, or sleep
# with pe.ipcq.wake_ns 0 (slots column "4, poll", "4, wake 0").
# Rows are printed as they finish; a row whose bench reports no prediction
# shows "-".
set -u
full=0
ranks=
kb=build/kernbench
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --full) full=1 ;;
    --ranks)
        ranks=${2:-}
        case "$ranks" in
        '' | *[!0-9\ ]*) echo "alphabeta.sh: --ranks needs world sizes, e.g. --ranks \"32\" (got '$ranks')" >&2; exit 2 ;;
        esac
        shift ;;
    --set)
        case "${2:-}" in
        ccl.defaults.n_slots=*) echo "alphabeta.sh: --set ccl.defaults.n_slots: the table sets the slots of each row (4 and 16)" >&2; exit 2 ;;
        ?*=*) extra+=(--set "$2") ;;
        *) echo "alphabeta.sh: --set needs KEY=VALUE, e.g. --set sip.cube_mesh=1x1 (got '${2:-}')" >&2; exit 2 ;;
        esac
        shift ;;
    --help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "alphabeta.sh: unknown option '$1' (expected --full, --ranks, --set or a kernbench path)" >&2; exit 2 ;;
    *) kb=$1 ;;
    esac
    shift
done
[ -x "$kb" ] || { echo "alphabeta.sh: no kernbench binary at '$kb' (build first, or pass its path)" >&2; exit 2; }
worlds="2 4 8 16"
sizes="1048576 4194304"
if [ "$full" = 1 ]; then worlds="2 4 8 16 32 256"; sizes="65536 1048576 4194304"; fi
if [ -n "$ranks" ]; then worlds=$ranks; fi
# bench:algorithm
rows="ccl_allreduce:ring_allreduce ccl_allreduce:ring_allreduce_sram ccl_allreduce:ring_allreduce_hbm
ccl_allreduce:mesh_allreduce ccl_allreduce:tree_allreduce ccl_allreduce:hier_allreduce
ccl_reduce_scatter:ring_reduce_scatter ccl_reduce_scatter:hier_reduce_scatter
ccl_all_gather:ring_all_gather ccl_all_gather:hier_all_gather ccl_broadcast:ring_broadcast
ccl_reduce:ring_reduce ccl_all_to_all:ring_all_to_all hello_send:hello_send"
fig() { awk -v k="$1" '$1 == k { print $2; exit }'; }
echo "| algorithm | ranks | bytes per rank | slots | simulated (µs) | predicted (µs) | ratio | bound |"
echo "|---|---|---|---|---|---|---|---|"
# one BENCH ALGO WORLD BYTES SLOTS LABEL [--set K=V]: one row, LABEL in the slots column
one() {
    local bench=$1 algo=$2 w=$3 b=$4 s=$5 label=$6
    shift 6
    local opts="--opt world=$w --opt bytes=$b" out span pred ratio bound
    [ "$bench" != hello_send ] && opts="$opts --opt algorithm=$algo"
    out=$("$kb" run --bench "$bench" $opts --set ccl.defaults.n_slots=$s ${extra[@]+"${extra[@]}"} "$@" --no-data 2>&1) || {
        echo "| $algo | $w | $b | $label | - | - | - | $(echo "$out" | tail -1 | cut -c1-80) |"
        return
    }
    span=$(echo "$out" | fig kernel_span)
    pred=$(echo "$out" | fig alpha_beta)
    ratio=$(echo "$out" | fig ratio)
    bound=$(echo "$out" | awk '$1 == "bound" || $1 == "rs_bound" || $1 == "ag_bound" { $1 = ""; sub(/^ /, ""); print; exit }')
    echo "| $algo | $w | $b | $label | ${span:--} | ${pred:--} | ${ratio:--} | ${bound:--} |"
}
for row in $rows; do
    bench=${row%%:*} algo=${row#*:}
    for w in $worlds; do
        for b in $sizes; do
            for s in 4 16; do
                one "$bench" "$algo" "$w" "$b" "$s" "$s"
            done
        done
    done
done
# the ring all-reduce's credit rule with senders that poll or wake at once
for w in $worlds; do
    for b in $sizes; do
        one ccl_allreduce ring_allreduce "$w" "$b" 4 "4, poll" --set ccl.defaults.backpressure=poll
        one ccl_allreduce ring_allreduce "$w" "$b" 4 "4, wake 0" --set pe.ipcq.wake_ns=0
    done
done
