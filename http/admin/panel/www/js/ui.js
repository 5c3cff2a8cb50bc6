// Small DOM helpers. Text always goes in as text (never parsed as HTML), so
// names and messages from the network cannot inject markup.

let uid = 0;
export const nextID = (p) => `${p}-${++uid}`;

// h builds an element: h('button', {class: 'x', onclick: f}, 'text', child).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    // defaultValue, so form.reset() goes back to it.
    else if (k === 'value') { if ('defaultValue' in el) el.defaultValue = v; else el.value = v; }
    else if (k === 'checked') el.checked = !!v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// field is a labelled control: the label wraps it, so it is announced
// and clicking the text focuses it.
export function field(label, control, help) {
  const kids = [label, control];
  if (help) {
    const id = nextID('help');
    control.setAttribute('aria-describedby', id);
    kids.push(h('span', { class: 'help', id }, help));
  }
  if (control.type === 'checkbox') return h('label', { class: 'check' }, control, label);
  return h('label', {}, ...kids);
}

export const input = (name, props = {}) => h('input', { name, type: 'text', ...props });
export const select = (name, options, value) =>
  h('select', { name }, options.map((o) => {
    const [v, l] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value ? true : undefined }, l);
  }));

// out is the line under a form where results and API errors appear.
export function out() {
  return h('p', { class: 'out', role: 'status', 'aria-live': 'polite' });
}
export function say(o, text, kind) {
  o.textContent = text || '';
  o.className = 'out' + (kind ? ' ' + kind : '');
  if (kind === 'error') o.setAttribute('role', 'alert'); else o.setAttribute('role', 'status');
}

// run disables btn while fn runs and writes its outcome into o: the
// API's answer (text) on success unless fn returns a message, the API's
// error as written on failure.
export async function run(btn, o, fn) {
  if (btn) btn.disabled = true;
  if (o) say(o, '');
  try {
    const r = await fn();
    if (o) say(o, typeof r === 'string' ? r : r && r.message ? r.message : 'Done', 'ok');
    return r;
  } catch (e) {
    if (o) say(o, e.message, 'error');
    else console.error(e);
    return undefined;
  } finally {
    if (btn) btn.disabled = false;
  }
}

// form builds a <form> that calls onSubmit(values, form) with its named
// values; checkboxes give booleans, number inputs numbers ('' is left out).
export function form(fields, submitLabel, onSubmit, { extra = [], cls = 'row' } = {}) {
  const o = out();
  const btn = h('button', { type: 'submit', class: 'primary' }, submitLabel);
  const f = h('form', { class: cls, novalidate: undefined }, fields, btn, extra);
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    await run(btn, o, () => onSubmit(values(f), f));
  });
  return h('div', {}, f, o);
}

export function values(f) {
  const v = {};
  for (const el of f.elements) {
    if (!el.name) continue;
    if (el.type === 'checkbox') v[el.name] = el.checked;
    else if (el.type === 'number') { if (el.value !== '') v[el.name] = Number(el.value); }
    else v[el.name] = el.value.trim();
  }
  return v;
}

export function table(headers, rows, empty = 'Nothing yet.') {
  if (!rows.length) return h('p', { class: 'help' }, empty);
  return h('div', { class: 'table-wrap' },
    h('table', {}, h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows)));
}

export const badge = (s) => h('span', { class: 'badge ' + s }, s);
// name is a string from a client, a peer or a plugin (a domain, a record's
// name, a tunnel's name): it wraps at any character, so a 253-character
// domain breaks over lines instead of widening its table.
export const name = (s) => h('span', { class: 'name' }, s);
export const mono = (s, cls = '') => h('span', { class: 'mono ' + cls, title: s }, s);
export const fmtTime = (ms) => (ms ? new Date(ms).toLocaleString() : '—');
export const fmtBytes = (n) => {
  if (n == null) return '—';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
};
export const short = (id) => (id && id.length > 16 ? id.slice(0, 8) + '…' + id.slice(-4) : id || '');

