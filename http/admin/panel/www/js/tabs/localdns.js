// Local DNS: custom records of every type (the fields change with the
// type), DNS conflicts with the version preference, the selector cache,
// clearing a domain's cached resolution, and dns-lookup.
import { get, post } from '../api.js';
import { h, clear, field, input, select, form, run, out, say, table, mono, name, card, Pager } from '../ui.js';

const t = { id: 'local-dns', title: 'Local DNS', hints: ['update-local-dns', 'update-database'] };

const TYPES = ['A', 'AAAA', 'CNAME', 'MX', 'TXT', 'SRV', 'SOA', 'CAA', 'NS', 'PTR', 'OTHER'];
const num = (name, label, props = {}) => [name, label, { type: 'number', min: 0, ...props }];
const txt = (name, label, props = {}) => [name, label, props];
// FIELDS: the type-specific fields of each record type (as dns/records
// decodes them).
const FIELDS = {
  A: [txt('data', 'IPv4 address', { placeholder: '192.0.2.1' })],
  AAAA: [txt('data', 'IPv6 address', { placeholder: '2001:db8::1' })],
  CNAME: [txt('data', 'Target name')],
  NS: [txt('data', 'Name server')],
  PTR: [txt('data', 'Pointer name')],
  TXT: [txt('data', 'Text')],
  MX: [num('preference', 'Preference', { max: 65535 }), txt('exchange', 'Mail exchange')],
  SRV: [num('priority', 'Priority', { max: 65535 }), num('weight', 'Weight', { max: 65535 }), num('port', 'Port', { max: 65535 }), txt('target', 'Target')],
  SOA: [txt('mname', 'Primary NS'), txt('rname', 'Responsible mailbox'), num('serial', 'Serial'), num('refresh', 'Refresh'),
    num('retry', 'Retry'), num('expire', 'Expire'), num('minimum', 'Minimum TTL')],
  CAA: [num('flag', 'Flag', { max: 255 }), txt('tag', 'Tag', { placeholder: 'issue' }), txt('value', 'Value')],
  OTHER: [num('rrtype', 'RR type number', { min: 1, max: 65535 }), txt('data', 'RDATA (hex)', { class: 'mono' })],
};

let pager, recForm, typeSel, typeFields, editing = null, formTitle, cancelBtn, submitBtn, recOut;
let conflictsEl, cacheEl;

t.init = (root) => {
  typeSel = select('type', TYPES, 'A');
  typeSel.addEventListener('change', () => typeFieldsFor(typeSel.value));
  typeFields = h('div', { class: 'row' });
  recOut = out();
  submitBtn = h('button', { type: 'submit', class: 'primary' }, 'Add record');
  cancelBtn = h('button', { type: 'button', hidden: true, onclick: stopEdit }, 'Cancel edit');
  formTitle = h('h3', {}, 'Add a record');
  recForm = h('form', { class: 'row' },
    field('Name', input('name', { required: true, placeholder: 'host.example' })),
    field('Type', typeSel),
    field('TTL (s)', input('ttl', { type: 'number', min: 0, value: '300', required: true })),
    field('Class', select('class', ['IN', 'CH'], 'IN')),
    typeFields, submitBtn, cancelBtn);
  recForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    run(submitBtn, recOut, save);
  });
  typeFieldsFor('A');

  pager = new Pager({
    headers: ['#', 'Name', 'Type', 'TTL', 'Class', 'Data', ''],
    match: (r, q) => r.name.includes(q) || r.type.toLowerCase() === q || describe(r).toLowerCase().includes(q),
    row,
    empty: 'No local records yet.',
  });
  conflictsEl = h('div');
  cacheEl = h('div');
  const clearForm = form([field('Domain', input('domain', { required: true }))], 'Clear cached resolution',
    (v) => post('/api/clear-dns-cache', { domain: v.domain }));
  const lookOut = h('pre', { hidden: true, 'aria-live': 'polite' });
  const lookup = form([
    field('Domain', input('domain', { required: true })),
    field('Type', select('type', ['A', 'AAAA', 'MX', 'TXT', 'NS', 'CNAME', 'SRV', 'PTR', 'SOA'], 'A')),
  ], 'Look up', async (v) => {
    const r = await post('/api/diagnostics/dns-lookup', { domain: v.domain, type: v.type });
    lookOut.hidden = false;
    lookOut.textContent = (r.results || []).join('\n') || '(no answers)';
    return `${r.success ? 'Answered' : 'Failed'} in ${r.responseTime} ms` + (r.error ? ': ' + r.error : '');
  }, { extra: [] });
  root.append(
    h('section', { class: 'card', 'aria-label': 'Record editor' }, formTitle, recForm, recOut),
    card('Records', pager.el),
    h('div', { class: 'grid' },
      card('DNS conflicts (p2p or public)', conflictsEl),
      card('Selector cache', cacheEl, clearForm)),
    card('DNS lookup', lookup, lookOut),
  );
};

