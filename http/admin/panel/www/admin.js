// peerdns admin panel: the tab router and the WebSocket wiring. Every tab
// is a module under js/tabs; it says which update-* hints refresh it.

import { Socket } from './js/socket.js';
import { h } from './js/ui.js';
import domains from './js/tabs/domains.js';
import host from './js/tabs/host.js';
import localDNS from './js/tabs/localdns.js';
import entries from './js/tabs/entries.js';
import peers from './js/tabs/peers.js';
import certs from './js/tabs/certs.js';
import interfaces from './js/tabs/interfaces.js';
import logs from './js/tabs/logs.js';
import settings from './js/tabs/settings.js';

const tabs = [domains, host, localDNS, entries, peers, certs, interfaces, logs, settings];
const byID = new Map(tabs.map((t) => [t.id, t]));
const main = document.getElementById('main');
const socket = new Socket(document.getElementById('conn'));
const app = { socket };

// state per tab: its section, whether it is built, stale (a hint came
// while hidden) and whether a refresh is running or queued.
const state = new Map();
let current = null;

function ensure(tab) {
  let s = state.get(tab.id);
  if (!s) {
    const section = h('section', { class: 'tab', id: 'tab-' + tab.id, 'aria-labelledby': 'h-' + tab.id, hidden: true },
      h('h2', { id: 'h-' + tab.id }, tab.title));
    main.append(section);
    s = { section, stale: true, running: null, again: false };
    state.set(tab.id, s);
    tab.init(section, app);
  }
  return s;
}

// refresh reloads a tab's data; hints that arrive during a refresh run
// one more refresh after it, never several in parallel.
async function refresh(tab) {
  const s = ensure(tab);
  if (s.running) { s.again = true; return s.running; }
  s.stale = false;
  s.running = (async () => {
    try {
      await tab.refresh();
    } catch (e) {
      console.error(tab.id, e);
    }
  })();
  await s.running;
  s.running = null;
  document.body.dataset.refreshed = tab.id + ':' + Date.now();
  // Time to first render, read by bench/panel (performance marks are free).
  if (!s.rendered) {
    s.rendered = true;
    performance.mark('panel-rendered:' + tab.id);
  }
  if (s.again) { s.again = false; return refresh(tab); }
}

// soon refreshes a tab shortly after a hint: a burst of hints (a peer
// syncing many claims) becomes one refresh, which matters when a refresh
// reads 10,000 domains.
const HINT_DELAY = 100; // ms
function soon(tab, s) {
  if (s.timer) return;
  s.timer = setTimeout(() => {
    s.timer = null;
    refresh(tab);
  }, HINT_DELAY);
}

function show() {
  const id = location.hash.slice(1) || 'domains';
  const tab = byID.get(id) || domains;
  if (current && current !== tab) {
    state.get(current.id).section.hidden = true;
    if (current.hide) current.hide();
  }
  const s = ensure(tab);
  s.section.hidden = false;
  for (const a of document.querySelectorAll('#tabs a')) {
    if (a.dataset.tab === tab.id) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  document.title = tab.title + ' · peerdns admin';
  const changed = current !== tab;
  current = tab;
  if (changed && tab.show) tab.show();
  if (s.stale || changed) refresh(tab);
}

socket.addEventListener('message', (ev) => {
  const m = ev.detail;
  if (m.type === 'system-reset') {
    reloadWhenBack();
    return;
  }
  if (!m.type.startsWith('update-') || m.type === 'update-stats') return;
  for (const tab of tabs) {
    if (!tab.hints.includes(m.type)) continue;
    const s = state.get(tab.id);
    if (!s) continue;
    if (tab === current) soon(tab, s);
    else s.stale = true;
  }
});
// reloadWhenBack: after system-reset (a backup was restored) the node
// restarts its parts and answers 503 meanwhile; reload once it is ready,
// so the page does not land on that 503.
async function reloadWhenBack() {
  const conn = document.getElementById('conn');
  conn.dataset.state = 'closed';
  conn.textContent = 'The node is restarting: this page reloads when it is back';
  for (let wait = 250; ; wait = Math.min(wait * 2, 4000)) {
    await new Promise((r) => setTimeout(r, wait));
    try {
      const r = await fetch('/api/health?probe=readiness', { cache: 'no-store' });
      if (r.ok) break;
    } catch { /* not back yet */ }
  }
  location.reload();
}

socket.addEventListener('open', (ev) => {
  if (!ev.detail.reconnected) return;
  for (const s of state.values()) s.stale = true;
  if (current) refresh(current);
});

// A tab change moves focus to the content, as a page load would.
window.addEventListener('hashchange', () => { show(); main.focus({ preventScroll: true }); });
show();
socket.connect();
