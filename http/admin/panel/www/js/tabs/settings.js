// Settings: every whitelisted setting grouped by category with its
// metadata, per-field validation errors and the restart notice; backups;
// plugins; diagnostics (ping and traceroute streamed into the page,
// connection test).
import { get, post, api, stream } from '../api.js';
import { h, clear, field, input, select, form, run, out, say, table, badge, mono, fmtTime, card, nextID } from '../ui.js';

const t = { id: 'settings', title: 'Settings', hints: ['update-settings', 'update-plugins', 'update-plugin-settings'] };

let settingsEl, settingsOut, notice, backupsEl, backupMeta, pluginsEl, current = {}, edits = {}, fieldErrors = {};

t.init = (root) => {
  settingsEl = h('div');
  settingsOut = out();
  notice = h('div', { 'aria-live': 'polite' });
  backupsEl = h('div');
  backupMeta = h('div');
  pluginsEl = h('div');
  const bOut = out();
  const create = h('button', { type: 'button', class: 'primary' }, 'Create backup');
  create.addEventListener('click', () => run(create, bOut, async () => {
    const r = await post('/api/backups/create');
    await loadBackups();
    return 'Backup written to ' + r.path;
  }));
  root.append(
    h('section', { class: 'card', 'aria-label': 'Node settings' }, h('h3', {}, 'Node settings'), notice, settingsEl, settingsOut),
    card('Backups', h('div', { class: 'row' }, create), bOut, backupsEl, backupMeta),
    card('Plugins', pluginsEl),
    diagnostics());
};

function control(name, meta, value) {
  let el;
  if (meta.type === 'enum' && Array.isArray(meta.options)) el = select(name, meta.options, value);
  else if (meta.type === 'boolean' || meta.type === 'bool') {
    el = select(name, ['true', 'false'], value);
  } else if (meta.type === 'json') el = h('textarea', { name, rows: 3, value });
  else el = input(name, { type: meta.type === 'number' ? 'number' : 'text', value });
  if (meta.type === 'json') el.value = value;
  return el;
}

// renderSettings draws the form from the API; what the user typed and did
// not save yet (edits) is kept across a refresh.
function renderSettings(s) {
  current = s.settings;
  // The same settings as drawn: update the values in place, so focus and
  // what the user is typing stay where they are.
  const drawn = settingsEl.querySelector('#settings-form');
  const names = Object.keys(s.metadata).sort().join(',');
  if (drawn && drawn.dataset.names === names) {
    for (const el of drawn.elements) {
      if (el.name && !(el.name in edits)) el.value = s.settings[el.name] ?? '';
    }
    return;
  }
  const groups = {};
  for (const [name, meta] of Object.entries(s.metadata)) (groups[meta.category || 'other'] ||= []).push([name, meta]);
  const f = h('form', { id: 'settings-form', dataset: { names } });
  for (const [cat, list] of Object.entries(groups).sort()) {
    list.sort((a, b) => a[0].localeCompare(b[0]));
    f.append(h('fieldset', { class: 'card' }, h('legend', {}, cat),
      list.map(([name, meta]) => {
        const el = control(name, meta, name in edits ? edits[name] : s.settings[name] ?? '');
        el.addEventListener('input', () => { edits[name] = el.value; });
        el.addEventListener('change', () => { edits[name] = el.value; });
        const errID = nextID('err');
        el.setAttribute('aria-describedby', errID);
        const flags = [meta.restartRequired ? 'restart required' : 'applied live', `default ${JSON.stringify(meta.default ?? '')}`, meta.source ? `from ${meta.source}` : ''].filter(Boolean).join(' · ');
        // Errors of the last save stay with their field across a redraw.
        if (fieldErrors[name]) el.setAttribute('aria-invalid', 'true');
        return h('div', { class: 'setting', dataset: { setting: name } },
          field(`${meta.label || name} (${name})`, el, `${meta.description || ''} ${flags}`),
          h('p', { class: 'field-error', id: errID, role: 'alert', dataset: { errorFor: name } }, fieldErrors[name] || ''));
      })));
  }
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Save settings');
  f.append(btn);
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    run(btn, settingsOut, () => saveSettings(f));
  });
  clear(settingsEl, f);
}

