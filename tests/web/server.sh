#!/bin/bash
# kernbench web as a server, driven by curl: foreign Host and Origin
# headers, path traversal and symlinks out of the results directory, an
# oversize body, a bad request, a run with bad options, too many runs at
# once, a cancelled run, a crashing run and a run past its wall-time limit
# are each answered as they should be, and after each the server still
# serves its page. Exit 77 (skipped) without curl.
# usage: server.sh path/to/kernbench source-dir
set -u
KB=$1
OUT=$PWD/web-artifacts/server
rm -rf "$OUT"
mkdir -p "$OUT"
command -v curl > /dev/null || { echo "curl is not installed: server tests skipped"; exit 77; }
fail() { echo "FAIL: $*"; [ -f "$OUT/server.log" ] && tail -5 "$OUT/server.log"; exit 1; }
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; wait $p 2>/dev/null; done' EXIT

# start_server LOG ARGS...: starts kernbench web, sets URL and HOSTPORT
start_server() {
    local log=$1
    shift
    "$KB" web --port $((20000 + RANDOM % 30000)) "$@" > "$log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q "serving http" "$log" && break; sleep 0.1; done
    URL=$(grep -o 'http://[0-9.:]*/' "$log") || fail "server did not start: $(cat "$log")"
    URL=${URL%/}
    HOSTPORT=${URL#http://}

}
code() { curl -s -o "$OUT/body" -w '%{http_code}' "$@"; }
alive() { [ "$(code "$URL")" = 200 ] || fail "the server stopped answering after: $1"; }
# expect WHAT CODES CURL-ARGS...: the status is one of CODES (a|b), then the page still loads
expect() {
    local what=$1 want=$2
    shift 2
    local got
    got=$(code "$@")
    [[ "|$want|" == *"|$got|"* ]] || fail "$what: HTTP $got, expected $want: $(head -c 300 "$OUT/body")"
    alive "$what"
}
post() { curl -s -o "$OUT/body" -w '%{http_code}' -H 'Content-Type: application/json' -d "$1" "$URL$2"; }
field() { python3 -c "import json,sys; print(json.load(open('$OUT/body')).get('$1', ''))"; }
state_of() { curl -s "$URL/api/runs/$1" > "$OUT/body"; field state; }
wait_state() { # ID STATE SECONDS
    for _ in $(seq $(($3 * 10))); do [ "$(state_of "$1")" = "$2" ] && return 0; sleep 0.1; done
    fail "run $1 is $(state_of "$1"), expected $2"
}

start_server "$OUT/server.log" --results "$OUT/results" --max-runs 1 --run-timeout 120
expect "the page" 200 "$URL"
expect "the form's choices" 200 "$URL/api/choices"

# DNS rebinding and cross-site requests
expect "a foreign Host" 403 -H "Host: attacker.example:${HOSTPORT#*:}" "$URL/api/runs"
expect "a foreign Origin" 403 -H "Origin: http://attacker.example" "$URL/api/choices"
expect "a foreign Origin on a run" 403 -H "Origin: http://attacker.example" \
    -H 'Content-Type: application/json' -d '{"command":"topo"}' "$URL/api/runs"
expect "a form post (not JSON)" 415 -d 'command=topo' "$URL/api/runs"

# only files directly in a run's folder
mkdir -p "$OUT/results/runs/r1"
echo secret > "$OUT/secret.txt"
ln -s "$OUT/secret.txt" "$OUT/results/runs/r1/link.txt"
ln -s "$OUT" "$OUT/results/runs/dirlink"
echo fine > "$OUT/results/runs/r1/note.txt"
expect "a file of a run" 200 "$URL/results/r1/note.txt"
expect "dot-dot" "403|404" --path-as-is "$URL/results/../../secret.txt"
expect "encoded dot-dot" "403|404" --path-as-is "$URL/results/r1/%2e%2e/%2e%2e/secret.txt"
expect "dot-dot in the run" "403|404" --path-as-is "$URL/results/r1/..%2f..%2fsecret.txt"
expect "a symlinked file" "403|404" "$URL/results/r1/link.txt"
expect "a symlinked folder" "403|404" "$URL/results/dirlink/secret.txt"
expect "a hidden name" "403|404" "$URL/results/r1/.hidden"
grep -q secret "$OUT/body" && fail "a file outside the results directory was served"

# request size and bad requests
head -c 1048576 /dev/zero | tr '\0' 'x' > "$OUT/big.json"
# the client that waits for "100 Continue" is answered at once, the one that sends its
# body anyway once the body is read
expect "an oversize body, Expect: 100-continue" 413 -H 'Content-Type: application/json' \
    -H 'Expect: 100-continue' --data-binary @"$OUT/big.json" "$URL/api/runs"
expect "an oversize body sent whole" 413 -H 'Content-Type: application/json' -H 'Expect:' \
    --data-binary @"$OUT/big.json" "$URL/api/runs"
alive "oversize bodies"
[ "$(post '{"command":"run","bench":"no_such_bench"}' /api/runs)" = 400 ] || fail "unknown bench"
alive "unknown bench"
[ "$(post '{"command":"run","bench":"../x.so"}' /api/runs)" = 400 ] || fail "a plug-in path"
[ "$(post '{"command":' /api/runs)" = 400 ] || fail "broken JSON"
alive "bad requests"

# a run that works: its report and record are served
[ "$(post '{"command":"probe","cases":["h2d"],"sweep":true}' /api/runs)" = 202 ] || fail "probe run"
ID=$(field id)
wait_state "$ID" done 60
expect "the run's report" 200 "$URL/results/$ID/report.html"
expect "the run's record" 200 "$URL/results/$ID/result.json"

# options the command refuses: a usage error, recorded
[ "$(post '{"command":"run","bench":"vector_add","sets":["no.such.key=1"]}' /api/runs)" = 202 ] ||
    fail "run with a bad --set"
ID=$(field id)
wait_state "$ID" "usage error" 30
curl -s "$URL/api/runs/$ID" | grep -q "no.such.key" || fail "the usage error's message is not shown"
alive "a usage error"

# too many runs, then cancel
[ "$(post '{"command":"run","bench":"ccl_allreduce","opts":["bytes=16MiB"],"no_data":true}' /api/runs)" = 202 ] ||
    fail "long run"
LONG=$(field id)
[ "$(post '{"command":"topo"}' /api/runs)" = 429 ] || fail "a second run beyond --max-runs 1 was not refused"
alive "too many runs"
expect "cancel" 200 -X POST "$URL/api/runs/$LONG/cancel"
wait_state "$LONG" cancelled 10
pgrep -f "runs/$LONG/" > /dev/null && fail "the cancelled run's process is still there"
expect "cancel again" 409 -X POST "$URL/api/runs/$LONG/cancel"
[ "$(post '{"command":"topo"}' /api/runs)" = 202 ] || fail "a run after the cancelled one"
wait_state "$(field id)" done 30
curl -s "$URL/api/runs" > "$OUT/body"
python3 -c "
import json; h = json.load(open('$OUT/body'))
states = sorted(r['state'] for r in h)
assert states == ['cancelled', 'done', 'done', 'usage error'], states" || fail "history"

# a run that crashes, and one past the wall-time limit (another server, whose
# runs start a script instead of kernbench)
cat > "$OUT/fake-kernbench.sh" <<'SH'
#!/bin/sh
case "$*" in
*--no-data*) exec sleep 30 ;;
*) kill -SEGV $$ ;;
esac
SH
chmod +x "$OUT/fake-kernbench.sh"
start_server "$OUT/server2.log" --results "$OUT/results2" --run-with "$OUT/fake-kernbench.sh" \
    --run-timeout 1
[ "$(post '{"command":"topo"}' /api/runs)" = 202 ] || fail "crashing run"
ID=$(field id)
wait_state "$ID" crashed 10
curl -s "$URL/api/runs/$ID" | grep -q '"signal":11' || fail "the crash's signal"
alive "a crashed run"
[ "$(post '{"command":"probe","no_data":true}' /api/runs)" = 202 ] || fail "slow run"
ID=$(field id)
wait_state "$ID" timeout 10
alive "a run past its time"
echo "server: every case answered, the server kept serving"
