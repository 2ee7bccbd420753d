#!/usr/bin/env bash
# fidelity.sh — the flow model's error against the packet model, as the
# tables of docs/fidelity.md: probe cases (alone and with --contend 4), the
# collective benches over ranks x sizes x algorithm x buffer kind (timing
# only: --no-data, which gives the same times), the kernel benches and
# tp_mlp (with data: the checks must come out the same), the calibrated
# rings (long flat rings under the flow model, against the packet model and
# against the flow model message by message, fabric.ring_warmup=0), and a
# summary against the bounds of docs/fidelity.md.
# usage: scripts/fidelity.sh [--full] [--timeout SECONDS] [--only TABLE] [KERNBENCH] > tables.md
#   KERNBENCH: the kernbench binary (default build/kernbench)
#   (default)  ranks 2, 8, 64; 64 KiB and 1 MiB per rank
#   --full     ranks 2, 8, 16, 64, 128, 256; 64 KiB, 1 MiB and 4 MiB per rank
#              (many hours on one core: the packet model's 256-rank rows at
#              4 MiB take minutes each, the all-gather's far longer)
#   --timeout SECONDS  give up a row after SECONDS of wall time (both models
#              together, and the calibrated rows' third run too; it is
#              printed as "timeout"); default: no limit
#   --only TABLE  only one table group: probe, collectives, kernels or
#              calibrated (the summary then covers that group)
# Rows are printed as they finish, so a run cut short still gives a valid
# table of what it measured. FIDELITY_QUICK=1 (older spelling) is the default.
set -u
full=0
limit=0
only=
kb=build/kernbench
while [ $# -gt 0 ]; do
    case "$1" in
    --full) full=1 ;;
    --timeout)
        shift
        limit=${1:-}
        case "$limit" in '' | *[!0-9]*) echo "fidelity.sh: --timeout needs whole seconds, got '$limit'" >&2; exit 2 ;; esac ;;
    --only)
        shift
        only=${1:-}
        case "$only" in probe | collectives | kernels | calibrated) ;; *) echo "fidelity.sh: --only needs probe, collectives, kernels or calibrated, got '$only'" >&2; exit 2 ;; esac ;;
    --help | -h) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "fidelity.sh: unknown option '$1' (expected --full, --timeout SECONDS, --only TABLE or a kernbench path)" >&2; exit 2 ;;
    *) kb=$1 ;;
    esac
    shift
done
[ -x "$kb" ] || { echo "fidelity.sh: no kernbench at '$kb' (build first)" >&2; exit 2; }
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
want() { [ -z "$only" ] || [ "$only" = "$1" ]; }

# run ARGS...: "flow_us packet_us error_% flow_wall_s packet_wall_s", or
# "timeout", or nothing when the run failed
cmp_run() {
    local out rc
    if [ "$limit" -gt 0 ]; then
        out=$(timeout "$limit" "$kb" run "$@" --fabric flow --compare packet 2>/dev/null)
        rc=$?
        [ $rc -eq 124 ] && { echo timeout; return; }
    else
        out=$("$kb" run "$@" --fabric flow --compare packet 2>/dev/null)
    fi
    printf '%s\n' "$out" | awk '
        /^  simulated/ { f = $2; p = $4; e = $6 }
        /^  wall/      { fw = $2; pw = $4 }
        END { if (f == "") exit 1; printf "%s %s %s %s %s\n", f, p, e, fw, pw }'
}

if want probe; then
echo "## Probe cases (64 KiB)"
echo
echo "| case | packet ns | flow ns | error | packet ns, 4 together | flow ns, 4 together | error |"
echo "|---|---|---|---|---|---|---|"
"$kb" probe --fabric flow --compare packet --contend 4 2>/dev/null | awk '
    /^compare:/ { on = 1; next }
    on && /^[a-z]/ && $1 != "case" && $1 != "wall" { c = $1; f = $3; p = $5; e = $7 }
    on && /^  contend/ { printf "| %s | %s | %s | %s | %s | %s | %s |\n", c, p, f, e, $6, $4, $8 }'
