// Certificates: leaf certificates of the node's root CA (list, details,
// generate, regenerate, delete), a new root, installing the root in the
// system store and the browsers' NSS stores (and taking it out again),
// downloading the root, and what trusting it allows (GET /api/ca-status:
// its name constraints, and a regenerate offer when the node serves names
// the root does not cover).
import { get, post } from '../api.js';
import { h, clear, field, input, form, run, out, table, name, card } from '../ui.js';

const t = { id: 'certs', title: 'Certificates', hints: ['update-certs'] };

let listEl, detailEl, scopeEl;

t.init = (root) => {
  listEl = h('div');
  detailEl = h('div', { 'aria-live': 'polite' });
  scopeEl = h('div', { 'aria-live': 'polite' });
  const gen = form([field('Domain', input('domain', { required: true, placeholder: 'example.p2p' }))], 'Generate certificate',
    async (v, f) => { const r = await post('/api/generate-cert', { domain: v.domain }); f.reset(); return `${v.domain}: ${r}`; });
  const o = out();
  const regen = h('button', { type: 'button', class: 'danger' }, 'Regenerate root CA');
  regen.addEventListener('click', () => {
    if (confirm('Make a new root CA? Every certificate is re-issued and browsers must trust the new root.')) run(regen, o, () => post('/api/regenerate-ca'));
  });
  const install = h('button', { type: 'button' }, 'Install root (system store and browsers)');
  install.addEventListener('click', () => run(install, o, () => post('/api/install-ca')));
  const uninstall = h('button', { type: 'button' }, 'Uninstall root');
  uninstall.addEventListener('click', () => run(uninstall, o, () => post('/api/uninstall-ca')));
  const download = h('a', { href: '/api/ca-root', download: 'peerdns-root.pem', class: 'button' }, 'Download root.pem');
  root.append(
    card('Root CA', scopeEl, h('div', { class: 'row' }, download, install, uninstall, regen), o),
    card('Issue a certificate', gen),
    card('Certificates', listEl, detailEl));
};

t.refresh = async () => {
  const st = await get('/api/ca-status');
  clear(scopeEl,
    h('p', {}, 'Trusting this root allows: ' + st.allows + '.'),
    st.regenerateAdvised ? h('p', { class: 'notice', role: 'status' }, st.advice + '. Use "Regenerate root CA" below.') : h('span'));
  const names = await get('/api/certs');
  clear(listEl, table(['Domain', ''], names.map((d) => {
    const o = out();
    const det = h('button', { type: 'button', 'aria-label': 'Details of ' + d }, 'Details');
    det.addEventListener('click', () => run(det, o, async () => {
      const pem = await get('/api/cert-details?domain=' + encodeURIComponent(d));
      clear(detailEl, h('h3', {}, d), h('pre', { tabindex: '0' }, pem));
      return '';
    }));
    const re = h('button', { type: 'button', 'aria-label': 'Regenerate ' + d }, 'Regenerate');
    re.addEventListener('click', () => run(re, o, () => post('/api/regenerate-cert', { domain: d })));
    const del = h('button', { type: 'button', class: 'danger', 'aria-label': 'Delete ' + d }, 'Delete');
    del.addEventListener('click', () => { if (confirm('Delete the certificate of ' + d + '?')) run(del, o, () => post('/api/delete-cert', { domain: d })); });
    return h('tr', {}, h('td', {}, name(d)), h('td', { class: 'actions' }, det, re, del, o));
  }), 'No certificates yet: one is issued on the first HTTPS request for a domain, or generate one above.'));
};

export default t;
