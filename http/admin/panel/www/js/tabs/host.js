// Host: health, live stats (subscribe-stats), the historical chart, and
// the tunnel servers and clients.
import { get, post } from '../api.js';
import { h, clear, field, input, select, form, run, out, table, badge, mono, name, fmtTime, fmtBytes, card, chart, copy } from '../ui.js';

const t = {
  id: 'host',
  title: 'Host',
  hints: ['update-tunnel', 'update-tunnel-clients', 'update-database', 'update-health'],
};

const KEEP = 120; // seconds of live samples kept for the chart
let app, healthEl, liveEl, liveSVG, childSVG, histSVG, histInfo, childrenEl, serversEl, clientsEl, minutesSel;
let samples = []; // {t, total, children}
const scale = { live: null, kids: null, hist: null };

t.init = (root, a) => {
  app = a;
  healthEl = h('div');
  liveEl = h('dl', { class: 'kv' });
  liveSVG = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  liveSVG.setAttribute('class', 'chart');
  liveSVG.setAttribute('role', 'img');
  liveSVG.setAttribute('aria-label', 'Requests per second, last two minutes');
  childSVG = liveSVG.cloneNode();
  childSVG.setAttribute('aria-label', 'Tunnel children and open connections, last two minutes');
  histSVG = liveSVG.cloneNode();
  histSVG.setAttribute('aria-label', 'Requests per minute, history');
  histInfo = h('p', { class: 'help' });
  for (const k of Object.keys(scale)) scale[k] = h('span', { class: 'legend' });
  childrenEl = h('div');
  serversEl = h('div');
  clientsEl = h('div');
  minutesSel = select('minutes', [['60', 'last hour'], ['360', 'last 6 hours'], ['1440', 'last 24 hours']], '60');
  minutesSel.addEventListener('change', loadHistory);

  const server = form([
    field('Name', input('name', { placeholder: 'web' })),
    field('Local port', input('port', { type: 'number', min: 1, max: 65535, required: true })),
    field('Target host', input('host', { placeholder: '127.0.0.1' })),
    field('Key seed (64 hex, optional)', input('key', { class: 'mono', autocomplete: 'off' })),
    field('Domain (optional)', input('domain', { placeholder: 'example.p2p' })),
    field('Secure', h('input', { type: 'checkbox', name: 'secure' })),
    field('UDP', h('input', { type: 'checkbox', name: 'udp' })),
  ], 'Create server', async (v, f) => {
    const body = { port: v.port, secure: v.secure, udp: v.udp };
    for (const k of ['name', 'host', 'key', 'domain']) if (v[k]) body[k] = v[k];
    const r = await post('/api/tunnel-create', body);
    f.reset();
    return 'Created ' + r.id;
  });
  const client = form([
    field('Domain (yours)', input('domain', { required: true })),
    field('Key', input('key', { required: true, class: 'mono', placeholder: 'hs://…' })),
    field('Port', input('port', { type: 'number', min: 1, max: 65535, required: true })),
    field('Service name', input('serviceName', { placeholder: 'optional' })),
    field('Protocol', select('protocol', ['tcp', 'udp'], 'tcp')),
  ], 'Create client', async (v, f) => {
    const body = { domain: v.domain, key: v.key, port: v.port, protocol: v.protocol };
    if (v.serviceName) body.serviceName = v.serviceName;
    const r = await post('/api/tunnel-client-create', body);
    f.reset();
    return 'Created ' + r.id;
  });

  root.append(
    h('div', { class: 'grid' },
      card('Health', healthEl),
      card('Live', liveEl)),
    h('div', { class: 'grid' },
      card('Requests per second', liveSVG, h('p', { class: 'legend' }, h('span', { class: 'a' }, '— admin + proxy requests/s '), scale.live)),
      card('Tunnels', childSVG, h('p', { class: 'legend' }, h('span', { class: 'a' }, '— tunnel children '), h('span', { class: 'b' }, '— open connections '), scale.kids))),
    card('History', h('div', { class: 'row' }, field('Window', minutesSel)), histSVG, h('p', {}, scale.hist), histInfo),
    card('Tunnel servers', server, serversEl),
    card('Tunnel clients', client, clientsEl),
    card('Tunnel children', childrenEl),
  );

  app.socket.addEventListener('stats-snapshot', (ev) => {
    const m = ev.detail;
    if (m.stats) live(m.stats);
    if (m.historical) history(m.historical, m.minutes);
    if (m.health) renderHealth(m.health);
  });
  app.socket.addEventListener('update-stats', (ev) => { if (ev.detail.stats) live(ev.detail.stats); });
  app.socket.addEventListener('update-health', () => { if (isShown()) loadHealth(); });
};