export function card(title, ...children) {
  return h('section', { class: 'card', 'aria-label': title }, h('h3', {}, title), children);
}

// copy puts text on the clipboard; where the browser refuses (no
// permission, page not focused, plain http on another host) it selects
// the text in field (when given) and tries the older copy command.
export async function copy(text, o, field) {
  try {
    await navigator.clipboard.writeText(text);
    say(o, 'Copied to the clipboard', 'ok');
    return;
  } catch { /* below */ }
  if (field) {
    field.focus();
    field.select();
    if (document.execCommand && document.execCommand('copy')) {
      say(o, 'Copied to the clipboard', 'ok');
      return;
    }
  }
  say(o, 'The browser refused the clipboard: select the text and copy it', 'error');
}

// Pager shows one page of a long list (10,000 domains stay responsive:
// only one page of rows is in the DOM), with a filter.
export class Pager {
  constructor({ headers, row, match, size = 50, label = 'Filter', empty = 'Nothing yet.' }) {
    this.headers = headers;
    this.row = row;
    this.match = match;
    this.size = size;
    this.page = 0;
    this.items = [];
    this.empty = empty;
    this.filter = h('input', { type: 'search', name: 'filter', placeholder: 'Filter…' });
    this.filter.addEventListener('input', () => { this.page = 0; this.render(); });
    this.sizeSel = select('pageSize', ['25', '50', '100', '200'], String(size));
    this.sizeSel.addEventListener('change', () => { this.size = Number(this.sizeSel.value); this.page = 0; this.render(); });
    this.prev = h('button', { type: 'button', onclick: () => { this.page--; this.render(); } }, '‹ Prev');
    this.next = h('button', { type: 'button', onclick: () => { this.page++; this.render(); } }, 'Next ›');
    this.count = h('span', { class: 'count', 'aria-live': 'polite' });
    this.body = h('div');
    this.el = h('div', {},
      h('div', { class: 'pager' }, field(label, this.filter), field('Rows', this.sizeSel), this.prev, this.next, this.count),
      this.body);
  }

  set(items) {
    this.items = items;
    this.render();
  }

  render() {
    const q = this.filter.value.trim().toLowerCase();
    const list = q ? this.items.filter((it) => this.match(it, q)) : this.items;
    const pages = Math.max(1, Math.ceil(list.length / this.size));
    this.page = Math.min(Math.max(0, this.page), pages - 1);
    const from = this.page * this.size;
    const shown = list.slice(from, from + this.size);
    this.prev.disabled = this.page === 0;
    this.next.disabled = this.page >= pages - 1;
    this.count.textContent = list.length
      ? `${(from + 1).toLocaleString()}–${(from + shown.length).toLocaleString()} of ${list.length.toLocaleString()}` +
        (q ? ` (filtered from ${this.items.length.toLocaleString()})` : '')
      : '';
    clear(this.body, table(this.headers, shown.map(this.row), q ? 'Nothing matches the filter.' : this.empty));
  }
}

// chart draws series (arrays of numbers, same length) as an SVG line chart.
export function chart(svg, series, { max, scaleEl } = {}) {
  const NS = 'http://www.w3.org/2000/svg';
  const W = 300, H = 100;
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.replaceChildren();
  const n = Math.max(0, ...series.map((s) => s.length));
  const top = max || Math.max(1, ...series.flat());
  series.forEach((s, k) => {
    if (s.length < 1) return;
    const pts = s.map((v, i) => `${n > 1 ? (i / (n - 1)) * W : 0},${H - (v / top) * (H - 12) - 2}`).join(' ');
    const pl = document.createElementNS(NS, 'polyline');
    pl.setAttribute('points', pts);
    if (k === 1) pl.setAttribute('class', 'b');
    svg.append(pl);
  });
  // The scale goes beside the chart (text inside a stretched SVG would be
  // stretched too).
  if (scaleEl) scaleEl.textContent = `max ${Math.round(top * 100) / 100}`;
  return top;
}