echo
echo "Sizes that are not a multiple of fabric.packet_bytes (the reads' short last packet):"
echo
echo "| case | bytes | packet ns | flow ns | error |"
echo "|---|---|---|---|---|"
for b in 1000 4097; do
    "$kb" probe --fabric flow --compare packet --bytes $b 2>/dev/null | awk -v b=$b '
        /^compare:/ { on = 1; next }
        on && /^[a-z]/ && $1 != "case" && $1 != "wall" { printf "| %s | %s | %s | %s | %s |\n", $1, b, $5, $3, $7 }'
done
echo
fi

if want collectives; then
echo "## Collectives (timing only, --no-data)"
echo
echo "| bench | algorithm | buffer | ranks | bytes/rank | packet us | flow us | error | packet wall s | flow wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
if [ "$full" = 1 ]; then ranks="2 8 16 64 128 256"; sizes="65536 1048576 4194304"; else ranks="2 8 64"; sizes="65536 1048576"; fi
coll() { # bench algorithm buffer [ranks]
    local w s r
    for w in ${4:-$ranks}; do
        for s in $sizes; do
            r=$(cmp_run --no-data --bench "$1" --opt algorithm="$2" --opt buffer="$3" --opt world=$w --opt bytes=$s)
            case "$r" in
            '') printf "| %s | %s | %s | %s | %s | failed | | | | |\n" "$1" "$2" "$3" "$w" "$s" ;;
            timeout) printf "| %s | %s | %s | %s | %s | timeout | | | | |\n" "$1" "$2" "$3" "$w" "$s" ;;
            *)
                printf "| %s | %s | %s | %s | %s | %s | %s | %s %% | %s | %s |\n" "$1" "$2" "$3" "$w" "$s" \
                    $(echo $r | awk '{ print $2, $1, $3, $5, $4 }') | tee -a "$rows" ;;
            esac
        done
    done
}
# The hierarchical algorithms are one group (the ring) up to one SIP's
# ranks: the quick run adds the 256 ranks of both SIPs for them.
hier_ranks=$ranks
[ "$full" = 1 ] || hier_ranks="$ranks 256"
for b in "ccl_allreduce ring_allreduce" "ccl_allreduce mesh_allreduce" \
         "ccl_allreduce tree_allreduce" "ccl_allreduce hier_allreduce" \
         "ccl_reduce_scatter ring_reduce_scatter" "ccl_reduce_scatter hier_reduce_scatter" \
         "ccl_all_gather ring_all_gather" "ccl_all_gather hier_all_gather" \
         "ccl_broadcast ring_broadcast" "ccl_reduce ring_reduce" "ccl_all_to_all ring_all_to_all"; do
    set -- $b
    w=$ranks
    case "$2" in hier_*) w=$hier_ranks ;; esac
    for buf in tcm sram hbm; do coll "$1" "$2" "$buf" "$w"; done
done
echo
fi

if want kernels; then
echo "## Kernel benches and tp_mlp (with data; the checks are the same in both models)"
echo
echo "| bench | packet us | flow us | error | packet wall s | flow wall s |"
echo "|---|---|---|---|---|---|"
for b in qkv_gemm qkv_gemm_multi_pe va_offset vector_add softmax matmul layernorm tp_mlp; do
    r=$(cmp_run --bench $b)
    case "$r" in
    '') printf "| %s | failed | | | | |\n" "$b" ;;
    timeout) printf "| %s | timeout | | | | |\n" "$b" ;;
    *) set -- "$b" $r; printf "| %s | %s | %s | %s %% | %s | %s |\n" "$1" "$3" "$2" "$4" "$6" "$5" | tee -a "$rows" ;;
    esac
done
echo
fi