const isShown = () => !document.getElementById('tab-host').hidden;

t.show = () => app.socket.subscribe('stats', { type: 'subscribe-stats', minutes: Number(minutesSel.value) });
t.hide = () => app.socket.unsubscribe('stats', { type: 'unsubscribe-stats' });

function live(s) {
  const req = s.requests || {};
  const kids = s.tunnelChildren || [];
  const conns = kids.reduce((n, c) => n + (c.connections || 0), 0);
  const last = samples[samples.length - 1];
  if (!last || last.t !== s.timestamp) samples.push({ t: s.timestamp, total: req.total || 0, children: kids.length, conns });
  if (samples.length > KEEP + 1) samples = samples.slice(-KEEP - 1);
  const rate = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = Math.max(1, (samples[i].t - samples[i - 1].t) / 1000);
    rate.push(Math.max(0, (samples[i].total - samples[i - 1].total) / dt));
  }
  chart(liveSVG, [rate], { scaleEl: scale.live });
  chart(childSVG, [samples.map((x) => x.children), samples.map((x) => x.conns)], { scaleEl: scale.kids });
  const p = s.process || {};
  clear(liveEl,
    h('dt', {}, 'Requests'), h('dd', { id: 'live-requests' }, `${(req.total || 0).toLocaleString()} (${(req.failed || 0).toLocaleString()} failed, ${(req.successRate ?? 100).toFixed(1)}% ok)`),
    h('dt', {}, 'Avg response'), h('dd', {}, `${(req.avgResponseTime || 0).toFixed(2)} ms`),
    h('dt', {}, 'Tunnel children'), h('dd', {}, String(kids.length)),
    h('dt', {}, 'CPU'), h('dd', {}, p.cpuUsage ? `${p.cpuUsage.percentage.toFixed(1)} %` : '—'),
    h('dt', {}, 'Memory'), h('dd', {}, p.memoryUsage ? fmtBytes(p.memoryUsage.rss) : '—'),
    h('dt', {}, 'Domains'), h('dd', {}, s.database ? String(s.database.domains) : '—'),
    h('dt', {}, 'Sampled'), h('dd', {}, fmtTime(s.timestamp)));
  clear(childrenEl, table(['Id', 'Type', 'Status', 'Uptime', 'Connections', 'In', 'Out'], kids.map((c) =>
    h('tr', {}, h('td', {}, mono(c.id)), h('td', {}, c.type || ''), h('td', {}, badge(c.status || '')),
      h('td', {}, c.uptime != null ? `${Math.round(c.uptime)} s` : '—'),
      h('td', {}, `${c.connections ?? 0} open / ${c.connectionsTotal ?? 0}`),
      h('td', {}, fmtBytes(c.bytesIn)), h('td', {}, fmtBytes(c.bytesOut)))), 'No tunnel servers or clients running.'));
}

function history(points, minutes) {
  const tot = points.map((p) => (p.data && p.data.requests ? p.data.requests.total : 0));
  const perMin = [];
  for (let i = 1; i < tot.length; i++) perMin.push(Math.max(0, tot[i] - tot[i - 1]));
  chart(histSVG, [perMin], { scaleEl: scale.hist });
  histInfo.textContent = points.length
    ? `${points.length} samples (one a minute) from ${fmtTime(points[0].timestamp)} to ${fmtTime(points[points.length - 1].timestamp)}, last ${minutes || minutesSel.value} minutes.`
    : 'No history yet: the node keeps one sample a minute.';
}

