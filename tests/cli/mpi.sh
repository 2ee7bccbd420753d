#!/bin/bash
# kernbench sweep under mpirun: the points spread over 2 ranks give the same
# JSON lines and CSV as a local sweep, a failing point included; a build
# without MPI started by mpirun says how to get the MPI build.
# usage: mpi.sh KERNBENCH_BINARY SOURCE_DIR
set -u
KB=$1
SRC=$2
if [ "${KB_SANITIZE:-OFF}" = ON ]; then
    echo "mpi.sh: skipped: Open MPI's own allocations fail the leak checker"
    exit 77
fi
if ! command -v mpirun > /dev/null; then
    echo "mpi.sh: skipped: no mpirun (make test installs openmpi-bin)"
    exit 77
fi
. "$SRC/tests/support/cli.bash"
# root in a container: Open MPI asks for these; one machine, 2 cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
    OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

sweep=(sweep run --bench ccl_allreduce --sweep world=2,4 --sweep bytes=4KiB,6,8KiB,16KiB)
"$KB" "${sweep[@]}" --jobs 1 --json "$tmp/local.jsonl" --csv "$tmp/local.csv" 2> /dev/null
[ $? -eq 1 ]; check "local sweep with a failing point exits 1" $?

if "$KB" sweep --help | grep -q "built without MPI"; then
    mpirun --oversubscribe -np 2 "$KB" "${sweep[@]}" --json "$tmp/mpi.jsonl" > /dev/null 2> "$tmp/err"
    [ $? -ne 0 ]; check "a build without MPI refuses a 2-rank sweep" $?
    grep -q "built without MPI" "$tmp/err"; check "and says how to get the MPI build: $(cat "$tmp/err")" $?
    exit $fail
fi

mpirun --oversubscribe -np 2 "$KB" "${sweep[@]}" --json "$tmp/mpi.jsonl" --csv "$tmp/mpi.csv" \
    > /dev/null 2> "$tmp/err"
[ $? -eq 1 ]; check "mpirun -np 2 sweep exits 1 (a failing point): $(tail -3 "$tmp/err")" $?
grep -q "8 points: 8 run, 0 resumed, 2 failed" "$tmp/err"; check "rank 0 sums up every rank's points: $(cat "$tmp/err")" $?
cmp -s "$tmp/local.jsonl" "$tmp/mpi.jsonl"; check "mpirun -np 2 writes the local sweep's JSON lines" $?
cmp -s "$tmp/local.csv" "$tmp/mpi.csv"; check "mpirun -np 2 writes the local sweep's CSV" $?

# resumed over MPI: only the missing points run, the file is the same
head -3 "$tmp/local.jsonl" > "$tmp/cut.jsonl"
mpirun --oversubscribe -np 2 "$KB" "${sweep[@]}" --resume "$tmp/cut.jsonl" --json "$tmp/cut.jsonl" \
    > /dev/null 2> "$tmp/err"
grep -q "8 points: 5 run, 3 resumed" "$tmp/err"; check "resume over MPI: $(cat "$tmp/err")" $?
cmp -s "$tmp/local.jsonl" "$tmp/cut.jsonl"; check "resume over MPI completes the same file" $?
exit $fail