async function saveSettings(f) {
  const changed = {};
  for (const el of f.elements) {
    if (el.name && el.value !== (current[el.name] ?? '')) changed[el.name] = el.value;
  }
  fieldErrors = {};
  for (const p of f.querySelectorAll('.field-error')) p.textContent = '';
  for (const el of f.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  if (!Object.keys(changed).length) return 'Nothing changed';
  try {
    const r = await post('/api/update-settings', { settings: changed });
    edits = {};
    clear(notice, r.restartRequired
      ? h('p', { class: 'notice', role: 'alert' }, `Restart the node to apply: ${(r.restartRequiredSettings || []).join(', ') || 'some settings'}.`)
      : null);
    return r.message;
  } catch (e) {
    // Per-field errors start with the setting's name ("LOG_LEVEL: ...").
    for (const msg of (e.data && e.data.errors) || []) {
      const name = msg.split(':')[0];
      fieldErrors[name] = msg;
      const p = f.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
      if (p) p.textContent = msg;
      const el = f.elements[name];
      if (el) el.setAttribute('aria-invalid', 'true');
    }
    throw e;
  }
}

async function loadBackups() {
  const list = await get('/api/backups');
  clear(backupsEl, table(['Name', 'Taken', 'Size', 'Files', ''], list.map((b) => {
    const o = out();
    const meta = h('button', { type: 'button', 'aria-label': 'Details of ' + b.name }, 'Details');
    meta.addEventListener('click', () => run(meta, o, async () => {
      const m = await get(`/api/backups/${encodeURIComponent(b.name)}/metadata`);
      clear(backupMeta, h('h3', {}, b.name), table(['File', 'Size', 'Modified'], (m.files || []).map((x) =>
        h('tr', {}, h('td', {}, x.name), h('td', {}, x.sizeFormatted || String(x.size)), h('td', {}, fmtTime(Date.parse(x.modified)))))));
      return '';
    }));
    const restore = h('button', { type: 'button', 'aria-label': 'Restore ' + b.name }, 'Restore');
    restore.addEventListener('click', () => {
      if (confirm(`Restore ${b.name}? The node's current data is replaced by the backup's.`)) run(restore, o, () => post('/api/backups/restore', { backupName: b.name }));
    });
    const del = h('button', { type: 'button', class: 'danger', 'aria-label': 'Delete ' + b.name }, 'Delete');
    del.addEventListener('click', () => {
      if (confirm(`Delete ${b.name}?`)) run(del, o, async () => { const r = await api('/api/backups/' + encodeURIComponent(b.name), { method: 'DELETE' }); await loadBackups(); return r; });
    });
    return h('tr', {}, h('td', {}, b.name), h('td', {}, fmtTime(Date.parse(b.timestamp))), h('td', {}, b.sizeFormatted),
      h('td', {}, String(b.fileCount)), h('td', { class: 'actions' }, meta, restore, del, o));
  }), 'No backups yet.'));
}

let lastPlugins = '';
async function loadPlugins() {
  const r = await get('/api/plugins');
  // Unchanged: keep the cards, and what is being typed into them.
  const key = JSON.stringify(r.plugins);
  if (key === lastPlugins) return;
  lastPlugins = key;
  clear(pluginsEl, (r.plugins || []).length ? r.plugins.map(plugin) : h('p', { class: 'help' }, 'No plugins installed (DATA/plugins/<name>/plugin.json).'));
}

function plugin(p) {
  const o = out();
  const base = '/api/plugins/' + encodeURIComponent(p.domain);
  const btns = (p.status === 'static' ? [] : p.status === 'loaded' ? ['stop', 'reload'] : ['start']).map((op) => {
    const b = h('button', { type: 'button', 'aria-label': `${op} ${p.name}` }, op[0].toUpperCase() + op.slice(1));
    b.addEventListener('click', () => run(b, o, () => post(`${base}/${op}`)));
    return b;
  });
  const result = h('pre', { hidden: true });
  const actions = (p.actions || []).map((a) => {
    const b = h('button', { type: 'button', title: a.description || '' }, a.label || a.name);
    b.addEventListener('click', () => run(b, o, async () => {
      const r = await post(`${base}/actions/${encodeURIComponent(a.name)}`, {});
      result.hidden = false;
      result.textContent = JSON.stringify(r.result, null, 2);
      return 'Action ' + a.name + ' done';
    }));
    return b;
  });
  const sets = Object.entries(p.settings || {});
  const settingsForm = sets.length ? form(sets.map(([k, s]) => field(`${s.label || k} (${k})`,
    s.type === 'boolean' ? h('input', { type: 'checkbox', name: k, checked: (s.value ?? s.default) === true })
      : input(k, { type: s.type === 'number' ? 'number' : 'text', value: s.value ?? s.default ?? '' }), s.description)),
  'Save plugin settings', async (v) => (await post(`${base}/settings`, v)).message) : null;
  return h('article', { class: 'card', dataset: { plugin: p.domain } },
    h('h3', {}, `${p.name} ${p.version} `, badge(p.status)),
    h('p', { class: 'help' }, `${p.description || ''} · ${p.domain}`),
    h('div', { class: 'row' }, btns, actions), o, result, settingsForm);
}

function diagnostics() {
  const outPre = h('pre', { class: 'log', id: 'diag-output', 'aria-live': 'polite', tabindex: '0' });
  const streamed = (path) => async (v) => {
    outPre.textContent = '';
    let ok = false;
    await stream(path, { ...v, stream: true }, (l) => {
      if (l.type === 'complete') { ok = l.success; outPre.append(`\n[exit ${l.exitCode}]\n`); } else outPre.append(l.data);
    });
    return ok ? 'Finished' : 'Finished with errors (see the output)';
  };
  const ping = form([field('Target', input('target', { required: true, placeholder: '127.0.0.1' })),
    field('Count', input('count', { type: 'number', min: 1, max: 100, value: '4' }))], 'Ping', streamed('/api/diagnostics/ping'));
  const trace = form([field('Target', input('target', { required: true }))], 'Traceroute', streamed('/api/diagnostics/traceroute'));
  const conn = form([field('Domain', input('domain', { required: true })), field('Port', input('port', { type: 'number', min: 1, max: 65535, required: true }))],
    'Test connection', async (v) => {
      const r = await post('/api/diagnostics/connection-test', v);
      return r.success ? `Connected to ${r.ip}:${r.port} in ${r.latency} ms` : `Failed (${r.ip || 'no IP'}): ${r.error}`;
    });
  return card('Diagnostics', h('div', { class: 'grid' }, h('div', {}, h('h3', {}, 'Ping'), ping), h('div', {}, h('h3', {}, 'Traceroute'), trace),
    h('div', {}, h('h3', {}, 'Connection test'), conn)), outPre);
}

t.refresh = async () => {
  renderSettings(await get('/api/settings'));
  await Promise.all([loadBackups(), loadPlugins()]);
};

export default t;
