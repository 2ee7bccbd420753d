# record_minus FILE KEY...: the result record in FILE without the named
# fields (top-level keys, or PARENT.KEY), keys sorted: two records compared
# this way differ only in what was not named (docs/results.md).
record_minus() {
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    o, path = d, k.split(".")
    for p in path[:-1]:
        o = o.get(p, {})
    o.pop(path[-1], None)
print(json.dumps(d, sort_keys=True, indent=1))
PY
}
