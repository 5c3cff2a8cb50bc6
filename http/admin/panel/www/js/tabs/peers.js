// Peers: status, connected peers, invites (with a copy button) and the
// invite diagnostics.
import { get, post } from '../api.js';
import { h, clear, run, out, table, mono, name, fmtTime, card, copy } from '../ui.js';

const t = { id: 'peers', title: 'Peers', hints: ['update-peers'] };

let statusEl, peersEl, inviteEl, diagEl;

t.init = (root) => {
  statusEl = h('div');
  peersEl = h('div');
  inviteEl = h('div');
  diagEl = h('div');
  const o = out();
  const b = h('button', { type: 'button', class: 'primary' }, 'Create invite');
  b.addEventListener('click', () => run(b, o, async () => {
    const r = await post('/api/invites');
    const text = h('textarea', { id: 'invite-text', rows: 3, readonly: true, 'aria-label': 'Invite' });
    text.value = r.invite;
    const co = out();
    clear(inviteEl, text, h('div', { class: 'row' },
      h('button', { type: 'button', id: 'copy-invite', onclick: () => copy(r.invite, co, text) }, 'Copy'),
      h('span', { class: 'help' }, `One use; expires ${fmtTime(r.expiresAt)}. Start the other node with --join INVITE.`)), co);
    return 'Invite created';
  }));
  root.append(
    h('div', { class: 'grid' }, card('This node', statusEl), card('Invite a node', h('div', { class: 'row' }, b), o, inviteEl)),
    card('Connected peers', peersEl),
    card('Invite diagnostics', diagEl));
};

function kv(obj) {
  return h('dl', { class: 'kv' }, Object.entries(obj || {}).map(([k, v]) =>
    [h('dt', {}, k), h('dd', {}, typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v))]));
}

// pathText says how a connected peer is reached: direct, punched (and
// who introduced it), tcp, relayed via whom.
function pathText(p) {
  if (!p || !p.path) return '';
  return p.via ? `${p.path} via ${p.via.slice(0, 16)}` : p.path;
}

t.refresh = async () => {
  const [st, peers] = await Promise.all([get('/api/status'), get('/api/peers')]);
  const r = st.reach || {};
  clear(statusEl, kv({
    role: st.isMaster ? 'master' : 'joiner', connected: st.isConnected, peers: st.peersCount,
    nat: r.nat || 'unknown', advertised: (r.advertised || []).join(', '),
    observed: (r.observed || []).map((o) => `${o.address} (${o.reporters})`).join(', ') || 'none yet',
  }));
  let d = null, derr = null;
  try {
    d = await get('/api/diagnostics/invites');
  } catch (e) {
    derr = e;
  }
  const byId = {};
  for (const p of (d && d.peers) || []) byId[p.id] = p;
  clear(peersEl, table(['Peer id', 'Path', 'Remote address', 'RTT'], peers.map((id) => {
    const p = byId[id];
    return h('tr', {}, h('td', {}, mono(id)), h('td', { class: 'peer-path' }, name(pathText(p))),
      h('td', {}, mono((p && p.remoteAddr) || '')), h('td', {}, p && p.rttMs ? `${p.rttMs.toFixed(1)} ms` : ''));
  }), 'No peers connected.'));
  if (derr) {
    clear(diagEl, h('p', { class: 'out error', role: 'alert' }, derr.message));
    return;
  }
  clear(diagEl,
    kv(d.summary),
    h('h3', {}, 'Recommendations'),
    (d.recommendations || []).length ? h('ul', {}, d.recommendations.map((r) => h('li', {}, r))) : h('p', { class: 'help' }, 'None.'),
    h('h3', {}, 'Connection issues'),
    (d.connectionIssues || []).length ? h('ul', {}, d.connectionIssues.map((r) => h('li', {}, typeof r === 'string' ? r : JSON.stringify(r)))) : h('p', { class: 'help' }, 'None.'),
    h('h3', {}, 'Known peers'),
    table(['Peer', 'Details'], (d.peers || []).map((p) => h('tr', {}, h('td', {}, mono(p.id || p.peerId || '')), h('td', {}, mono(JSON.stringify(p))))), 'None.'));
};

export default t;
