// The live page as the browser gets it: one HTML page, one stylesheet, one script. No build
// step: the script is plain browser JavaScript, kept here as text so it ships inside dist/ with
// the server; uPlot (the charting library) is served from node_modules beside it. Every figure is
// put in the page as text (textContent), never as HTML: plugin messages and export names come
// from users.

export const LIVE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Spate · live</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/live/uplot.css">
<link rel="stylesheet" href="/live/live.css">
<script src="/live/uplot.js" defer></script>
<script src="/live/live.js" defer></script>
</head>
<body>
<header>
  <h1>Spate <span>live</span></h1>
  <p id="status">loading…</p>
</header>
<main>
  <section class="tiles">
    <div class="tile"><h2>events/s in</h2><p id="rate-in" class="big">–</p></div>
    <div class="tile"><h2>events/s processed</h2><p id="rate-processed" class="big">–</p></div>
    <div class="tile"><h2>messages behind</h2><p id="lag-total" class="big">–</p></div>
    <div class="tile"><h2>export runs, 24 h</h2><p id="export-runs" class="big">–</p><p id="export-runs-by-status" class="small"></p></div>
    <div class="tile"><h2>plugin errors, 1 h</h2><p id="plugin-errors" class="big">–</p></div>
  </section>
  <section class="panel wide">
    <h2>Events per second</h2>
    <div id="rates-chart"></div>
    <p id="no-targets" class="note" hidden>No ingest nodes or workers to read: set CLUSTER_METRICS_URLS on the admin server (npm start sets it).</p>
  </section>
  <section class="panel">
    <h2>Lag per shard <span class="unit">(messages not yet processed)</span></h2>
    <div id="lag" class="bars"></div>
  </section>
  <section class="panel">
    <h2>Streams</h2>
    <table id="streams"><thead><tr><th>stream</th><th>messages</th><th>size</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="panel wide">
    <h2>Processes</h2>
    <table id="processes"><thead><tr><th>process</th><th>state</th><th>events/s</th><th>shards</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="panel wide" id="details">
    <h2>Export runs and plugin errors</h2>
    <form id="key-form">
      <label>Personal API key <input id="key" type="password" autocomplete="off" placeholder="phx_…"></label>
      <button type="submit">Show</button>
      <span class="note">Names, messages and addresses need a key (scopes batch_export:read, plugin:read); it stays in this tab.</span>
    </form>
    <p id="details-status" class="note"></p>
    <h3>Latest export runs</h3>
    <table id="runs"><thead><tr><th>updated</th><th>export</th><th>project</th><th>status</th><th>records</th><th>interval</th><th>error</th></tr></thead><tbody></tbody></table>
    <h3>Latest plugin errors</h3>
    <table id="plugin-log"><thead><tr><th>time</th><th>plugin</th><th>config</th><th>project</th><th>message</th></tr></thead><tbody></tbody></table>
    <h3>Process addresses</h3>
    <table id="addresses"><thead><tr><th>process</th><th>metrics</th></tr></thead><tbody></tbody></table>
  </section>