# cal_run ARGS...: "packet_us flow_us flow_err_% cal_us cal_err_% cal_vs_flow_%
# packet_wall_s flow_wall_s cal_wall_s", or "timeout", or nothing when a run
# failed. The packet model and the calibrated flow run together (--compare,
# the bench's own walls); the flow model message by message
# (fabric.ring_warmup=0) runs alone, its wall the whole process's (machine
# set-up included, about 0.01-0.02 s).
cal_run() {
    local out mbm rc t0 t1 left=0
    t0=$(date +%s%N)
    if [ "$limit" -gt 0 ]; then
        out=$(timeout "$limit" "$kb" run "$@" --fabric flow --compare packet 2>/dev/null)
        rc=$?
        [ $rc -eq 124 ] && { echo timeout; return; }
        left=$(( limit - ($(date +%s%N) - t0) / 1000000000 ))
        [ "$left" -gt 0 ] || { echo timeout; return; }
    else
        out=$("$kb" run "$@" --fabric flow --compare packet 2>/dev/null)
    fi
    t0=$(date +%s%N)
    if [ "$left" -gt 0 ]; then
        mbm=$(timeout "$left" "$kb" run "$@" --fabric flow --set fabric.ring_warmup=0 2>/dev/null)
        rc=$?
        [ $rc -eq 124 ] && { echo timeout; return; }
    else
        mbm=$("$kb" run "$@" --fabric flow --set fabric.ring_warmup=0 2>/dev/null)
    fi
    t1=$(date +%s%N)
    { printf '%s\n' "$out"; printf '%s\n' "$mbm" | sed 's/^/mbm /'; } | awk -v mw=$(( (t1 - t0) / 1000000 )) '
        /^  simulated/          { c = $2; p = $4; ce = $6 }
        /^  wall/               { cw = $2; pw = $4 }
        /^mbm simulated time/   { m = $4 }
        END {
            if (c == "" || m == "" || p + 0 <= 0 || m + 0 <= 0) exit 1
            printf "%s %s %+.2f %s %s %+.2f %s %.3f %s\n", p, m, 100 * (m - p) / p, c, ce,
                100 * (c - m) / m, pw, mw / 1000, cw
        }'
}

if want calibrated; then
echo "## Calibrated rings (flow model, timing only, --no-data)"
echo
echo "Long rings under the flow model (flat, and the hierarchical all-reduce's in each SIP) run a"
echo "warm-up message by message and extrapolate the rest (fabric.ring_warmup, default 16);"
echo "message by message: --set fabric.ring_warmup=0."
echo
echo "| bench | algorithm | buffer | ranks | bytes/rank | packet us | flow msg-by-msg us | error | flow calibrated us | error | vs msg-by-msg | packet wall s | msg-by-msg wall s | calibrated wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for c in "ccl_allreduce ring_allreduce tcm 128 1048576" "ccl_allreduce ring_allreduce tcm 128 2097152" \
         "ccl_allreduce ring_allreduce tcm 256 1048576" "ccl_allreduce ring_allreduce sram 256 1048576" \
         "ccl_allreduce ring_allreduce hbm 256 1048576" "ccl_allreduce ring_allreduce tcm 256 4194304" \
         "ccl_allreduce ring_allreduce hbm 256 4194304" \
         "ccl_reduce_scatter ring_reduce_scatter tcm 256 1048576" "ccl_reduce_scatter ring_reduce_scatter tcm 256 4194304" \
         "ccl_all_gather ring_all_gather tcm 256 4096" "ccl_all_gather ring_all_gather tcm 256 16384" \
         "ccl_allreduce hier_allreduce tcm 256 1048576"; do
    set -- $c
    r=$(cal_run --no-data --bench "$1" --opt algorithm="$2" --opt buffer="$3" --opt world="$4" --opt bytes="$5")
    case "$r" in
    '') printf "| %s | %s | %s | %s | %s | failed | | | | | | | | |\n" "$@" ;;
    timeout) printf "| %s | %s | %s | %s | %s | timeout | | | | | | | | |\n" "$@" ;;
    *)
        set -- "$@" $r
        printf "| %s | %s | %s | %s | %s | %s | %s | %s %% | %s | %s %% | %s %% | %s | %s | %s |\n" "$@" | tee -a "$rows" ;;
    esac
