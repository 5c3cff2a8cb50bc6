// Domains: resolved domains with consensus status and votes, claim and
// remove, p2p conflicts with the hash preference, recalculation, services
// and subscriptions.
import { get, post } from '../api.js';
import { h, clear, field, input, select, form, run, out, say, table, badge, mono, name, short, fmtTime, card, Pager } from '../ui.js';

const t = {
  id: 'domains',
  title: 'Domains',
  hints: ['update-database', 'update-peers', 'update-tunnel-clients', 'update-local-dns'],
};

let pager, conflictsEl, subsEl, detailEl, recalcOut, selected = null, all = [];

t.init = (root) => {
  const claim = form([
    field('Domain', input('domain', { required: true, placeholder: 'example.p2p', autocomplete: 'off' })),
    field('Tunnel hash', input('hash', { required: true, placeholder: 'hs://…', class: 'mono', size: 40, autocomplete: 'off' })),
    field('HTTPS/WSS upstream (ssl)', h('input', { type: 'checkbox', name: 'ssl' })),
  ], 'Claim', async (v, f) => {
    const r = await post('/api/add-domain', { domain: v.domain, hash: v.hash, ssl: v.ssl });
    f.reset();
    return `${v.domain}: ${r}`;
  });
  recalcOut = out();
  const recalc = h('button', { type: 'button' }, 'Recalculate consensus');
  recalc.addEventListener('click', () => run(recalc, recalcOut, () => post('/api/consensus/recalculate')));
  pager = new Pager({
    headers: ['Domain', 'Hash', 'Status', 'Votes', 'Claim', ''],
    match: (d, q) => d.domain.includes(q) || d.hash.includes(q) || d.consensusStatus.includes(q),
    row,
    empty: 'No domains yet: claim one above.',
  });
  conflictsEl = h('div');
  subsEl = h('div');
  detailEl = h('div', { id: 'domain-details', 'aria-live': 'polite' });
  root.append(
    card('Claim a domain', claim),
    card('Resolved domains', h('div', { class: 'row' }, recalc), recalcOut, pager.el, detailEl),
    card('P2P conflicts', conflictsEl),
    card('Service subscriptions', subsEl),
  );
};

function votes(cs) {
  if (!cs) return '—';
  return `${cs.totalVotes}/${cs.activePeers} (min ${cs.minVotes})`;
}

function row(d) {
  const o = out();
  const acts = [];
  acts.push(h('button', { type: 'button', onclick: () => details(d.domain), 'aria-label': 'Details of ' + d.domain }, 'Details'));
  if (d.consensusStatus !== 'internal') {
    const b = h('button', { type: 'button', 'aria-label': 'Recalculate ' + d.domain }, 'Recalculate');
    b.addEventListener('click', () => run(b, o, () => post('/api/consensus/recalculate/' + encodeURIComponent(d.domain))));
    acts.push(b);
  }
  if (d.isLocal) {
    const b = h('button', { type: 'button', class: 'danger', 'aria-label': 'Remove ' + d.domain }, 'Remove');
    b.addEventListener('click', () => {
      if (confirm(`Remove your claim on ${d.domain}?`)) run(b, o, () => post('/api/remove-domain', { domain: d.domain }));
    });
    acts.push(b);
  }
  return h('tr', { dataset: { domain: d.domain } },
    h('td', {}, name(d.domain)),
    h('td', {}, mono(d.hash, 'hash')),
    h('td', {}, badge(d.consensusStatus)),
    h('td', {}, votes(d.consensusState)),
    h('td', {}, d.isOwner ? 'owner' : d.isLocal ? 'claimed here' : ''),
    h('td', { class: 'actions' }, acts, o));
}