function typeFieldsFor(type, rec = {}) {
  clear(typeFields, FIELDS[type].map(([name, label, props]) => {
    const el = input(name, { ...props, required: true });
    if (rec[name] !== undefined) el.value = rec[name];
    return field(label, el);
  }));
}

function record() {
  const v = {};
  for (const el of recForm.elements) {
    if (!el.name) continue;
    if (el.type === 'number') { if (el.value !== '') v[el.name] = Number(el.value); } else v[el.name] = el.value.trim();
  }
  return v;
}

async function save() {
  const rec = record();
  if (editing !== null) {
    const r = await post('/api/update-local-dns', { index: editing, record: rec });
    stopEdit();
    return `Updated ${rec.name}: ${r}`;
  }
  const r = await post('/api/add-local-dns', rec);
  recForm.elements.name.value = '';
  return `Added ${rec.name} ${rec.type}: ${r}`;
}

function edit(r) {
  editing = r.index;
  recForm.elements.name.value = r.name;
  recForm.elements.ttl.value = r.ttl;
  recForm.elements.class.value = r.class || 'IN';
  typeSel.value = r.type;
  typeFieldsFor(r.type, r);
  formTitle.textContent = `Edit record #${r.index} (${r.name} ${r.type})`;
  submitBtn.textContent = 'Save record';
  cancelBtn.hidden = false;
  say(recOut, '');
  recForm.elements.name.focus();
}

function stopEdit() {
  editing = null;
  formTitle.textContent = 'Add a record';
  submitBtn.textContent = 'Add record';
  cancelBtn.hidden = true;
  recForm.reset();
  typeFieldsFor(typeSel.value);
}

function describe(r) {
  switch (r.type) {
    case 'MX': return `${r.preference} ${r.exchange}`;
    case 'SRV': return `${r.priority} ${r.weight} ${r.port} ${r.target}`;
    case 'SOA': return `${r.mname} ${r.rname} ${r.serial} ${r.refresh} ${r.retry} ${r.expire} ${r.minimum}`;
    case 'CAA': return `${r.flag} ${r.tag} "${r.value}"`;
    case 'OTHER': return `TYPE${r.rrtype} ${r.data}`;
    default: return r.data || '';
  }
}

function row(r) {
  const o = out();
  const e = h('button', { type: 'button', onclick: () => edit(r), 'aria-label': `Edit ${r.name} ${r.type}` }, 'Edit');
  const d = h('button', { type: 'button', class: 'danger', 'aria-label': `Delete ${r.name} ${r.type}` }, 'Delete');
  d.addEventListener('click', () => {
    if (confirm(`Delete ${r.name} ${r.type}?`)) run(d, o, () => post('/api/delete-local-dns', { index: r.index }));
  });
  return h('tr', {}, h('td', {}, String(r.index)), h('td', {}, name(r.name)), h('td', {}, r.type), h('td', {}, String(r.ttl)),
    h('td', {}, r.class || 'IN'), h('td', {}, mono(describe(r))), h('td', { class: 'actions' }, e, d, o));
}

t.refresh = async () => {
  const [ld, cache] = await Promise.all([get('/api/local-dns'), get('/api/selector-cache')]);
  pager.set(ld.records || []);
  clear(conflictsEl, table(['Domain', 'Public IP', 'Answer with'], (ld.conflicts || []).map((c) => {
    const o = out();
    const sel = select('version', [['p2p', 'p2p (this network)'], ['public', 'public DNS']], c.version);
    sel.setAttribute('aria-label', 'Version for ' + c.domain);
    sel.addEventListener('change', () => run(sel, o, () => post('/api/update-version-preference', { domain: c.domain, version: sel.value })));
    return h('tr', {}, h('td', {}, name(c.domain)), h('td', {}, mono(c.publicIP || '—')), h('td', {}, sel, o));
  }), 'No conflicts: no p2p domain also exists in public DNS.'));
  clear(cacheEl, table(['Domain', 'Selected'], Object.entries(cache).map(([d, v]) => {
    const o = out();
    const b = h('button', { type: 'button', 'aria-label': 'Clear cache of ' + d }, 'Clear');
    b.addEventListener('click', () => run(b, o, () => post('/api/clear-dns-cache', { domain: d })));
    return h('tr', {}, h('td', {}, name(d)), h('td', {}, name(v)), h('td', { class: 'actions' }, b, o));
  }), 'The selector cache is empty.'));
};

export default t;
