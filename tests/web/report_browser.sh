#!/bin/bash
# The HTML report as a person sees it: headless Chromium opens reports that
# `kernbench run --report` and `kernbench probe --report` wrote, runs their
# script, and the page's DOM is checked: the machine view has the machine's
# cubes and links (counted from its parameters), the hottest link it shows is
# the one the JSON names, the IO chiplets' insides and every memory are
# drawn, the charts have their points, a cube opened from the address shows
# its links, and a sweep's report has a chart per axis with a line per value
# of the other axis. Screenshots stay in web-artifacts/ of the
# build directory. Exit 77 (skipped) when Chromium is not installed.
# usage: report_browser.sh path/to/kernbench source-dir
set -euo pipefail
KB=$1
OUT=$PWD/web-artifacts
mkdir -p "$OUT"
# A --report path that cannot be written is a usage error, before any run.
for cmd in run probe; do
    set +e
    "$KB" $cmd --report /nonexistent-dir/r.html > /dev/null 2> "$OUT/err.txt"
    rc=$?
    set -e
    [ $rc -eq 2 ] || { echo "FAIL: $cmd --report to a missing directory exited $rc"; exit 1; }
    grep -q "/nonexistent-dir/r.html: cannot write" "$OUT/err.txt" || { cat "$OUT/err.txt"; exit 1; }
done

CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
    echo "chromium is not installed ('make deps' installs it): browser tests skipped"
    exit 77
fi
chrome() {
    timeout 60 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --user-data-dir="$OUT/chrome-profile" --virtual-time-budget=10000 "$@" 2>/dev/null
}
fail() { echo "FAIL: $*"; exit 1; }

# A machine that is not the default one: 3 SIPs in a ring, 2x3 cubes each,
# senders that wake 100 ns after a credit (off the wakes the prediction's
# credit rules were measured at: the alpha-beta table says so).
SETS=(--set system.sips=3 --set sip.cube_mesh=2x3 --set pe.ipcq.wake_ns=100)
"$KB" run --bench ccl_allreduce "${SETS[@]}" --opt world=24 --opt bytes=65536 \
    --json "$OUT/allreduce.json" --report "$OUT/allreduce.html" > /dev/null
chrome --dump-dom "file://$OUT/allreduce.html" > "$OUT/allreduce.dom.html"
chrome --dump-dom "file://$OUT/allreduce.html#cube=1.4" > "$OUT/allreduce.cube.dom.html"
chrome --window-size=1400,2600 --screenshot="$OUT/report-allreduce.png" \
    "file://$OUT/allreduce.html" > /dev/null

python3 - "$OUT" <<'PY' || exit 1
import html, json, re, sys
out = sys.argv[1]
dom = open(out + "/allreduce.dom.html").read()
res = json.load(open(out + "/allreduce.json"))
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
if 'data-ready="1"' not in dom: fail("the page's script did not finish")
sips, rows, cols, pes = 3, 2, 3, 8
cubes = re.findall(r'class="kb-cube" data-cube="(\d+)\.(\d+)"', dom)
if len(cubes) != sips * rows * cols: fail("%d cubes drawn, the machine has %d" % (len(cubes), sips * rows * cols))
if len(re.findall(r'class="pe"', dom)) != sips * rows * cols * pes: fail("PEs drawn")
# links between boxes, both directions: PCIe and IO-to-cube per SIP, the
# mesh's UCIe links, the SIP ring (3 links for 3 SIPs)
mesh = rows * (cols - 1) + cols * (rows - 1)
# ... and inside each IO chiplet the endpoint's and the CPU's links to its NOC
want = 2 * (2 * sips + sips * mesh + sips) + 2 * 2 * sips
machine = dom[dom.index('id="kb-mesh"'):dom.index('id="kb-detail"')]
drawn = len(re.findall(r'class="kb-link', machine))
if drawn != want: fail("%d links drawn, the machine has %d" % (drawn, want))
hot = html.unescape(re.search(r'id="kb-hottest">([^<]*)<', dom).group(1))
if hot != res["busiest_links"][0]["name"]: fail("hottest link %r, the JSON names %r" % (hot, res["busiest_links"][0]["name"]))
if 'id="kb-verdict">PASS<' not in dom: fail("verdict")
pts = re.search(r'id="kb-tl-chart"[^>]*data-points="(\d+)"', dom)
if not pts or int(pts.group(1)) == 0: fail("timeline chart without points")
if dom.count("<canvas") < 2: fail("charts not drawn")
if len(re.findall(r'class="kb-ab-bar"', dom)) < 2: fail("alpha-beta bars")
ab = dom[dom.index('id="kb-alphabeta"'):]
ab = html.unescape(ab[:ab.index("</section>")])
if "off_fit" not in ab or "senders asleep 100 ns" not in ab: fail("alpha-beta table without the off_fit note")
if len(re.findall(r'class="kb-unit-cell"', dom)) != sips * rows * cols * pes * 3: fail("unit heat map cells")
io = re.findall(r'class="box kb-io-node" data-node="sip(\d+)\.(\w+)"', dom)
if sorted(io) != sorted((str(s), r) for s in range(sips) for r in ("pcie_ep", "io_cpu", "io_noc")):
    fail("IO chiplet nodes drawn: %s" % io)
