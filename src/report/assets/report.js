/*
 * report.js — draws a kernbench report from the JSON in #kb-data: the run's
 * description and figures, the machine with every link coloured by its use,
 * the PE units as a heat map, the busiest links, the alpha-beta comparison,
 * the memories' use, probe curves (uPlot, log axes), the timeline (one
 * canvas image), and for a sweep each figure against each axis.
 * No network: everything it needs is in the page. docs/web.md.
 */
(function () {
  'use strict';
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById('kb-data').textContent);
  var R = D.result || {};
  /* a sweep's report has no machine (each point may have its own) */
  var M = D.machine || {sips: 0, cubes: 0, pes: 0, slices: 0, rows: 0, cols: 0, nodes: [], links: []};
  var app = document.getElementById('app');
  var UNITS = ['DMA', 'GEMM', 'MATH'];

  /* ---- small helpers ---------------------------------------------------- */
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'cls') e.className = attrs[k];
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  var SVGNS = 'http://www.w3.org/2000/svg';
  function sv(tag, attrs, kids) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }
  function section(id, title, kids) {
    var s = el('section', {id: id}, [el('h2', {text: title})].concat(kids || []));
    app.appendChild(s);
    return s;
  }
  function table(head, rows, cls) {
    var t = el('table', {cls: cls || ''});
    t.appendChild(el('tr', {}, head.map(function (h) { return el('th', {text: h}); })));
    rows.forEach(function (r) {
      t.appendChild(el('tr', {}, r.map(function (c) {
        return c instanceof Node ? el('td', {}, [c]) : el('td', {text: String(c)});
      })));
    });
    return t;
  }
  function us(ps) { return (ps / 1e6).toFixed(3); }
  function fmtBytes(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(2) : String(b)) + ' ' + u[i];
  }
  function pct(f) { return (100 * f).toFixed(1) + '%'; }
  /* utilisation 0..1 -> colour: grey when idle, then blue, yellow, red */
  function heat(f) {
    if (!(f > 0)) return '#d8d8d8';
    f = Math.min(1, f);
    var stops = [[0, [49, 130, 189]], [0.5, [254, 217, 118]], [1, [215, 25, 28]]];
    for (var i = 1; i < stops.length; i++) {
      if (f <= stops[i][0]) {
        var a = stops[i - 1], b = stops[i], t = (f - a[0]) / (b[0] - a[0]);
        var c = a[1].map(function (v, k) { return Math.round(v + t * (b[1][k] - v)); });
        return 'rgb(' + c.join(',') + ')';
      }
    }
    return 'rgb(215,25,28)';
  }

  /* ---- the machine's links and their use ----------------------------------- */
  /* where the IO chiplet's nodes sit, from its centre, and their size */
  var IO_AT = {pcie_ep: [-58, -10], io_cpu: [58, -10], io_noc: [0, 20]}, IO_W = 64, IO_H = 20;
  var nodes = M.nodes, links = M.links;
  var span = D.span_ps || 0;
  function linkName(i) { return nodes[links[i][0]][0] + ' -> ' + nodes[links[i][1]][0]; }
  function linkBusy(i) { return D.link_busy_ps ? D.link_busy_ps[i] : 0; }
  function linkBytes(i) { return D.link_bytes ? D.link_bytes[i] : 0; }
  function linkUtil(i) { return span > 0 ? linkBusy(i) / span : 0; }
  /* the busiest link directions, ordered as kb_busiest_links orders them */
  var byBusy = [];
  for (var li = 0; li < links.length; li++) if (linkBusy(li) || linkBytes(li)) byBusy.push(li);
  byBusy.sort(function (a, b) {
    return (linkBusy(b) - linkBusy(a)) || (linkBytes(b) - linkBytes(a)) || (a - b);
  });
  var hottest = byBusy.length ? byBusy[0] : -1;
  /* the cube (sip, cube) a link belongs to, for links inside a cube */
  function cubeOf(nodeId) { var n = nodes[nodeId]; return n[3] >= 0 ? n[2] + '.' + n[3] : null; }
  var cubeMax = {};
  links.forEach(function (l, i) {
    var a = cubeOf(l[0]), b = cubeOf(l[1]);
    if (a && a === b) cubeMax[a] = Math.max(cubeMax[a] || 0, linkUtil(i));
  });

  /* memories: [name, node, space, channels, bytes, busy_ps]; busy is summed
   * over the channels, so utilisation is busy / (channels x span) */
  var MEMS = D.memories || [];
  function memUtil(m) { return span > 0 ? m[5] / m[3] / span : 0; }
  function memTable(list) {
    return table(['memory', 'kind', 'channels', 'bytes', 'busy us (all channels)', 'utilisation'], list.map(function (m) {
      return [m[0], m[2], m[3], fmtBytes(m[4]), us(m[5]), pct(memUtil(m))];
    }), 'kb-mems');
  }

  var detail; /* the panel a click fills */
  function linkFigures(i) {
    var l = links[i];
    return table(['link', 'class', 'GB/s', 'bytes', 'busy us', 'utilisation'],
                 [[linkName(i), l[2], l[3], linkBytes(i), us(linkBusy(i)), pct(linkUtil(i))]]);
  }
  function showLink(i) {
    detail.replaceChildren(el('h3', {text: 'link ' + linkName(i)}), linkFigures(i));
    detail.setAttribute('data-shown', 'link:' + i);
  }
  function linkTitle(i) {
    return linkName(i) + '\n' + links[i][2] + ', ' + links[i][3] + ' GB/s\n' + fmtBytes(linkBytes(i)) +
           ', busy ' + us(linkBusy(i)) + ' us (' + pct(linkUtil(i)) + ')';
  }
  /* a directed link drawn from (x1,y1) to (x2,y2), offset to its right so
   * the two directions of a physical link sit side by side */
  function drawLink(g, i, x1, y1, x2, y2, off, width) {
    var dx = x2 - x1, dy = y2 - y1, len = Math.sqrt(dx * dx + dy * dy) || 1;
    var ox = -dy / len * off, oy = dx / len * off;
    var line = sv('line', {x1: x1 + ox, y1: y1 + oy, x2: x2 + ox, y2: y2 + oy,
                           stroke: heat(linkUtil(i)), 'stroke-width': width || 4,
                           'class': 'kb-link' + (i === hottest ? ' kb-hot' : ''),
                           'data-link': i, 'data-name': linkName(i), 'data-util': linkUtil(i).toFixed(6),
                           'marker-end': 'url(#kb-arrow)',
                           onclick: function (ev) { ev.stopPropagation(); showLink(i); }},
                  [sv('title', {text: linkTitle(i)})]);
    g.appendChild(line);
    return line;
  }

  /* ---- description -------------------------------------------------------- */
  function describe() {
    var rows = [], k = R.kernbench || {}, h = R.config_hash || {};
    rows.push(['command', (R.command_line || []).join(' ')]);
    rows.push(['version', (k.version || '?') + (k.git ? ' (' + k.git + ')' : '')]);
    /* a sweep's record has none of these: each point's record has its own */
    if (R.config_hash) rows.push(['machine hash', h.machine || 'none']);
    if (h.ccl) rows.push(['ccl hash', h.ccl]);
    if (R.fabric_model) rows.push(['fabric model', R.fabric_model]);
    if (R.sets) rows.push(['--set', R.sets.length ? R.sets.join('  ') : 'none']);
    var kids = [table(['', ''], rows, 'kv')];
    var opts = R.options || {}, given = {};
    (R.command_line || []).forEach(function (a) { var m = /^--([a-z-]+)/.exec(a); if (m) given[m[1]] = 1; });
    var orows = Object.keys(opts).filter(function (o) { return o !== 'help'; }).map(function (o) {
      var v = opts[o];
      return ['--' + o, v === null ? '(none)' : Array.isArray(v) ? (v.length ? v.join('  ') : '(none)') : String(v),
              given[o] ? 'given' : 'default'];
    });
    if (orows.length) {
      kids.push(el('h3', {text: 'options'}));
      kids.push(table(['option', 'value', ''], orows));
    }
    var bo = R.bench_options || {};
    if (Object.keys(bo).length) {
      kids.push(el('h3', {text: 'bench options (--opt)'}));
      kids.push(table(['option', 'value'], Object.keys(bo).map(function (o) { return [o, bo[o]]; })));
    }
    section('kb-describe', 'what was run', kids);
  }

  /* ---- figures ------------------------------------------------------------- */
  function runFigures() {
    var rows = [['simulated time', us(R.sim_ps) + ' us'],
                ['programs', R.programs + ' on ' + R.pes_used + ' PEs'],
                ['GEMM', (R.gemm_flops || 0).toExponential(4) + ' FLOP, ' + ((R.flops_per_s || 0) / 1e12).toFixed(4) +
                 ' TFLOP/s of ' + ((R.peak_flops_per_s || 0) / 1e12).toFixed(4) + ' peak'],
                ['MATH', (R.math_elements || 0) + ' element-ops']];
    for (var k in R.figures || {}) rows.push([k, String(R.figures[k])]);
    for (var n in R.notes || {}) rows.push([n, R.notes[n]]);
    var kids = [el('p', {cls: R.pass ? 'pass' : 'fail', id: 'kb-verdict', text: R.pass ? 'PASS' : 'FAIL'}),
                table(['figure', 'value'], rows, 'kv')];
    if (R.checks && R.checks.length)
      kids.push(table(['check', 'result', 'max error', 'tolerance'], R.checks.map(function (c) {
        return [c.name, c.pass ? 'PASS' : 'FAIL', c.max_err, c.tol];
      })));
    if (R.units)
      kids.push(table(['unit', 'busy sum us', 'busy max us', 'util'], UNITS.map(function (u) {
        var x = R.units[u] || {};
        return [u, us(x.busy_sum_ps || 0), us(x.busy_max_ps || 0), pct(x.util || 0)];
      })));
    if (R.link_bytes) {
      var lb = [];
      for (var c in R.link_bytes) if (R.link_bytes[c]) lb.push([c, R.link_bytes[c], fmtBytes(R.link_bytes[c])]);
      kids.push(table(['link class', 'bytes', ''], lb));
    }
    section('kb-figures', 'figures', kids);
  }

  /* the machine's figures (kernbench topo): the record's numbers and texts */
  function topoFigures() {
    var skip = {schema: 1, schema_version: 1, command: 1, fabric_model: 1};
    var rows = Object.keys(R).filter(function (k) {
      return !skip[k] && (typeof R[k] === 'number' || typeof R[k] === 'string');
    }).map(function (k) {
      var u = (R.unit_of || {})[k];
      return [k, String(R[k]) + (u && u !== '1' ? ' ' + u : '')];
    });
    var lc = R.links_by_class || {};
    var kids = [table(['figure', 'value'], rows, 'kv')];
    if (Object.keys(lc).length)
      kids.push(table(['link class', 'directed links'], Object.keys(lc).map(function (c) { return [c, lc[c]]; })));
    section('kb-figures', 'figures', kids);
    var P = R.parameters || {}, keys = Object.keys(P);
    if (!keys.length) return;
    /* every parameter of the machine, with a filter on the path */
    var body = table(['parameter', 'value'], keys.map(function (k) { return [k, P[k]]; }), 'kb-params');
    var filter = el('input', {type: 'search', placeholder: 'filter (e.g. hbm)', id: 'kb-params-filter',
                              oninput: function () {
                                var q = filter.value.toLowerCase();
                                Array.prototype.forEach.call(body.rows, function (tr, n) {
                                  if (n) tr.style.display = tr.cells[0].textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
                                });
                              }});
    section('kb-params', 'parameters (' + keys.length + ', --set applied)', [filter, body]);
  }

  /* ---- the machine ----------------------------------------------------------- */
  function machine() {
    var rows = M.rows, cols = M.cols, C = 76, G = 34, PAD = 30;
    var sipW = cols * C + (cols - 1) * G, sipH = rows * C + (rows - 1) * G;
    var ioH = 72, hostH = 36, top = hostH + 60;
    var W = M.sips * (sipW + 2 * PAD) + (M.sips - 1) * 40, H = top + ioH + 50 + sipH + 2 * PAD;
    var svg = sv('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, id: 'kb-mesh',
                         'class': 'machine'});
    svg.appendChild(sv('defs', {}, [sv('marker', {id: 'kb-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5,
                                                   markerWidth: 7, markerHeight: 7, markerUnits: 'userSpaceOnUse', orient: 'auto'},
                                            [sv('path', {d: 'M0,0 L10,5 L0,10 z', fill: '#555'})])]));
    var gLinks = sv('g', {}), gBoxes = sv('g', {});
    var pos = {}; /* node id -> centre */
    var hostX = W / 2, hostY = hostH / 2 + 6;
    gBoxes.appendChild(sv('rect', {x: hostX - 50, y: 6, width: 100, height: hostH, rx: 6, 'class': 'box host'}));
    gBoxes.appendChild(sv('text', {x: hostX, y: hostY + 5, 'text-anchor': 'middle', text: 'host'}));
    var sipX = [];
    for (var s = 0; s < M.sips; s++) {
      var x0 = s * (sipW + 2 * PAD + 40);
      sipX.push(x0);
      gBoxes.appendChild(sv('rect', {x: x0, y: top - 10, width: sipW + 2 * PAD, height: H - top + 5, rx: 10, 'class': 'sip'}));
      gBoxes.appendChild(sv('text', {x: x0 + 8, y: top + 6, text: 'sip' + s, 'class': 'label'}));
    }
    nodes.forEach(function (n, id) {
      if (n[1] === 'host') pos[id] = [hostX, hostY + hostH / 2 - 4];
      if (n[2] < 0) return;
      var x0 = sipX[n[2]];
      if (n[3] < 0) { /* inside the IO chiplet: endpoint and CPU above, NOC below */
        var ix = x0 + PAD + sipW / 2, at = IO_AT[n[1]] || [0, 0];
        pos[id] = [ix + at[0], top + 14 + ioH / 2 + at[1]];
        return;
      }
      if (n[1] === 'router')
        pos[id] = [x0 + PAD + n[5] * (C + G) + C / 2, top + ioH + 50 + n[6] * (C + G) + C / 2];
    });
    for (var s2 = 0; s2 < M.sips; s2++) {
      var ix2 = sipX[s2] + PAD + sipW / 2;
      gBoxes.appendChild(sv('rect', {x: ix2 - 110, y: top + 14, width: 220, height: ioH, rx: 6, 'class': 'box io'},
                            [sv('title', {text: 'IO chiplet of sip' + s2})]));
      gBoxes.appendChild(sv('text', {x: ix2 - 104, y: top + 26, 'class': 'small', text: 'IO chiplet'}));
    }
    /* the IO chiplet's nodes, each titled with its links' use */
    nodes.forEach(function (n, id) {
      if (n[2] < 0 || n[3] >= 0 || !pos[id]) return;
      var p = pos[id], mine = [];
      links.forEach(function (l, i) { if (l[0] === id || l[1] === id) mine.push(i); });
      gBoxes.appendChild(sv('rect', {x: p[0] - IO_W / 2, y: p[1] - IO_H / 2, width: IO_W, height: IO_H, rx: 4,
                                     'class': 'box kb-io-node', 'data-node': n[0]},
                            [sv('title', {text: n[0] + '\n' + mine.map(function (i) {
                              return linkName(i) + ': ' + fmtBytes(linkBytes(i)) + ', ' + pct(linkUtil(i));
                            }).join('\n')})]));
      gBoxes.appendChild(sv('text', {x: p[0], y: p[1] + 4, 'text-anchor': 'middle', 'class': 'small', text: n[1]}));
    });
    /* cubes */
    nodes.forEach(function (n, id) {
      if (n[1] !== 'router') return;
      var p = pos[id], key = n[2] + '.' + n[3], f = cubeMax[key] || 0;
      var g = sv('g', {'class': 'kb-cube', 'data-cube': key, 'data-util': f.toFixed(6),
                       onclick: function () { showCube(n[2], n[3]); }});
      g.appendChild(sv('rect', {x: p[0] - C / 2, y: p[1] - C / 2, width: C, height: C, rx: 5,
                                fill: heat(f), 'class': 'cube'},
                       [sv('title', {text: 'sip' + n[2] + '.cube' + n[3] + ' (x' + n[5] + ' y' + n[6] +
                                           '): busiest link inside ' + pct(f) + '; click for its links and PEs'})]));
      g.appendChild(sv('text', {x: p[0], y: p[1] - C / 2 + 13, 'text-anchor': 'middle', 'class': 'small', text: 'cube' + n[3]}));
      /* its PEs, coloured by their busiest unit */
      for (var k = 0; k < M.pes; k++) {
        var pe = (n[2] * M.cubes + n[3]) * M.pes + k, uf = peUnitMax(pe);
        g.appendChild(sv('rect', {x: p[0] - C / 2 + 6 + (k % 4) * 16, y: p[1] - 4 + Math.floor(k / 4) * 16, width: 13, height: 13,
                                  fill: heat(uf), 'class': 'pe', 'data-pe': pe},
                         [sv('title', {text: 'pe' + k + ': busiest unit ' + pct(uf)})]));
      }
      gBoxes.appendChild(g);
    });
    /* the links between boxes: PCIe, IO to attach cube, UCIe mesh, SIP links */
    links.forEach(function (l, i) {
      var a = nodes[l[0]], b = nodes[l[1]], c = l[2], pa, pb;
      if (c === 'PCIE') {
        var io = pos[a[1] === 'host' ? l[1] : l[0]], h = pos[a[1] === 'host' ? l[0] : l[1]];
        var ioTop = [io[0], io[1] - IO_H / 2];
        pa = a[1] === 'host' ? h : ioTop; pb = a[1] === 'host' ? ioTop : h;
        drawLink(gLinks, i, pa[0], pa[1], pb[0], pb[1], 4, 5);
      } else if (c === 'IO_UCIE') {
        pa = pos[l[0]]; pb = pos[l[1]];
        drawLink(gLinks, i, pa[0], pa[1] + (a[1] === 'io_noc' ? IO_H / 2 : -C / 2),
                 pb[0], pb[1] + (b[1] === 'io_noc' ? IO_H / 2 : -C / 2), 4, 5);
      } else if (c === 'IO_NOC' && pos[l[0]] && pos[l[1]]) {
        /* inside the IO chiplet: from box edge to box edge */
        pa = pos[l[0]]; pb = pos[l[1]];
        var ex = pb[0] - pa[0], ey = pb[1] - pa[1], el2 = Math.sqrt(ex * ex + ey * ey) || 1;
        var cut = Math.min(IO_W / 2 / Math.max(Math.abs(ex) / el2, 1e-9), IO_H / 2 / Math.max(Math.abs(ey) / el2, 1e-9)) + 2;
        drawLink(gLinks, i, pa[0] + ex / el2 * cut, pa[1] + ey / el2 * cut,
                 pb[0] - ex / el2 * cut, pb[1] - ey / el2 * cut, 3, 3);
      } else if (c === 'UCIE') {
        pa = pos[l[0]]; pb = pos[l[1]];
        var dx = Math.sign(pb[0] - pa[0]), dy = Math.sign(pb[1] - pa[1]);
        drawLink(gLinks, i, pa[0] + dx * C / 2, pa[1] + dy * C / 2, pb[0] - dx * C / 2, pb[1] - dy * C / 2, 5, 5);
      } else if (c === 'SIP_LINK') {
        pa = pos[l[0]]; pb = pos[l[1]];
        var dir = Math.sign(pb[0] - pa[0]) || 1, y = pa[1] + (pb[0] > pa[0] ? -8 : 8);
        drawLink(gLinks, i, pa[0] + dir * 110, y, pb[0] - dir * 110, y, 0, 5);
      }
    });
    svg.appendChild(gBoxes);
    svg.appendChild(gLinks);
    detail = el('div', {id: 'kb-detail', cls: 'detail'}, [el('p', {text: 'Click a cube or a link for its figures.'})]);
    var legend = el('div', {cls: 'legend'}, [el('span', {text: 'link and cube colour = busy time / ' + us(span) + ' us: '})]
      .concat([0, 0.25, 0.5, 0.75, 1].map(function (f) {
        return el('span', {cls: 'swatch', style: 'background:' + heat(f || 1e-9), text: pct(f)});
      })));
    var hot = hottest >= 0 ? linkName(hottest) : 'none';
    section('kb-machine', 'machine: ' + M.sips + ' SIPs x ' + M.cubes + ' cubes (' + rows + 'x' + cols + ') x ' + M.pes + ' PEs',
            [legend, el('p', {}, ['hottest link: ', el('b', {id: 'kb-hottest', text: hot}),
                                  hottest >= 0 ? ' (' + pct(linkUtil(hottest)) + ' busy, ' + fmtBytes(linkBytes(hottest)) + ')' : '']),
             el('div', {cls: 'scroll'}, [svg]), detail]);
  }

  function peUnitMax(pe) {
    if (!D.unit_busy_ps || !span) return 0;
    var m = 0;
    for (var u = 0; u < 3; u++) m = Math.max(m, D.unit_busy_ps[pe * 3 + u] / span / (u === 0 ? D.dma_channels : 1));
    return m;
  }

  /* A cube's inside: router, xbar, noc, SRAM, m_cpu, m_dma, HBM slices, and
   * each PE's DMA and TCM, with the links between them. */
  function showCube(s, c) {
    var mine = {}, ids = [];
    nodes.forEach(function (n, id) { if (n[2] === s && n[3] === c) { mine[id] = n; ids.push(id); } });
    var W = 760, H = 330, p = {};
    var place = {router: [380, 30], xbar: [380, 110], sram: [560, 110], m_cpu: [200, 110], m_dma: [110, 110], noc: [380, 200]};
    ids.forEach(function (id) {
      var n = mine[id];
      if (place[n[1]]) p[id] = place[n[1]];
      if (n[1] === 'pe_dma') p[id] = [60 + n[4] * (640 / Math.max(1, M.pes - 1)), 260];
      if (n[1] === 'pe_tcm') p[id] = [60 + n[4] * (640 / Math.max(1, M.pes - 1)), 310];
    });
    /* HBM slices on a row of their own, above the xbar's level */
    ids.forEach(function (id) { if (mine[id][1] === 'hbm_ctrl') p[id] = [40 + mine[id][4] * (680 / Math.max(1, M.slices - 1)), 160]; });
    var svg = sv('svg', {width: W, height: H + 10, 'class': 'cube-inside', id: 'kb-cube-inside'});
    var gl = sv('g', {}), gb = sv('g', {}), rows = [];
    links.forEach(function (l, i) {
      if (!(l[0] in mine) || !(l[1] in mine) || !p[l[0]] || !p[l[1]]) return;
      drawLink(gl, i, p[l[0]][0], p[l[0]][1], p[l[1]][0], p[l[1]][1], 3, 3);
      rows.push(i);
    });
    ids.forEach(function (id) {
      if (!p[id]) return;
      var n = mine[id], short = n[0].split('.').slice(2).join('.');
      gb.appendChild(sv('rect', {x: p[id][0] - 34, y: p[id][1] - 10, width: 68, height: 20, rx: 4, 'class': 'box'},
                        [sv('title', {text: n[0]})]));
      gb.appendChild(sv('text', {x: p[id][0], y: p[id][1] + 4, 'text-anchor': 'middle', 'class': 'small', text: short}));
    });
    svg.appendChild(gl);
    svg.appendChild(gb);
    rows.sort(function (a, b) { return linkBusy(b) - linkBusy(a) || a - b; });
    var units = [];
    for (var k = 0; k < M.pes && D.unit_busy_ps; k++) {
      var pe = (s * M.cubes + c) * M.pes + k;
      units.push(['pe' + k].concat([0, 1, 2].map(function (u) {
        return us(D.unit_busy_ps[pe * 3 + u]) + ' us';
      })));
    }
    var cubeMems = MEMS.filter(function (m) { return m[1] in mine && m[4]; });
    detail.replaceChildren.apply(detail, [el('h3', {text: 'sip' + s + '.cube' + c}), svg,
                           units.length ? table(['PE', 'DMA busy', 'GEMM busy', 'MATH busy'], units) : null,
                           cubeMems.length ? memTable(cubeMems) : null,
                           table(['link', 'class', 'bytes', 'busy us', 'util'], rows.filter(function (i) { return linkBytes(i); }).map(function (i) {
                             return [linkName(i), links[i][2], linkBytes(i), us(linkBusy(i)), pct(linkUtil(i))];
                           }))].filter(Boolean));
    detail.setAttribute('data-shown', 'cube:' + s + '.' + c);
  }

  /* ---- PE units heat map ----------------------------------------------------- */
  function unitHeat() {
    if (!D.unit_busy_ps || !span) return;
    var n = M.sips * M.cubes, cw = 12, ch = 12, lw = 90, gap = 10;
    var W = lw + 3 * (M.pes * cw + gap), H = 20 + n * ch;
    var svg = sv('svg', {width: W, height: H, id: 'kb-units'});
    UNITS.forEach(function (u, ui) {
      svg.appendChild(sv('text', {x: lw + ui * (M.pes * cw + gap), y: 12, 'class': 'small', text: u + ' (PE 0..' + (M.pes - 1) + ')'}));
    });
    for (var r = 0; r < n; r++) {
      var s = Math.floor(r / M.cubes), c = r % M.cubes;
      svg.appendChild(sv('text', {x: 0, y: 20 + r * ch + 10, 'class': 'small', text: 'sip' + s + '.cube' + c}));
      for (var ui = 0; ui < 3; ui++)
        for (var k = 0; k < M.pes; k++) {
          var pe = r * M.pes + k, b = D.unit_busy_ps[pe * 3 + ui];
          var f = b / span / (ui === 0 ? D.dma_channels : 1);
          svg.appendChild(sv('rect', {x: lw + ui * (M.pes * cw + gap) + k * cw, y: 20 + r * ch, width: cw - 1, height: ch - 1,
                                      fill: heat(f), 'class': 'kb-unit-cell'},
                             [sv('title', {text: 'sip' + s + '.cube' + c + '.pe' + k + ' ' + UNITS[ui] + ': busy ' + us(b) +
                                                 ' us, ' + pct(f) + (ui === 0 ? ' of its ' + D.dma_channels + ' channels' : '')})]));
        }
    }
    section('kb-unitmap', 'PE unit busy time over the measured region', [el('div', {cls: 'scroll'}, [svg])]);
  }

  /* ---- memories ---------------------------------------------------------------- */
  /* a heat map (a row per cube: its HBM slices, its SRAM, its PEs' TCM) and
   * the busiest memories */
  function memories() {
    if (!MEMS.length || !span) return;
    var used = MEMS.filter(function (m) { return m[4] || m[5]; });
    var cw = 12, ch = 12, lw = 90, gap = 10, groups = [['hbm', M.slices], ['sram', 1], ['tcm', M.pes]];
    var x0 = [lw], W = lw;
    groups.forEach(function (g) { W += Math.max(g[1] * cw, 40) + gap; x0.push(W); });
    var n = M.sips * M.cubes, svg = sv('svg', {width: W, height: 20 + n * ch, id: 'kb-memmap'});
    groups.forEach(function (g, i) {
      svg.appendChild(sv('text', {x: x0[i], y: 12, 'class': 'small', text: g[0].toUpperCase() + (g[1] > 1 ? ' 0..' + (g[1] - 1) : '')}));
    });
    for (var r = 0; r < n; r++)
      svg.appendChild(sv('text', {x: 0, y: 20 + r * ch + 10, 'class': 'small', text: 'sip' + Math.floor(r / M.cubes) + '.cube' + (r % M.cubes)}));
    var seen = {};
    MEMS.forEach(function (m) {
      var nd = nodes[m[1]], g = m[2] === 'hbm' ? 0 : m[2] === 'sram' ? 1 : 2;
      if (!nd || nd[3] < 0) return;
      var row = nd[2] * M.cubes + nd[3], k = g === 1 ? 0 : nd[4], key = row + '.' + g + '.' + k;
      if (seen[key]) return;
      seen[key] = 1;
      var f = memUtil(m);
      svg.appendChild(sv('rect', {x: x0[g] + k * cw, y: 20 + row * ch, width: cw - 1, height: ch - 1, fill: heat(f),
                                  'class': 'kb-mem-cell', 'data-mem': m[0], 'data-util': f.toFixed(6)},
                         [sv('title', {text: m[0] + ': ' + fmtBytes(m[4]) + ', busy ' + us(m[5]) + ' us over ' + m[3] +
                                             ' channels, ' + pct(f)})]));
    });
    used.sort(function (a, b) { return memUtil(b) - memUtil(a) || b[4] - a[4] || a[1] - b[1]; });
    var top = memTable(used.slice(0, 12));
    top.id = 'kb-busiest-mems';
    section('kb-memories', 'memories over the measured region: ' + used.length + ' of ' + MEMS.length + ' used',
            [el('div', {cls: 'scroll'}, [svg]), el('h3', {text: 'busiest memories'}), top]);
  }

  /* ---- busiest links ------------------------------------------------------- */
  function busiest() {
    var kids = [];
    if (R.busiest_links && R.busiest_links.length)
      kids.push(el('p', {}, ['the run\'s busiest link (its JSON): ', el('b', {id: 'kb-json-busiest', text: R.busiest_links[0].name})]));
    var rows = byBusy.slice(0, 12).map(function (i) {
      return [el('a', {href: '#kb-machine', text: linkName(i), onclick: function () { showLink(i); }}),
              links[i][2], linkBytes(i), us(linkBusy(i)), pct(linkUtil(i))];
    });
    kids.push(table(['link', 'class', 'bytes', 'busy us', 'utilisation'], rows, 'kb-busiest'));
    section('kb-links', 'busiest links', kids);
  }

  /* ---- alpha-beta ----------------------------------------------------------- */
  function alphaBeta() {
    var f = R.figures || {};
    if (!('alpha_beta' in f) || !('kernel_span' in f)) return;
    var bars = [['simulated (kernel span)', f.kernel_span], ['alpha-beta model', f.alpha_beta]];
    if ('rs_bw_term' in f) bars.push(['  reduce-scatter bandwidth term', f.rs_bw_term]);
    if ('ag_bw_term' in f) bars.push(['  all-gather bandwidth term', f.ag_bw_term]);
    var max = Math.max.apply(null, bars.map(function (b) { return b[1]; })) || 1;
    var svg = sv('svg', {width: 640, height: bars.length * 28 + 10, id: 'kb-ab'});
    bars.forEach(function (b, i) {
      var w = 380 * b[1] / max;
      svg.appendChild(sv('text', {x: 0, y: i * 28 + 18, text: b[0], 'class': 'small'}));
      svg.appendChild(sv('rect', {x: 210, y: i * 28 + 5, width: w, height: 18, fill: i ? '#6baed6' : '#fd8d3c', 'class': 'kb-ab-bar'}));
      svg.appendChild(sv('text', {x: 214 + w, y: i * 28 + 18, text: b[1].toFixed(3) + ' us', 'class': 'small'}));
    });
    var rows = [['ratio simulated / model', f.ratio]];
    ['alpha', 'beta_bw', 'link_bw', 'world', 'bytes_per_rank', 'alg_bw', 'bus_bw'].forEach(function (k) { if (k in f) rows.push([k, f[k]]); });
    ['bound', 'rs_bound', 'ag_bound', 'algorithm', 'off_fit'].forEach(function (k) { if (R.notes && k in R.notes) rows.push([k, R.notes[k]]); });
    section('kb-alphabeta', 'alpha-beta model against the simulation', [svg, table(['', ''], rows, 'kv')]);
  }

  /* ---- probe ----------------------------------------------------------------- */
  function probe() {
    var cases = (R.cases || []).filter(function (c) { return !c.skipped; });
    section('kb-probe', 'probe cases', [table(['case', 'bytes', 'latency ns', 'overhead ns', 'wire ns', 'drain ns', 'eff GB/s', 'util', 'bottleneck'],
      cases.map(function (c) {
        return [c['case'], c.bytes, (c.latency_ps / 1e3).toFixed(3), (c.overhead_ps / 1e3).toFixed(3), (c.wire_ps / 1e3).toFixed(3),
                (c.drain_ps / 1e3).toFixed(3), c.eff_gbs.toFixed(2), pct(c.util), c.bottleneck.from + ' -> ' + c.bottleneck.to];
      }), 'kb-cases')]);
    var sw = cases.filter(function (c) { return c.sweep; });
    if (!sw.length || typeof uPlot === 'undefined') return;
    var xs = sw[0].sweep.map(function (p) { return p.bytes; });
    var s = section('kb-sweep', 'probe sweep: latency and bandwidth against size (log axes)', []);
    [['latency ns', function (p) { return p.latency_ps / 1e3; }, 'kb-sweep-latency'],
     ['effective GB/s', function (p) { return p.eff_gbs; }, 'kb-sweep-bw']].forEach(function (what) {
      var data = [xs].concat(sw.map(function (c) { return c.sweep.map(what[1]); }));
      var div = el('div', {id: what[2], cls: 'chart', 'data-points': String(xs.length * sw.length)});
      s.appendChild(div);
      new uPlot({title: what[0] + ' against bytes', width: 700, height: 300,
                 scales: {x: {time: false, distr: 3}, y: {distr: 3}},
                 axes: [{label: 'bytes'}, {label: what[0], size: 70}],
                 series: [{label: 'bytes'}].concat(sw.map(function (c, i) {
                   return {label: c['case'], stroke: palette(i), width: 2, points: {show: true, size: 6}};
                 }))}, data, div);
    });
  }
  function palette(i) {
    var p = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
    return p[i % p.length];
  }

  /* ---- sweep ------------------------------------------------------------------- */
  /* A chart per axis: the chosen figure against that axis's values, one line
   * per combination of the other axes' values (at most SWEEP_LINES); a
   * failed point is a gap. Numeric axes are drawn on a log axis when they
   * span a factor of 16 or more, others as evenly spaced categories. */
  var SWEEP_LINES = 24;
  function sweepReport() {
    var S = D.sweep, cols = S.columns, rows = S.rows, axes = S.axes;
    var colOf = {};
    cols.forEach(function (c, i) { colOf[c.name] = i; });
    var isAxis = {};
    axes.forEach(function (a) { isAxis[a.key] = 1; });
    function num(v) { var x = v === null || v === '' ? NaN : Number(v); return isFinite(x) ? x : null; }
    var figs = cols.filter(function (c) {
      if (isAxis[c.name] || c.name === 'status') return false;
      return rows.some(function (r) { return num(r[colOf[c.name]]) !== null; });
    }).map(function (c) { return c.name; });
    var failed = rows.filter(function (r) { return r[colOf.status] !== '0'; }).length;
    var kids = [table(['', ''], [['points', rows.length], ['failed', failed],
                                 ['axes', axes.map(function (a) { return a.key + ' (' + a.values.length + ')'; }).join(', ')]], 'kv')];
    var sec = section('kb-sweep-report', 'sweep: each figure against each axis', kids);
    if (!figs.length) { sec.appendChild(el('p', {text: 'no point has a numeric figure'})); return; }
    var prefer = ['sim_ps', 'figures.bus_bw', 'latency_ps', 'eff_gbs'];
    var pick = figs[0];
    for (var i = prefer.length - 1; i >= 0; i--) if (figs.indexOf(prefer[i]) >= 0) pick = prefer[i];
    var select = el('select', {id: 'kb-sweep-figure', onchange: function () { draw(select.value); }},
                    figs.map(function (f) {
                      var u = cols[colOf[f]].unit;
                      return el('option', {value: f, text: f + (u ? ' [' + u + ']' : '')});
                    }));
    select.value = pick;
    var charts = el('div', {id: 'kb-sweep-charts'});
    sec.appendChild(el('p', {}, ['figure: ', select]));
    sec.appendChild(charts);
    var pointTable = el('div', {});
    sec.appendChild(pointTable);
    function draw(fig) {
      charts.replaceChildren();
      var fc = colOf[fig], unit = cols[fc].unit;
      axes.forEach(function (ax, a) {
        var xs = ax.values.map(num), numeric = xs.every(function (x) { return x !== null; });
        var pos = xs.every(function (x) { return x > 0; });
        var lg = numeric && pos && Math.max.apply(null, xs) / Math.min.apply(null, xs) >= 16;
        var order = ax.values.map(function (v, k) { return k; });
        if (numeric) order.sort(function (p, q) { return xs[p] - xs[q]; });
        var xdata = order.map(function (k) { return numeric ? xs[k] : order.indexOf(k); });
        /* one line per combination of the other axes' values, in point order */
        var lines = [], lineOf = {};
        rows.forEach(function (r) {
          var key = axes.filter(function (o, b) { return b !== a; }).map(function (o) { return o.key + '=' + r[colOf[o.key]]; }).join(', ');
          if (!(key in lineOf)) { lineOf[key] = lines.length; lines.push({label: key || fig, y: xdata.map(function () { return null; })}); }
          var k = ax.values.indexOf(r[colOf[ax.key]]);
          if (k >= 0) lines[lineOf[key]].y[order.indexOf(k)] = r[colOf.status] === '0' ? num(r[fc]) : null;
        });
        var dropped = Math.max(0, lines.length - SWEEP_LINES);
        lines = lines.slice(0, SWEEP_LINES);
        var points = 0;
        lines.forEach(function (l) { l.y.forEach(function (v) { if (v !== null) points++; }); });
        var div = el('div', {id: 'kb-sweep-axis-' + a, cls: 'chart', 'data-axis': ax.key, 'data-points': String(points),
                             'data-lines': String(lines.length)});
        charts.appendChild(div);
        if (dropped) div.appendChild(el('p', {text: dropped + ' more lines not drawn (at most ' + SWEEP_LINES + ')'}));
        if (typeof uPlot === 'undefined') return;
        var labels = order.map(function (k) { return ax.values[k]; });
        var xaxis = {label: ax.key};
        if (!numeric) {
          xaxis.splits = function () { return labels.map(function (l, k) { return k; }); };
          xaxis.values = function (u, v) { return v.map(function (k) { return labels[k] !== undefined ? labels[k] : ''; }); };
        }
        new uPlot({title: fig + ' against ' + ax.key, width: 700, height: 300,
                   scales: {x: numeric ? {time: false, distr: lg ? 3 : 1} : {time: false, range: [-0.5, labels.length - 0.5]}},
                   axes: [xaxis, {label: fig + (unit ? ' [' + unit + ']' : ''), size: 80}],
                   series: [{label: ax.key}].concat(lines.map(function (l, k) {
                     return {label: l.label, stroke: palette(k), width: 2, points: {show: true, size: 6}};
                   }))}, [xdata].concat(lines.map(function (l) { return l.y; })), div);
      });
      pointTable.replaceChildren(el('h3', {text: 'points'}), table(
        axes.map(function (x) { return x.key; }).concat(['status', fig + (unit ? ' [' + unit + ']' : ''), 'error']),
        rows.map(function (r) {
          return axes.map(function (x) { return r[colOf[x.key]]; }).concat(
            [r[colOf.status], r[fc] === null ? '' : r[fc], r[colOf.error] || '']);
        }), 'kb-sweep-points'));
      charts.setAttribute('data-figure', fig);
    }
    draw(pick);
  }

  /* ---- timeline --------------------------------------------------------------- */
  function timeline() {
    var T = D.timeline;
    if (!T || T.t.length < 2) return;
    var t = T.t, n = t.length - 1, L = T.levels, t0 = t[0], t1 = t[n];
    var rows = [];
    Object.keys(T.units).forEach(function (k) {
      var pe = Math.floor(k / 3), u = k % 3, cpe = pe % M.pes, cube = Math.floor(pe / M.pes);
      rows.push({name: 'sip' + Math.floor(cube / M.cubes) + '.cube' + (cube % M.cubes) + '.pe' + cpe + ' ' + UNITS[u], s: T.units[k]});
    });
    var lrows = Object.keys(T.links).map(function (k) { return {name: linkName(+k), s: T.links[k], id: +k}; });
    lrows.sort(function (a, b) { return linkBusy(b.id) - linkBusy(a.id) || a.id - b.id; });
    rows = rows.concat(lrows);
    var W = 1000, RH = 3, LW = 0, H = rows.length * RH;
    /* one line chart of the mean busy fraction per unit kind and link class */
    var groups = {}, order = [];
    rows.forEach(function (r) {
      var g = r.id === undefined ? r.name.split(' ')[1] : links[r.id][2];
      if (!groups[g]) { groups[g] = {sum: new Float64Array(n), k: 0}; order.push(g); }
      for (var i = 0; i < n; i++) groups[g].sum[i] += (r.s.charCodeAt(i) - 48) / L;
      groups[g].k++;
    });
    var sec = section('kb-timeline', 'timeline of the measured region (' + us(t1 - t0) + ' us, ' + n + ' intervals)', []);
    if (typeof uPlot !== 'undefined') {
      var xs = [], data;
      for (var i = 0; i < n; i++) xs.push((t[i] - t0) / 1e6);
      data = [xs].concat(order.map(function (g) {
        return Array.prototype.map.call(groups[g].sum, function (v) { return v / groups[g].k; });
      }));
      var div = el('div', {id: 'kb-tl-chart', cls: 'chart', 'data-points': String(n * order.length)});
      sec.appendChild(el('p', {text: 'mean busy fraction of the busy PE units and links of each kind (the PE units and links with any use):'}));
      sec.appendChild(div);
      new uPlot({width: 1000, height: 260, scales: {x: {time: false}, y: {range: [0, 1]}},
                 axes: [{label: 'us from the region\'s start'}, {label: 'busy fraction'}],
                 series: [{label: 'us'}].concat(order.map(function (g, i) {
                   return {label: g + ' (' + groups[g].k + ')', stroke: palette(i), width: 1.5, paths: uPlot.paths.stepped({align: 1})};
                 }))}, data, div);
    }
    /* every series as one row of pixels of a canvas image */
    var canvas = el('canvas', {width: W, height: H, id: 'kb-tl-canvas', 'data-rows': String(rows.length)});
    var ctx = canvas.getContext('2d'), img = ctx.createImageData(W, H), px = img.data;
    var x = new Int32Array(n + 1);
    for (var j = 0; j <= n; j++) x[j] = Math.round((t[j] - t0) / (t1 - t0 || 1) * (W - LW)) + LW;
    var lut = [];
    for (var v = 0; v <= L; v++) {
      var c = heat(v / L).match(/\d+/g);
      lut.push(v ? c.map(Number) : [245, 245, 245]);
    }
    rows.forEach(function (r, ri) {
      for (var i = 0; i < n; i++) {
        var col = lut[r.s.charCodeAt(i) - 48], xa = x[i], xb = Math.max(x[i + 1], xa + 1);
        for (var yy = ri * RH; yy < ri * RH + RH - (RH > 2 ? 1 : 0); yy++)
          for (var xx = xa; xx < xb && xx < W; xx++) {
            var o = (yy * W + xx) * 4;
            px[o] = col[0]; px[o + 1] = col[1]; px[o + 2] = col[2]; px[o + 3] = 255;
          }
      }
    });
    ctx.putImageData(img, 0, 0);
    var tip = el('div', {cls: 'tip', id: 'kb-tl-tip', text: 'hover the image: a row is a PE unit or a link'});
    canvas.addEventListener('mousemove', function (ev) {
      var rect = canvas.getBoundingClientRect(), ri = Math.floor((ev.clientY - rect.top) / RH);
      var tx = t0 + (ev.clientX - rect.left) / W * (t1 - t0), i = 0;
      while (i < n - 1 && t[i + 1] <= tx) i++;
      if (ri < 0 || ri >= rows.length) return;
      tip.textContent = rows[ri].name + ' at ' + ((tx - t0) / 1e6).toFixed(3) + ' us: busy ' +
                        pct((rows[ri].s.charCodeAt(i) - 48) / L);
    });
    sec.appendChild(el('p', {text: rows.length + ' rows: ' + (rows.length - lrows.length) + ' PE units (DMA, GEMM, MATH), then ' +
                                    lrows.length + ' link directions, busiest first; colour = busy fraction of each interval ' +
                                    '(a link or unit counts busy time when a service is reserved; what exceeds an interval is carried into the next, ' +
                                    'so a row is exact over the region and approximate within an interval).'}));
    sec.appendChild(tip);
    sec.appendChild(el('div', {cls: 'scroll tall'}, [canvas]));
  }

  /* ---- the page ---------------------------------------------------------------- */
  document.title = D.title;
  app.appendChild(el('h1', {text: D.title}));
  describe();
  if (D.kind === 'sweep') {
    sweepReport();
    done();
    return;
  }
  if (D.kind === 'run') runFigures();
  if (D.kind === 'probe') probe();
  if (D.kind === 'topo') topoFigures();
  machine();
  if (D.kind !== 'topo') busiest();
  alphaBeta();
  unitHeat();
  memories();
  timeline();
  /* #cube=S.C or #link=ID in the address opens that panel, as a click does */
  function fromHash() {
    var m = /^#cube=(\d+)\.(\d+)$/.exec(location.hash), l = /^#link=(\d+)$/.exec(location.hash);
    if (m && +m[1] < M.sips && +m[2] < M.cubes) showCube(+m[1], +m[2]);
    if (l && +l[1] < links.length) showLink(+l[1]);
  }
  window.addEventListener('hashchange', fromHash);
  fromHash();
  done();
  /* the footer with the drawing time; the page is ready */
  function done() {
    var ms = performance.now() - t0;
    app.appendChild(el('p', {cls: 'foot', id: 'kb-rendered', 'data-ms': ms.toFixed(1),
                             'data-since-start-ms': performance.now().toFixed(1),
                             text: 'kernbench ' + ((R.kernbench || {}).version || '') + ' - drawn in ' + ms.toFixed(0) + ' ms'}));
    document.body.setAttribute('data-ready', '1');
  }
})();
