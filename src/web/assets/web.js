/*
 * web.js — kernbench web's page: the run form (from /api/choices), a run's
 * progress and cancel, its report, the history of the results directory and
 * two runs side by side with their differences marked. docs/web.md.
 */
(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var current = null, poll = null, choices = null;

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
  function api(method, path, body) {
    var o = {method: method, headers: {}};
    if (body) { o.headers['Content-Type'] = 'application/json'; o.body = JSON.stringify(body); }
    return fetch(path, o).then(function (r) {
      return r.json().then(function (j) { return {status: r.status, body: j}; });
    });
  }

  /* ---- the form ------------------------------------------------------------ */
  function showFor() {
    var cmd = $('f-command').value;
    document.querySelectorAll('.for-run, .for-probe').forEach(function (e) {
      e.hidden = !e.classList.contains('for-' + cmd);
    });
  }
  function benchOpts() {
    var b = choices.benches.filter(function (x) { return x.name === $('f-bench').value; })[0];
    var box = $('f-opts');
    box.replaceChildren();
    (b ? b.opts : []).forEach(function (o) {
      box.appendChild(el('label', {title: o.help}, ['--opt ' + o.key + ' ',
        el('input', {'data-key': o.key, placeholder: o['default'], size: 10})]));
    });
  }
  function request() {
    var cmd = $('f-command').value, r = {command: cmd};
    var lines = function (id) { return $(id).value.split('\n').map(function (s) { return s.trim(); }).filter(Boolean); };
    r.sets = lines('f-sets');
    if ($('f-model').value) r.fabric_model = $('f-model').value;
    if ($('f-topology').value.trim()) r.topology_yaml = $('f-topology').value;
    if (cmd === 'run') {
      r.bench = $('f-bench').value;
      r.opts = [];
      $('f-opts').querySelectorAll('input').forEach(function (i) {
        if (i.value.trim()) r.opts.push(i.getAttribute('data-key') + '=' + i.value.trim());
      });
    }
    if (cmd === 'probe') {
      r.cases = [];
      $('f-cases').querySelectorAll('input:checked').forEach(function (i) { r.cases.push(i.value); });
      r.sweep = $('f-sweep').checked;
      if ($('f-bytes').value.trim()) r.bytes = $('f-bytes').value.trim();
    }
    if (cmd !== 'topo') r.no_data = $('f-nodata').checked;
    return r;
  }
  function setStatus(state, text) {
    $('run-status').setAttribute('data-state', state);
    $('run-status').textContent = text;
  }
  function submit(ev) {
    ev.preventDefault();
    $('run-error').hidden = true;
    api('POST', '/api/runs', request()).then(function (r) {
      if (r.status !== 202) {
        setStatus('error', 'refused (' + r.status + ')');
        $('run-error').textContent = r.body.error;
        $('run-error').hidden = false;
        return;
      }
      current = r.body.id;
      $('f-cancel').disabled = false;
      setStatus('running', current + ': started');
      watch();
    });
  }
  function watch() {
    clearTimeout(poll);
    api('GET', '/api/runs/' + current).then(function (r) {
      var s = r.body;
      if (s.state === 'running') {
        setStatus('running', s.id + ': running ' + s.wall_s.toFixed(1) + ' s' + (s.progress ? ', ' + s.progress : ''));
        poll = setTimeout(watch, 400);
        return;
      }
      $('f-cancel').disabled = true;
      setStatus(s.state, s.id + ': ' + s.state + ' after ' + s.wall_s.toFixed(1) + ' s' +
                ('exit' in s ? ' (exit ' + s.exit + ')' : 'signal' in s ? ' (signal ' + s.signal + ')' : ''));
      if (s.state !== 'done' && s.stderr_tail) {
        $('run-error').textContent = s.stderr_tail;
        $('run-error').hidden = false;
      }
      if (s.state === 'done' || s.state === 'failed') showReport(s.id);
      history();
    });
  }
  function cancel() {
    if (current) api('POST', '/api/runs/' + current + '/cancel').then(watch);
  }
  function showReport(id) {
    $('report-sec').hidden = false;
    $('report').src = '/results/' + id + '/report.html';
    $('report').setAttribute('data-run', id);
    $('report-link').href = '/results/' + id + '/report.html';
  }

  /* ---- history ------------------------------------------------------------------ */
  function history() {
    api('GET', '/api/runs').then(function (r) {
      var body = $('history').tBodies[0], checked = selected();
      body.replaceChildren();
      r.body.forEach(function (s) {
        var box = el('input', {type: 'checkbox', value: s.id, onchange: pickChanged});
        if (checked.indexOf(s.id) >= 0) box.checked = true;
        var link = el('a', {href: '#', text: s.id, onclick: function (e) { e.preventDefault(); showReport(s.id); }});
        body.appendChild(el('tr', {'data-id': s.id, 'data-state': s.state}, [
          el('td', {}, [box]), el('td', {}, [link]), el('td', {cls: 'state-' + s.state, text: s.state}),
          el('td', {text: (s.wall_s || 0).toFixed(1)}),
          el('td', {cls: 'cmd', text: (s.command_line || []).filter(function (a, i, v) {
            return !/^--(json|report)$/.test(a) && !/^--(json|report)$/.test(v[i - 1] || '');
          }).join(' ')})]));
      });
      pickChanged();
    });
  }
  function selected() {
    return Array.prototype.map.call(document.querySelectorAll('#history input:checked'), function (i) { return i.value; });
  }
  function pickChanged() { $('compare-btn').disabled = selected().length !== 2; }

  /* ---- comparison ------------------------------------------------------------------ */
  function flatten(o, prefix, out) {
    if (o === null || typeof o !== 'object') { out[prefix] = o; return out; }
    Object.keys(o).forEach(function (k) {
      if (k === 'unit_of' || k === 'command_line' || k === 'kernbench') return;
      flatten(o[k], prefix ? prefix + '.' + k : k, out);
    });
    return out;
  }
  function reportData(id) {
    return fetch('/results/' + id + '/report.html').then(function (r) { return r.text(); }).then(function (t) {
      var m = /<script type="application\/json" id="kb-data">([\s\S]*?)<\/script>/.exec(t);
      return m ? JSON.parse(m[1]) : null;
    });
  }
  function compare() {
    var ids = selected().sort();
    Promise.all(ids.map(reportData)).then(function (d) {
      var box = $('compare');
      box.replaceChildren();
      $('compare-sec').hidden = false;
      if (!d[0] || !d[1]) { box.textContent = 'both runs need a report'; return; }
      var a = flatten(d[0].result, '', {}), b = flatten(d[1].result, '', {}), keys = {};
      Object.keys(a).concat(Object.keys(b)).forEach(function (k) { keys[k] = 1; });
      /* the run folders' own paths always differ: not a difference of the runs */
      delete keys['options.json'];
      delete keys['options.report'];
      var rows = Object.keys(keys).sort().map(function (k) {
        var x = a[k], y = b[k], same = JSON.stringify(x) === JSON.stringify(y), rel = '';
        if (typeof x === 'number' && typeof y === 'number' && x !== 0) rel = ((y - x) / Math.abs(x) * 100).toFixed(2) + '%';
        return el('tr', {cls: same ? '' : 'diff', 'data-key': k}, [el('td', {text: k}), el('td', {text: String(x)}),
                                                                    el('td', {text: String(y)}), el('td', {text: same ? '' : rel || 'differs'})]);
      });
      var t = el('table', {id: 'compare-figures'}, [el('tr', {}, [el('th', {text: 'field'}), el('th', {text: ids[0]}),
                                                                 el('th', {text: ids[1]}), el('th', {text: 'difference'})])]);
      var differ = rows.filter(function (r) { return r.className; });
      differ.forEach(function (r) { t.appendChild(r); });
      box.appendChild(el('p', {text: differ.length + ' of ' + rows.length + ' fields of the two records differ (below, marked); ' +
                                     (rows.length - differ.length) + ' are the same.'}));
      box.appendChild(t);
      box.appendChild(linkDiff(d, ids));
      box.appendChild(el('div', {cls: 'pair'}, ids.map(function (id) {
        return el('iframe', {src: '/results/' + id + '/report.html#kb-machine', title: id});
      })));
    }).catch(function (e) {
      $('compare').appendChild(el('pre', {id: 'compare-error', text: 'comparison failed: ' + e}));
    });
  }
  /* the links whose busy time differs most between the two runs */
  function linkDiff(d, ids) {
    var m = d[0].machine, la = d[0].link_busy_ps || [], lb = d[1].link_busy_ps || [];
    var same = d[1].machine && m.links.length === d[1].machine.links.length;
    if (!same) return el('p', {text: 'the two machines differ: links are not compared'});
    var idx = [];
    for (var i = 0; i < m.links.length; i++) if ((la[i] || 0) !== (lb[i] || 0)) idx.push(i);
    idx.sort(function (x, y) { return Math.abs(lb[y] - la[y]) - Math.abs(lb[x] - la[x]) || x - y; });
    var t = el('table', {id: 'compare-links'}, [el('tr', {}, ['link', ids[0] + ' busy us', ids[1] + ' busy us', 'difference'].map(function (h) {
      return el('th', {text: h});
    }))]);
    idx.slice(0, 15).forEach(function (i) {
      var n = m.nodes[m.links[i][0]][0] + ' -> ' + m.nodes[m.links[i][1]][0];
      t.appendChild(el('tr', {cls: 'diff'}, [n, (la[i] / 1e6).toFixed(3), (lb[i] / 1e6).toFixed(3),
                                             ((lb[i] - la[i]) / 1e6).toFixed(3)].map(function (c) { return el('td', {text: c}); })));
    });
    return el('div', {}, [el('h3', {text: idx.length + ' link directions differ in busy time; the 15 most:'}), t]);
  }

  /* ---- start --------------------------------------------------------------------- */
  api('GET', '/api/choices').then(function (r) {
    choices = r.body;
    choices.benches.forEach(function (b) { $('f-bench').appendChild(el('option', {value: b.name, text: b.name, title: b.summary})); });
    choices.models.forEach(function (m) { $('f-model').appendChild(el('option', {value: m, text: m})); });
    choices.cases.forEach(function (c) {
      $('f-cases').appendChild(el('label', {title: c.doc}, [el('input', {type: 'checkbox', value: c.name}), ' ' + c.name]));
    });
    var L = choices.limits;
    $('limits').textContent = 'at most ' + L.max_runs + ' runs at once, each ' + L.run_wall_s + ' s and ' +
                              Math.round(L.run_mem_bytes / 1048576) + ' MiB at most';
    benchOpts();
    showFor();
    document.body.setAttribute('data-ready', '1');
  });
  $('f-command').addEventListener('change', showFor);
  $('f-bench').addEventListener('change', benchOpts);
  $('run-form').addEventListener('submit', submit);
  $('f-cancel').addEventListener('click', cancel);
  $('compare-btn').addEventListener('click', compare);
  history();
})();