# memories: a cell per HBM slice, SRAM and TCM of every cube; the busiest
# memory shown is the one with the highest busy / (channels x span) in the data
data = json.loads(html.unescape(re.search(r'id="kb-data">(.*?)</script>', dom, re.S).group(1)))
mems, span = data["memories"], data["span_ps"]
slices = data["machine"]["slices"]
if len(re.findall(r'class="kb-mem-cell"', dom)) != sips * rows * cols * (slices + 1 + pes): fail("memory cells")
best = max(mems, key=lambda m: (m[5] / m[3] / span, m[4], -m[1]))
top = re.search(r'id="kb-busiest-mems".*?<tr><td>([^<]*)</td>', dom, re.S).group(1)
if top != best[0]: fail("busiest memory %r, the data's is %r" % (top, best[0]))
if not any(m[2] == "tcm" and m[4] for m in mems): fail("no TCM traffic in the memories")
cube = open(out + "/allreduce.cube.dom.html").read()
if 'data-shown="cube:1.4"' not in cube: fail("cube 1.4 not shown from the address")
panel = cube[cube.index('id="kb-detail"'):]
if "sip1.cube4.xbar -&gt; sip1.cube4.noc" not in panel: fail("the cube's links are not listed")
print("report: %d cubes, %d links, hottest %s" % (len(cubes), drawn, hot))
PY

"$KB" probe --sweep --case h2d --case pe-local-hbm --json "$OUT/probe.json" \
    --report "$OUT/probe.html" > /dev/null
chrome --dump-dom "file://$OUT/probe.html" > "$OUT/probe.dom.html"
chrome --window-size=1400,1800 --screenshot="$OUT/report-probe.png" \
    "file://$OUT/probe.html" > /dev/null
python3 - "$OUT" <<'PY' || exit 1
import json, re, sys
out = sys.argv[1]
dom = open(out + "/probe.dom.html").read()
res = json.load(open(out + "/probe.json"))
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
n = sum(len(c["sweep"]) for c in res["cases"])
for chart in ("kb-sweep-latency", "kb-sweep-bw"):
    m = re.search(r'id="%s"[^>]*data-points="(\d+)"' % chart, dom)
    if not m or int(m.group(1)) != n: fail("%s: %s points, the sweep has %d" % (chart, m and m.group(1), n))
    div = dom[dom.index('id="%s"' % chart):]
    if "<canvas" not in div[:4000]: fail(chart + " not drawn")
rows = re.findall(r"<tr><td>(h2d|pe-local-hbm)</td>", dom)
if rows != ["h2d", "pe-local-hbm"]: fail("cases table: %s" % rows)
print("probe: %d sweep points per chart" % n)
PY
# A sweep's report: a chart per axis, one line per value of the other axis;
# world=1000 has no machine to run on, so its points are gaps.
set +e
"$KB" sweep run --bench ccl_allreduce --set sip.cube_mesh=2x2 --sweep world=2,4,1000 \
    --sweep bytes=4KiB..64KiB*4 --jobs 2 --json "$OUT/sweep.jsonl" --report "$OUT/sweep.html" \
    > /dev/null 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || fail "a sweep with failing points exited $rc"
chrome --dump-dom "file://$OUT/sweep.html" > "$OUT/sweep.dom.html"
chrome --window-size=1400,1800 --screenshot="$OUT/report-sweep.png" "file://$OUT/sweep.html" > /dev/null
python3 - "$OUT" <<'PY' || exit 1
import json, re, sys
out = sys.argv[1]
dom = open(out + "/sweep.dom.html").read()
recs = [json.loads(l) for l in open(out + "/sweep.jsonl")]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
if 'data-ready="1"' not in dom: fail("the sweep page's script did not finish")
ok = [r for r in recs if r["status"] == 0]
if len(recs) != 9 or len(ok) != 6: fail("%d records, %d succeeded" % (len(recs), len(ok)))
charts = dict((m.group(1), (int(m.group(2)), int(m.group(3)))) for m in re.finditer(
    r'data-axis="(\w+)" data-points="(\d+)" data-lines="(\d+)"', dom))
# against world: a line per bytes value; against bytes: a line per world value
if charts.get("world") != (6, 3): fail("world chart %s" % (charts.get("world"),))
if charts.get("bytes") != (6, 3): fail("bytes chart %s" % (charts.get("bytes"),))
if dom.count("<canvas") < 2: fail("sweep charts not drawn")
if 'data-figure="sim_ps"' not in dom: fail("the default figure is not sim_ps")
cells = re.findall(r'<tr><td>(\d+)</td><td>(\d+)</td><td>(\d)</td><td>(\d*)</td>', dom)
want = [(r["point"]["world"], r["point"]["bytes"], str(r["status"]), str(r.get("sim_ps", ""))) for r in recs]
if cells != want: fail("points table %s, records %s" % (cells, want))
print("sweep: %d charts, %d points drawn per chart" % (len(charts), charts["world"][0]))
PY
echo "screenshots: $OUT/report-allreduce.png $OUT/report-probe.png $OUT/report-sweep.png"