</main>
</body>
</html>
`;

export const LIVE_STYLE = `
:root { --fg: #1f2933; --muted: #616e7c; --line: #e4e7eb; --in: #2563eb; --processed: #16a34a; --bad: #dc2626; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #f5f7fa; }
header { display: flex; align-items: baseline; gap: 16px; padding: 12px 20px; background: #fff; border-bottom: 1px solid var(--line); }
h1 { margin: 0; font-size: 20px; } h1 span { color: var(--muted); font-weight: 400; }
#status { margin: 0; color: var(--muted); }
main { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; padding: 14px 20px; }
.tiles { grid-column: 1 / -1; display: grid; grid-template-columns: repeat(5, 1fr); gap: 14px; }
.tile, .panel { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 0; }
.wide { grid-column: 1 / -1; }
h2 { margin: 0 0 6px; font-size: 13px; font-weight: 600; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
h3 { margin: 12px 0 4px; font-size: 13px; }
.unit { text-transform: none; font-weight: 400; }
.big { margin: 0; font-size: 28px; font-variant-numeric: tabular-nums; }
.small, .note { margin: 2px 0; color: var(--muted); font-size: 12px; }
#rate-in { color: var(--in); } #rate-processed { color: var(--processed); }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 500; }
td.num { text-align: right; }
.down { color: var(--bad); font-weight: 600; }
.bars { display: flex; align-items: flex-end; gap: 3px; height: 140px; padding-top: 6px; }
.bar { flex: 1; display: flex; flex-direction: column; justify-content: flex-end; align-items: center; height: 100%; min-width: 0; }
.bar div { width: 100%; background: #f59e0b; min-height: 1px; border-radius: 2px 2px 0 0; }
.bar span { font-size: 10px; color: var(--muted); }
form { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
input { font: inherit; padding: 3px 6px; width: 22em; }
`;

export const LIVE_SCRIPT = `'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const KEY = 'spate-live-key';
  let chart;

  const number = (n) => (n === null || n === undefined ? '–' : n >= 100 ? Math.round(n).toLocaleString('en') : n.toLocaleString('en', { maximumFractionDigits: 1 }));
  const bytes = (n) => {
    if (n === null || n === undefined) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
  };
  const time = (iso) => (iso ? new Date(iso).toLocaleTimeString('en-GB') : '');
  const cell = (text, className) => {
    const td = document.createElement('td');
    td.textContent = text === null || text === undefined ? '' : String(text);
    if (className) td.className = className;
    return td;
  };
  const fill = (tableId, rows) => {
    const body = $(tableId).tBodies[0];
    body.replaceChildren(...rows.map((cells) => { const tr = document.createElement('tr'); tr.append(...cells); return tr; }));
  };

  function drawChart(history) {
    const data = [history.map((p) => p.at / 1000), history.map((p) => p.in), history.map((p) => p.processed)];
    const box = $('rates-chart');
    if (!chart) {
      chart = new uPlot({
        width: Math.max(300, box.clientWidth), height: 220,
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(10, max * 1.1)] } },
        series: [{}, { label: 'in', stroke: '#2563eb', width: 2, spanGaps: true }, { label: 'processed', stroke: '#16a34a', width: 2, spanGaps: true }],
        axes: [{}, { label: 'events/s', size: 60 }],
        legend: { live: false },
      }, data, box);
      window.addEventListener('resize', () => chart.setSize({ width: Math.max(300, box.clientWidth), height: 220 }));
    } else {
      chart.setData(data);
    }
  }

  function drawLag(lag) {
    const max = Math.max(1, ...lag.map((l) => l.messages));
    $('lag').replaceChildren(...lag.map((l) => {
      const bar = document.createElement('div');
      bar.className = 'bar';
      bar.title = 'shard ' + l.shard + ': ' + l.messages + ' messages';
      const fillDiv = document.createElement('div');
      fillDiv.style.height = (100 * l.messages / max) + '%';
      const label = document.createElement('span');
      label.textContent = String(l.shard);
      bar.append(fillDiv, label);
      return bar;
    }));
  }

  function render(f) {
    $('status').textContent = 'updated ' + new Date(f.at).toLocaleTimeString('en-GB') + ' · every ' + f.refreshMs / 1000 + ' s';
    $('rate-in').textContent = number(f.rates.in);
    $('rate-processed').textContent = number(f.rates.processed);
    $('lag-total').textContent = f.lag.length ? number(f.lag.reduce((a, l) => a + l.messages, 0)) : '–';
    $('no-targets').hidden = f.targets > 0;
    if (f.activity) {
      const runs = Object.entries(f.activity.exportRunsByStatus);
      $('export-runs').textContent = number(runs.reduce((a, [, n]) => a + n, 0));
      $('export-runs-by-status').textContent = runs.map(([s, n]) => s + ' ' + n).join(' · ');
      $('plugin-errors').textContent = number(f.activity.pluginErrorsLastHour);
    }
    drawChart(f.history);
    drawLag(f.lag);
    fill('streams', f.streams.map((s) => [cell(s.name), cell(number(s.messages), 'num'), cell(bytes(s.bytes), 'num')]));
    fill('processes', f.processes.map((p) => [
      cell(p.name), cell(p.up ? 'up' : 'down', p.up ? '' : 'down'), cell(number(p.perSecond), 'num'),
      cell(p.role === 'worker' ? (p.shards.length ? p.shards.join(', ') : 'none') : ''),
    ]));
  }

  async function details(key) {
    const res = await fetch('/live/details', { headers: { authorization: 'Bearer ' + key }, cache: 'no-store' });
    const body = await res.json();
    if (!res.ok) { $('details-status').textContent = body.detail || ('HTTP ' + res.status); return; }
    $('details-status').textContent = body.notes.join(' ');
    fill('runs', (body.exportRuns || []).map((r) => [
      cell(time(r.last_updated_at)), cell(r.batch_export_name), cell(r.team_id, 'num'), cell(r.status, r.status.startsWith('Failed') ? 'down' : ''),
      cell(r.records_completed, 'num'), cell(time(r.data_interval_start) + ' – ' + time(r.data_interval_end)), cell(r.latest_error),
    ]));
    fill('plugin-log', (body.pluginErrors || []).map((e) => [cell(time(e.timestamp)), cell(e.plugin_name), cell(e.plugin_config_id, 'num'), cell(e.team_id, 'num'), cell(e.message)]));
    fill('addresses', Object.entries(body.processUrls || {}).map(([name, url]) => [cell(name), cell(url)]));
  }

  async function refresh() {
    let wait = 2000;
    try {
      const res = await fetch('/live/figures', { cache: 'no-store' });
      const f = await res.json();
      wait = f.refreshMs;
      render(f);
      const key = sessionStorage.getItem(KEY);
      if (key) await details(key);
    } catch (err) {
      $('status').textContent = 'figures unavailable (' + err.message + '); trying again';
    }
    setTimeout(refresh, wait);
  }

  $('key-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const key = $('key').value.trim();
    if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
    $('key').value = '';
    if (key) details(key).catch((err) => { $('details-status').textContent = err.message; });
  });
  refresh();
})();
`;
