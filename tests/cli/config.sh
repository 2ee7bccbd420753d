#!/bin/bash
# kernbench config: the resolved machine / ccl configuration as YAML loads
# back to the same configuration (the same hash in the records); --diff
# shows exactly what the settings changed.
# usage: config.sh KERNBENCH_BINARY SOURCE_DIR
set -u
KB=$1
SRC=$2
. "$SRC/tests/support/cli.bash"

# hash WHICH ARGS...: config_hash.WHICH of a run record with ARGS
hash() {
    local which=$1
    shift
    "$KB" run --bench vector_add --no-data "$@" --json 2> /dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["config_hash"][sys.argv[1]])' "$which"
}

sets=(--set pe.dma.channels=3 --set sip.cube_mesh=2x2 --set pe.gemm.clock_ghz=1.1)
"$KB" config "${sets[@]}" > "$tmp/m.yaml"
check "config exits 0" $?
grep -q "^  cube_mesh: 2x2$" "$tmp/m.yaml"; check "the YAML nests the set value" $?
a=$(hash machine "${sets[@]}")
b=$(hash machine --topology "$tmp/m.yaml")
c=$(hash machine)
[ -n "$a" ] && [ "$a" = "$b" ]; check "the YAML loads back to the same machine hash ($a, $b)" $?
[ "$a" != "$c" ]; check "the settings change the hash" $?
"$KB" config --topology "$tmp/m.yaml" > "$tmp/m2.yaml"
cmp -s "$tmp/m.yaml" "$tmp/m2.yaml"; check "config of its own output is the same YAML" $?

"$KB" config --ccl --set ccl.defaults.n_slots=16 --set ccl.algorithms.tree_allreduce.slot_size=8KiB \
    > "$tmp/c.yaml"
check "config --ccl exits 0" $?
a=$(hash ccl --set ccl.defaults.n_slots=16 --set ccl.algorithms.tree_allreduce.slot_size=8KiB)
b=$(hash ccl --ccl "$tmp/c.yaml")
[ -n "$a" ] && [ "$a" = "$b" ]; check "the ccl YAML loads back to the same ccl hash ($a, $b)" $?
[ "$a" != "$(hash ccl)" ]; check "ccl settings change the ccl hash" $?

"$KB" config --diff > "$tmp/d"
[ ! -s "$tmp/d" ]; check "no setting: no difference" $?
"$KB" config --diff --set pe.dma.channels=3 --set sip.cube_mesh=2x2 > "$tmp/d"
[ "$(cat "$tmp/d")" = "$(printf 'sip.cube_mesh: 4x4 -> 2x2\npe.dma.channels: 2 -> 3')" ]
check "--diff names each changed value: $(cat "$tmp/d")" $?
"$KB" config --ccl --diff --set ccl.algorithms.tree_allreduce.n_slots=2 > "$tmp/d"
[ "$(cat "$tmp/d")" = "algorithms.tree_allreduce.n_slots: 4 -> 2" ]
check "--ccl --diff: $(cat "$tmp/d")" $?

"$KB" config --set ccl.defaults.n_slots=2 > /dev/null 2> "$tmp/err"
[ $? -eq 2 ]; check "a ccl setting without --ccl is a usage error" $?
grep -q "add --ccl" "$tmp/err"; check "and says to add --ccl" $?

exit $fail
