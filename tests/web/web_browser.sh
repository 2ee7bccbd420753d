#!/bin/bash
# kernbench web in a real browser (headless Chromium through the DevTools
# protocol, tests/web/cdp.py): the page loads its form, a probe started
# from the form ends with its report (whose machine view shows the hottest
# link of the run's record), a long run started from the form is cancelled
# with the Cancel button and stops, and two runs compared side by side mark
# their differences. Screenshots stay in web-artifacts/. Exit 77 (skipped)
# when Chromium is not installed.
# usage: web_browser.sh path/to/kernbench source-dir
set -u
KB=$1
SRC=$2
OUT=$PWD/web-artifacts/browser
rm -rf "$OUT"
mkdir -p "$OUT"
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || { echo "chromium is not installed: browser tests skipped"; exit 77; }
"$KB" web --port $((20000 + RANDOM % 30000)) --results "$OUT/results" --max-runs 2 \
    > "$OUT/server.log" 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q "serving http" "$OUT/server.log" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*/' "$OUT/server.log") || { cat "$OUT/server.log"; exit 1; }

PYTHONPATH="$SRC/tests/web" timeout 170 python3 - "$CHROME" "$URL" "$OUT" <<'PY'
import json, sys, urllib.request
from cdp import Browser
chrome, url, out = sys.argv[1:4]
b = Browser(chrome, out + "/profile")
try:
    b.go(url)
    b.wait("document.body.getAttribute('data-ready') === '1'", 20, "the form")
    n = b.js("document.querySelectorAll('#f-bench option').length")
    assert n >= 10, "%s benches in the form" % n
    # a probe from the form: pick the command, a case, the sweep, press Run
    b.js("""(function () {
        var c = document.getElementById('f-command'); c.value = 'probe';
        c.dispatchEvent(new Event('change'));
        document.querySelector('#f-cases input[value="pe-local-hbm"]').checked = true;
        document.getElementById('f-sweep').checked = true;
        document.getElementById('f-submit').click(); })()""")
    b.wait("document.getElementById('run-status').getAttribute('data-state') === 'done'", 60,
           "the probe to finish")
    rid = b.js("document.getElementById('report').getAttribute('data-run')")
    b.wait("(function () { var d = document.getElementById('report').contentDocument;"
           " return d && d.body && d.body.getAttribute('data-ready') === '1'; })()", 20, "the report")
    hot = b.js("document.getElementById('report').contentDocument.getElementById('kb-hottest').textContent")
    rec = json.load(urllib.request.urlopen(url + "results/%s/result.json" % rid))
    case = rec["cases"][0]
    pts = b.js("document.getElementById('report').contentDocument"
               ".getElementById('kb-sweep-latency').getAttribute('data-points')")
    assert int(pts) == len(case["sweep"]), "sweep chart has %s points" % pts
    print("form run %s: report shown, hottest link %s" % (rid, hot))
    b.screenshot(out + "/web-run.png")

    # a long run, cancelled from the page
    b.js("""(function () {
        var c = document.getElementById('f-command'); c.value = 'run';
        c.dispatchEvent(new Event('change'));
        var s = document.getElementById('f-bench'); s.value = 'ccl_allreduce';
        s.dispatchEvent(new Event('change'));
        document.querySelector('#f-opts input[data-key="bytes"]').value = '16MiB';
        document.getElementById('f-nodata').checked = true;
        document.getElementById('f-submit').click(); })()""")
    b.wait("document.getElementById('run-status').getAttribute('data-state') === 'running'"
           " && !document.getElementById('f-cancel').disabled", 20, "the long run to start")
    b.js("document.getElementById('f-cancel').click()")
    b.wait("document.getElementById('run-status').getAttribute('data-state') === 'cancelled'", 15,
           "the run to be cancelled")
    runs = json.load(urllib.request.urlopen(url + "api/runs"))
    assert [r["state"] for r in runs][0] == "cancelled", runs[0]
    print("cancelled run %s" % runs[0]["id"])

    # two runs side by side: a probe of another path
    b.js("""(function () {
        var c = document.getElementById('f-command'); c.value = 'probe';
        c.dispatchEvent(new Event('change'));
        document.getElementById('f-sweep').checked = false;
        document.getElementById('f-nodata').checked = false;
        document.querySelector('#f-cases input[value="pe-local-hbm"]').checked = false;
        document.querySelector('#f-cases input[value="pe-remote-cube-hbm"]').checked = true;
        document.getElementById('f-submit').click(); })()""")
    b.wait("document.getElementById('run-status').getAttribute('data-state') === 'done'", 60,
           "the second probe")
    rid2 = b.js("document.getElementById('report').getAttribute('data-run')")
    b.wait("!!document.querySelector('#history tr[data-id=\"%s\"]')" % rid2, 10, "the history")
    b.js("""(function () {
        ['%s', '%s'].forEach(function (id) {
          var i = document.querySelector('#history tr[data-id="' + id + '"] input');
          i.checked = true; i.dispatchEvent(new Event('change')); });
        document.getElementById('compare-btn').click(); })()""" % (rid, rid2))
    b.wait("document.querySelectorAll('#compare-figures tr.diff').length > 0", 20, "the comparison")
    diff = b.js("Array.prototype.map.call(document.querySelectorAll('#compare-figures tr.diff'),"
                " function (r) { return r.getAttribute('data-key'); })")
    assert "cases.0.case" in diff and "cases.0.latency_ps" in diff, diff
    nl = b.js("document.querySelectorAll('#compare-links tr.diff').length")
    assert nl > 0, b.js("(document.getElementById('compare-error') || {}).textContent || document.getElementById('compare').innerHTML.slice(-1500)")
    print("comparison: %d fields differ" % len(diff))
    b.screenshot(out + "/web-compare.png")
finally:
    b.close()
PY
rc=$?
[ $rc -eq 0 ] && echo "screenshots: $OUT/web-run.png $OUT/web-compare.png"
exit $rc
