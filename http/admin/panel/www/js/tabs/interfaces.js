// Interfaces: domain → local IP mappings and the subnets editor, with the
// API's validation errors shown next to the subnet they concern.
import { get, post } from '../api.js';
import { h, clear, field, input, run, out, say, mono, name, card, Pager } from '../ui.js';

const t = { id: 'interfaces', title: 'Interfaces', hints: ['update-interfaces', 'update-settings', 'update-database'] };

let pager, subnetsEl, rowsEl, notice, osEl, editing = false;

t.init = (root) => {
  pager = new Pager({
    headers: ['Domain', 'IP'],
    match: (m, q) => m.domain.includes(q) || m.ip.includes(q),
    row: (m) => h('tr', {}, h('td', {}, name(m.domain)), h('td', {}, mono(m.ip))),
    empty: 'No domain has a local IP yet.',
  });
  subnetsEl = h('div');
  notice = h('div', { 'aria-live': 'polite' });
  osEl = h('div');
  root.append(card('Domain → IP', pager.el), card('Subnets', notice, subnetsEl), card('Network interfaces of this host', osEl));
};

function subnetRow(s) {
  const r = h('fieldset', { class: 'row subnet' },
    h('legend', {}, s.name || 'New subnet'),
    field('Name', input('name', { value: s.name || '' })),
    field('Base', input('base', { value: s.base || '', required: true, placeholder: '127.78.0.0' })),
    field('CIDR', input('cidr', { type: 'number', min: 1, max: 32, value: s.cidr ?? 24, required: true })),
    field('Start index', input('startIndex', { type: 'number', min: 1, value: s.startIndex ?? 2, required: true })),
    s.available !== undefined ? h('span', { class: 'help' }, `${s.used} used, ${s.remaining} free of ${s.available}`) : null,
    h('button', { type: 'button', class: 'danger', onclick: () => { r.remove(); editing = true; } }, 'Remove'),
    h('p', { class: 'field-error', role: 'alert' }));
  r.addEventListener('input', () => { editing = true; });
  return r;
}

function renderSubnets(list) {
  rowsEl = h('div', {}, list.map(subnetRow));
  const o = out();
  const add = h('button', { type: 'button', onclick: () => { rowsEl.append(subnetRow({})); editing = true; } }, 'Add subnet');
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save subnets');
  // novalidate: the API's own messages are shown next to each subnet.
  const f = h('form', { id: 'subnets-form', novalidate: true }, rowsEl, h('div', { class: 'row' }, add, save), o);
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    run(save, o, async () => {
      const sets = [...rowsEl.querySelectorAll('fieldset.subnet')];
      for (const fs of sets) fs.querySelector('.field-error').textContent = '';
      for (const el of rowsEl.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
      const subnets = sets.map((fs) => {
        const v = (n) => fs.querySelector(`[name="${n}"]`).value.trim();
        const s = { base: v('base'), cidr: Number(v('cidr')), startIndex: Number(v('startIndex')) };
        if (v('name')) s.name = v('name');
        return s;
      });
      try {
        const r = await post('/api/subnets', { subnets });
        editing = false;
        clear(notice, r.restartRequired ? h('p', { class: 'notice', role: 'alert' }, 'Subnets saved: restart the node to hand out addresses from them.') : null);
        return r.message;
      } catch (e) {
        // "subnets[1].cidr 40 must be ..." goes next to subnet 1.
        for (const msg of (e.data && e.data.errors) || []) {
          const m = /subnets\[(\d+)\](?:\.(\w+))?/.exec(msg);
          const fs = m && sets[Number(m[1])];
          if (!fs) continue;
          const p = fs.querySelector('.field-error');
          p.textContent += (p.textContent ? '\n' : '') + msg;
          const el = m[2] && fs.querySelector(`[name="${m[2]}"]`);
          if (el) el.setAttribute('aria-invalid', 'true');
        }
        throw e;
      }
    });
  });
  clear(subnetsEl, f);
}

t.refresh = async () => {
  const [maps, subnets, os] = await Promise.all([get('/api/interfaces'), get('/api/subnets'), get('/api/network-interfaces').catch((e) => ({ error: e.message }))]);
  pager.set(maps);
  // A hint must not wipe what the user is typing into the editor.
  if (!editing) renderSubnets(subnets.subnets || []);
  clear(osEl, os.error ? h('p', { class: 'out error' }, os.error) : h('ul', {}, (os.interfaces || []).map((i) => h('li', {}, i.label))));
};

export default t;