done
echo
echo "The statistics of the steps not run are scaled from the warm-up: the default all-reduce's"
echo "unit busy times and bytes by link class (the link bytes are the same in both models"
echo "message by message)."
echo
echo "| ranks | figure | packet | flow msg-by-msg | flow calibrated | calibrated vs msg-by-msg | calibrated vs packet |"
echo "|---|---|---|---|---|---|---|"
for w in 256 128; do
    a=(--no-data --bench ccl_allreduce --opt "world=$w")
    t=()
    [ "$limit" -gt 0 ] && t=(timeout "$limit")
    { "${t[@]}" "$kb" run "${a[@]}" 2>/dev/null | sed 's/^/p /'
      "${t[@]}" "$kb" run "${a[@]}" --fabric flow --set fabric.ring_warmup=0 2>/dev/null | sed 's/^/m /'
      "${t[@]}" "$kb" run "${a[@]}" --fabric flow 2>/dev/null | sed 's/^/c /'; } | awk -v w=$w '
        { r = $1; sub(/^[pmc] /, "") }
        /^unit/ { sec = "u"; next }
        /^link class/ { sec = "l"; next }
        /^busiest/ || NF == 0 { sec = ""; next }
        sec == "u" && ($1 == "DMA" || $1 == "MATH") { put(r, $1 " busy sum us", $2); put(r, $1 " busy max us", $3) }
        sec == "l" && NF == 2 && $1 != "PCIE" && $1 != "IO_NOC" { put(r, $1 " bytes", $2) }
        function put(r, k, v) { if (!(k in seen)) { seen[k] = 1; key[++n] = k } val[r, k] = v }
        function err(a, b) { return b == 0 ? (a == 0 ? "+0.00 %" : "") : sprintf("%+.2f %%", 100 * (a - b) / b) }
        END {
            for (i = 1; i <= n; i++) {
                k = key[i]
                if (!((("p", k) in val) && (("m", k) in val) && (("c", k) in val))) { printf "| %s | %s | failed | | | | |\n", w, k; continue }
                printf "| %s | %s | %s | %s | %s | %s | %s |\n", w, k, val["p", k], val["m", k], val["c", k],
                    err(val["c", k], val["m", k]), err(val["c", k], val["p", k])
            }
        }'
done
echo
fi

echo "## Summary"
echo
awk -F'|' '
    NF == 12 { e = $9; gsub(/[ %+]/, "", e); e += 0; n++
               if ($5 + 0 >= 8 && $6 + 0 >= 1048576) { bb++; if (e < 5 && e > -5) bb5++; if (e < 10 && e > -10) bb10++ }
               else { if (e < 5 && e > -5) o5++ } }
    NF == 8  { e = $5; gsub(/[ %+]/, "", e); e += 0; k++; if (e < 10 && e > -10) k10++ }
    NF == 16 { m = $9; c = $11; v = $12; gsub(/[ %+]/, "", m); gsub(/[ %+]/, "", c); gsub(/[ %+]/, "", v)
               m = m < 0 ? -m : m; c = c < 0 ? -c : c; v = v < 0 ? -v : v; r++
               if (c < 5) r5++; if (m > mm) mm = m; if (c > cm) cm = c; if (v > vm) vm = v }
    END {
        if (r) printf "- calibrated rings: %d rows, %d within 5 %% of the packet model; largest error against the packet model %.2f %% calibrated, %.2f %% message by message; largest difference calibrated against message by message %.2f %%\n", r, r5, cm, mm, vm
        if (only == "" || only == "collectives")
            printf "- collective rows measured: %d; bandwidth-bound (>= 1 MiB per rank, >= 8 ranks): %d, of them %d within 5 %% and %d within 10 %%; the other %d rows: %d within 5 %%\n", n, bb, bb5, bb10, n - bb, o5
        if (only == "" || only == "kernels")
            printf "- kernel benches and tp_mlp: %d, of them %d within 10 %%\n", k, k10
        if (only == "probe") print "- probe cases: the table above (no bounds summed up)"
    }' only="$only" "$rows"
