// Logs: a channel picker and a live tail over the WebSocket
// (subscribe-log answers log-snapshot, then file-log lines), with pause
// and a filter.
import { get } from '../api.js';
import { h, clear, field, select, input, fmtTime } from '../ui.js';

const t = { id: 'logs', title: 'Logs', hints: [] };
const MAX = 2000; // lines kept in the page

let app, chanSel, linesSel, filter, pauseBtn, view, info, lines = [], held = 0, paused = false, shown = false;

t.init = (root, a) => {
  app = a;
  chanSel = h('select', { name: 'channel' });
  chanSel.addEventListener('change', subscribe);
  linesSel = select('lines', ['100', '500', '2000'], '500');
  linesSel.addEventListener('change', subscribe);
  filter = input('filter', { type: 'search', placeholder: 'Filter lines…' });
  filter.addEventListener('input', render);
  pauseBtn = h('button', { type: 'button', 'aria-pressed': 'false', onclick: togglePause }, 'Pause');
  const clearBtn = h('button', { type: 'button', onclick: () => { lines = []; render(); } }, 'Clear view');
  info = h('p', { class: 'help', 'aria-live': 'polite' });
  view = h('pre', { class: 'log', id: 'log-view', tabindex: '0', 'aria-label': 'Log lines' });
  root.append(h('section', { class: 'card', 'aria-label': 'Log tail' },
    h('div', { class: 'row' }, field('Channel', chanSel), field('Lines', linesSel), field('Filter', filter), pauseBtn, clearBtn),
    info, view));

  app.socket.addEventListener('log-snapshot', (ev) => {
    const m = ev.detail;
    if (m.channel !== chanSel.value) return;
    lines = (m.lines || []).slice(-MAX);
    held = 0;
    render();
  });
  app.socket.addEventListener('file-log', (ev) => {
    const m = ev.detail;
    if (m.channel !== chanSel.value) return;
    lines.push(m.message); // the line as the file has it
    if (lines.length > MAX) lines.splice(0, lines.length - MAX);
    if (paused) { held++; info.textContent = `Paused: ${held} new line(s) held.`; return; }
    render();
  });
};

function togglePause() {
  paused = !paused;
  pauseBtn.textContent = paused ? 'Resume' : 'Pause';
  pauseBtn.setAttribute('aria-pressed', String(paused));
  if (!paused) { held = 0; render(); } else info.textContent = 'Paused.';
}

function render() {
  const q = filter.value.trim().toLowerCase();
  const list = q ? lines.filter((l) => l.toLowerCase().includes(q)) : lines;
  const stick = view.scrollTop + view.clientHeight >= view.scrollHeight - 20;
  clear(view, list.map((l) => {
    const m = /level=(\w+)|\b(ERROR|WARN|INFO|DEBUG)\b/.exec(l);
    // The file's UTC timestamp, shown in the user's locale.
    const shown = l.replace(/^time=(\S+)/, (all, iso) => {
      const d = new Date(iso);
      return isNaN(d) ? all : d.toLocaleString();
    });
    return h('div', { class: 'lvl-' + (m ? m[1] || m[2] : 'INFO') }, visibleBidi(shown));
  }));
  if (stick) view.scrollTop = view.scrollHeight;
  if (!paused) info.textContent = `${list.length.toLocaleString()} line(s)${q ? ` matching “${q}”` : ''} from ${chanSel.value}.log, live. Updated ${fmtTime(Date.now())}.`;
}

// BIDI: the bidirectional formatting characters. A client's text in a
// line (an access line's Host) may carry one, and an override would show
// the rest of the line (the node's own fields: status, upstream) reversed;
// they are shown as \uXXXX, as slog writes them.
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const visibleBidi = (s) => s.replace(BIDI, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));

function subscribe() {
  if (!shown || !chanSel.value) return;
  lines = [];
  render();
  app.socket.subscribe('log', { type: 'subscribe-log', channel: chanSel.value, lines: Number(linesSel.value) });
}

t.show = () => { shown = true; subscribe(); };
t.hide = () => { shown = false; app.socket.unsubscribe('log', { type: 'unsubscribe-log' }); };

t.refresh = async () => {
  if (chanSel.options.length) return;
  const r = await get('/api/logs');
  clear(chanSel, r.channels.map((c) => h('option', { value: c.id }, `${c.label} (${c.file})`)));
  subscribe();
};

export default t;
