// The admin API client: JSON in, JSON or text out, errors kept exactly as
// the API wrote them.

export class APIError extends Error {
  constructor(status, text, data) {
    super(messageOf(text, data));
    this.status = status;
    this.text = text;
    this.data = data; // parsed JSON body, when the API answered JSON
  }
}

// messageOf is the API's own wording: the plain-text body, or the error
// list / error string of a JSON error body.
function messageOf(text, data) {
  if (data && typeof data === 'object') {
    if (Array.isArray(data.errors) && data.errors.length) {
      return (data.error ? data.error + '\n' : '') + data.errors.join('\n');
    }
    if (typeof data.error === 'string') return data.error + (data.message ? ': ' + data.message : '');
  }
  return text || 'no answer';
}

// api calls path; body (when given) is sent as JSON.
export async function api(path, { method = 'GET', body, signal } = {}) {
  const opt = { method, headers: {}, signal };
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, opt);
  } catch (e) {
    throw new APIError(0, 'cannot reach the node: ' + e.message, null);
  }
  const text = await res.text();
  let data = text;
  if ((res.headers.get('Content-Type') || '').includes('json')) {
    try { data = JSON.parse(text); } catch { /* keep the text */ }
  }
  if (!res.ok) throw new APIError(res.status, text, data);
  return data;
}

export const get = (path) => api(path);
export const post = (path, body) => api(path, { method: 'POST', body });

// stream POSTs body and calls onLine with each NDJSON object as it comes
// (the diagnostics ping and traceroute with stream: true).
export async function stream(path, body, onLine) {
  const res = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) {
    const text = await res.text();
    let data = text;
    try { data = JSON.parse(text); } catch { /* text */ }
    throw new APIError(res.status, text, data);
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) onLine(JSON.parse(line));
    }
    if (done) break;
  }
  if (buf.trim()) onLine(JSON.parse(buf));
}