// details draws the selected domain's card; note is the outcome of the
// last action taken in it (the card is redrawn after each).
async function details(domain, note) {
  selected = domain;
  const d = all.find((x) => x.domain === domain);
  if (!d) { clear(detailEl); return; }
  const cs = d.consensusState;
  const subOut = out();
  if (note) say(subOut, note, 'ok');
  const services = d.services || [];
  // act runs a subscription change and redraws the card: a change that
  // creates no client broadcasts no hint.
  const act = (btn, fn) => run(btn, subOut, async () => {
    const r = await fn();
    const msg = r && r.success === false ? 'Refused' : 'Done';
    await details(domain, msg);
    return msg;
  });
  let subs = [];
  let allOn = [];
  try {
    [subs, allOn] = await Promise.all([get('/api/service-subscriptions'), get('/api/subscribe-all-domains')]);
  } catch (e) { say(subOut, e.message, 'error'); }
  const subscribed = (s) => subs.some((x) => x.domain === domain && x.serviceName === s.serviceName);
  const svcRows = services.map((s) => {
    const b = h('button', { type: 'button' }, subscribed(s) ? 'Unsubscribe' : 'Subscribe');
    b.addEventListener('click', () => act(b, () => (subscribed(s)
      ? post('/api/service-unsubscribe', { domain, serviceName: s.serviceName })
      : post('/api/service-subscribe', { domain, serviceName: s.serviceName, key: s.key, port: s.port, protocol: s.protocol }))));
    return h('tr', {}, h('td', {}, name(s.serviceName)), h('td', {}, mono(s.key, 'hash')), h('td', {}, String(s.port)), h('td', {}, s.protocol), h('td', { class: 'actions' }, b));
  });
  const isAll = allOn.includes(domain);
  const allBtn = h('button', { type: 'button' }, isAll ? 'Unsubscribe all' : 'Subscribe all');
  allBtn.addEventListener('click', () => act(allBtn, () => post(isAll ? '/api/unsubscribe-all' : '/api/subscribe-all', { domain })));
  const close = h('button', { type: 'button', onclick: () => { selected = null; clear(detailEl); } }, 'Close');
  clear(detailEl, h('div', { class: 'card' },
    h('h3', {}, domain),
    cs ? h('dl', { class: 'kv' },
      h('dt', {}, 'Status'), h('dd', {}, badge(cs.status)),
      h('dt', {}, 'Resolved hash'), h('dd', {}, mono(cs.hash || '—')),
      h('dt', {}, 'Winner'), h('dd', {}, mono(cs.resolvedClaimant || '—')),
      h('dt', {}, 'Quorum'), h('dd', {}, `${cs.quorumMet ? 'met' : 'not met'}: ${cs.totalVotes} votes, ${cs.minVotes} needed, ${cs.activePeers} active peers`),
      h('dt', {}, 'Last resolution'), h('dd', {}, fmtTime(cs.lastResolution)),
      cs.error ? [h('dt', {}, 'Error'), h('dd', {}, cs.error)] : null,
    ) : h('p', { class: 'help' }, 'Internal domain: served by this node, cannot be claimed.'),
    cs ? table(['Claimant', 'Votes'], Object.entries(cs.voteCounts || {}).map(([k, n]) =>
      h('tr', {}, h('td', {}, mono(k)), h('td', {}, String(n)))), 'No votes.') : null,
    h('h3', {}, 'Services'),
    table(['Service', 'Key', 'Port', 'Protocol', ''], svcRows, 'No services for this domain.'),
    cs ? h('div', { class: 'row' }, allBtn) : null,
    subOut, close));
}

t.refresh = async () => {
  const [list, conflicts, subs] = await Promise.all([
    get('/api/resolved-domains'), get('/api/p2p-domain-conflicts'), get('/api/service-subscriptions')]);
  all = list;
  pager.set(list);
  renderConflicts(conflicts.conflicts || []);
  renderSubs(subs);
  if (selected) details(selected);
};

function renderConflicts(cs) {
  clear(conflictsEl, table(['Domain', 'Local hash', 'Resolved hash', 'Winner', 'Status', 'Use'], cs.map((c) => {
    const o = out();
    const sel = select('preference', [['local', 'local claim'], ['resolved', 'resolved claim']], c.hashPreference);
    sel.setAttribute('aria-label', 'Hash preference for ' + c.domain);
    sel.addEventListener('change', () => run(sel, o, () => post('/api/update-hash-preference', { domain: c.domain, preference: sel.value })));
    return h('tr', {}, h('td', {}, name(c.domain)), h('td', {}, mono(c.localHash, 'hash')), h('td', {}, mono(c.resolvedHash, 'hash')),
      h('td', {}, mono(short(c.resolvedClaimant))), h('td', {}, badge(c.consensusStatus)), h('td', {}, sel, o));
  }), 'No conflicts: every domain you claimed resolved to you.'));
}

function renderSubs(subs) {
  clear(subsEl, table(['Domain', 'Service', 'Key', 'Port', 'Protocol', ''], subs.map((s) => {
    const o = out();
    const b = h('button', { type: 'button', class: 'danger' }, 'Unsubscribe');
    b.addEventListener('click', () => run(b, o, () => post('/api/service-unsubscribe', { domain: s.domain, serviceName: s.serviceName })));
    return h('tr', {}, h('td', {}, name(s.domain)), h('td', {}, name(s.serviceName)), h('td', {}, mono(s.key, 'hash')),
      h('td', {}, String(s.port)), h('td', {}, s.protocol), h('td', { class: 'actions' }, b, o));
  }), 'No subscriptions: open a domain\'s details to subscribe to its services.'));
}

export default t;