async function loadHistory() {
  const m = await get('/api/stats/historical?minutes=' + minutesSel.value);
  const pts = Array.isArray(m) ? m : m.data || m.samples || m.historical || [];
  history(pts, Number(minutesSel.value));
}

function renderHealth(hl) {
  const svc = hl.services || {};
  const deps = hl.dependencies || {};
  clear(healthEl, h('dl', { class: 'kv' },
    h('dt', {}, 'Status'), h('dd', {}, badge(hl.status)),
    h('dt', {}, 'Uptime'), h('dd', {}, `${hl.uptime} s`),
    Object.entries(svc).map(([k, v]) => [h('dt', {}, k), h('dd', {}, badge(v.healthy ? 'healthy' : 'degraded'))]),
    Object.entries(deps).map(([k, v]) => [h('dt', {}, k), h('dd', {}, badge(v.healthy ? 'healthy' : 'degraded'))]),
    h('dt', {}, 'Checked'), h('dd', {}, new Date(hl.timestamp).toLocaleString())));
}

async function loadHealth() {
  // 503 carries the same body when degraded: show it either way.
  const r = await fetch('/api/health?probe=readiness');
  renderHealth(await r.json());
}

t.refresh = async () => {
  const [servers, clients] = await Promise.all([get('/api/tunnel-servers'), get('/api/tunnel-clients'), loadHealth()]);
  clear(serversEl, table(['Id', 'Name', 'Target', 'State', 'Key', ''], servers.map((s) => {
    const o = out();
    const acts = tunnelActions(s.id, '/api/tunnel-restart', '/api/tunnel-delete', o);
    const url = s.info && s.info.url;
    const cp = url ? h('button', { type: 'button', onclick: () => copy(url, o), 'aria-label': 'Copy key of ' + s.id }, 'Copy') : null;
    return h('tr', { dataset: { id: s.id } }, h('td', {}, mono(s.id)), h('td', {}, name(s.opts.name || '')),
      h('td', {}, `${s.opts.host || '127.0.0.1'}:${s.opts.port}${s.opts.udp ? ' udp' : ''}${s.opts.secure ? ' secure' : ''}`),
      h('td', {}, badge(s.info.state)), h('td', {}, url ? mono(url, 'hash') : '—', cp), h('td', { class: 'actions' }, acts, o));
  }), 'No tunnel servers: create one to expose a local port.'));
  clear(clientsEl, table(['Id', 'Domain', 'Key', 'Port', 'Protocol', 'State', ''], clients.map((c) => {
    const o = out();
    return h('tr', { dataset: { id: c.id } }, h('td', {}, mono(c.id)), h('td', {}, name(c.opts.domain || '')), h('td', {}, mono(c.opts.key || '', 'hash')),
      h('td', {}, String(c.opts.port)), h('td', {}, c.opts.protocol || 'tcp'), h('td', {}, badge(c.info.state), c.info.error ? [' ', name(c.info.error)] : ''),
      h('td', { class: 'actions' }, tunnelActions(c.id, '/api/tunnel-client-restart', '/api/tunnel-client-delete', o), o));
  }), 'No tunnel clients.'));
  if (!samples.length) loadHistory().catch(() => {});
};

function tunnelActions(id, restart, del, o) {
  const r = h('button', { type: 'button', 'aria-label': 'Restart ' + id }, 'Restart');
  r.addEventListener('click', () => run(r, o, () => post(restart, { id })));
  const d = h('button', { type: 'button', class: 'danger', 'aria-label': 'Delete ' + id }, 'Delete');
  d.addEventListener('click', () => { if (confirm('Delete ' + id + '?')) run(d, o, () => post(del, { id })); });
  return [r, d];
}

export default t;
