#!/usr/bin/env bash
# fidelity.sh — the flow model's error against the packet model, as the
# tables of docs/fidelity.md: probe cases (alone and with --contend 4), the
# collective benches over ranks x sizes x algorithm x buffer kind (timing
# only: --no-data, which gives the same times), the kernel benches and
# tp_mlp (with data: the checks must come out the same).
# usage: scripts/fidelity.sh [KERNBENCH] > docs/fidelity-tables.md
#   KERNBENCH: the kernbench binary (default build/kernbench)
#   FIDELITY_QUICK=1: ranks 2, 8, 64 and 64 KiB / 1 MiB only (a few minutes)
set -u
kb=${1:-build/kernbench}
[ -x "$kb" ] || { echo "fidelity.sh: no kernbench at '$kb' (build first)" >&2; exit 2; }
quick=${FIDELITY_QUICK:-0}

# run ARGS...: "flow_us packet_us error_% flow_wall_s packet_wall_s"
cmp_run() {
    "$kb" run "$@" --fabric flow --compare packet 2>/dev/null | awk '
        /^  simulated/ { f = $2; p = $4; e = $6 }
        /^  wall/      { fw = $2; pw = $4 }
        END { if (f == "") exit 1; printf "%s %s %s %s %s\n", f, p, e, fw, pw }'
}

row() { # label result
    if [ -n "$2" ]; then
        set -- "$1" $2
        printf "| %s | %s | %s | %s %% | %s | %s |\n" "$1" "$3" "$2" "$4" "$6" "$5"
    else
        printf "| %s | failed | | | | |\n" "$1"
    fi
}

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
echo "## Collectives (timing only, --no-data)"
echo
echo "| bench | algorithm | buffer | ranks | bytes/rank | packet us | flow us | error | packet wall s | flow wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
if [ "$quick" = 1 ]; then ranks="2 8 64"; sizes="65536 1048576"; else ranks="2 8 16 64 128 256"; sizes="65536 1048576 4194304"; fi
coll() { # bench algorithm buffer
    for w in $ranks; do
        for s in $sizes; do
            r=$(cmp_run --no-data --bench "$1" --opt algorithm="$2" --opt buffer="$3" --opt world=$w --opt bytes=$s)
            if [ -n "$r" ]; then
                set -- "$1" "$2" "$3" $r
                printf "| %s | %s | %s | %s | %s | %s | %s | %s %% | %s | %s |\n" "$1" "$2" "$3" "$w" "$s" "$5" "$4" "$6" "$8" "$7"
                set -- "$1" "$2" "$3"
            else
                printf "| %s | %s | %s | %s | %s | failed | | | | |\n" "$1" "$2" "$3" "$w" "$s"
            fi
        done
    done
}
for alg in ring_allreduce mesh_allreduce tree_allreduce; do
    for buf in tcm sram hbm; do coll ccl_allreduce $alg $buf; done
done
for b in "ccl_reduce_scatter ring_reduce_scatter" "ccl_all_gather ring_all_gather" \
         "ccl_broadcast ring_broadcast" "ccl_reduce ring_reduce" "ccl_all_to_all ring_all_to_all"; do
    set -- $b
    for buf in tcm sram hbm; do coll "$1" "$2" "$buf"; done
done

echo
echo "## Kernel benches and tp_mlp (with data; the checks are the same in both models)"
echo
echo "| bench | packet us | flow us | error | packet wall s | flow wall s |"
echo "|---|---|---|---|---|---|"
for b in qkv_gemm qkv_gemm_multi_pe va_offset vector_add softmax matmul layernorm tp_mlp; do
    row "$b" "$(cmp_run --bench $b)"
done
