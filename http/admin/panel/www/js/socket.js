// The /ws WebSocket: one connection for the whole panel, reconnected with
// exponential backoff (0.5 s doubling to 30 s, with jitter). Subscriptions
// (a log tail, live stats) are kept here and sent again after every
// reconnect; the status line says what the socket is doing.

export class Socket extends EventTarget {
  constructor(statusEl) {
    super();
    this.statusEl = statusEl;
    this.subs = new Map(); // key → message sent on every (re)connect
    this.attempt = 0;
    this.ws = null;
    this.timer = null;
    this.connected = false;
  }

  url() {
    return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
  }

  connect() {
    clearInterval(this.timer);
    this.status('connecting', this.attempt ? `Reconnecting (attempt ${this.attempt + 1})…` : 'Connecting…');
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch (e) {
      this.retry();
      return;
    }
    this.ws = ws;
    ws.addEventListener('open', () => {
      const again = this.attempt > 0 || this.wasOpen;
      this.attempt = 0;
      this.connected = true;
      this.wasOpen = true;
      this.status('open', 'Live');
      for (const m of this.subs.values()) ws.send(JSON.stringify(m));
      // After a reconnect hints may have been missed: tabs refresh.
      this.dispatchEvent(new CustomEvent('open', { detail: { reconnected: again } }));
    });
    ws.addEventListener('message', (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch { return; }
      if (!m || typeof m.type !== 'string') return;
      this.dispatchEvent(new CustomEvent(m.type, { detail: m }));
      this.dispatchEvent(new CustomEvent('message', { detail: m }));
    });
    ws.addEventListener('close', () => {
      if (this.ws !== ws) return;
      this.connected = false;
      this.ws = null;
      this.retry();
    });
  }

  retry() {
    const delay = Math.min(30000, 500 * 2 ** this.attempt) * (0.8 + Math.random() * 0.4);
    this.attempt++;
    const until = Date.now() + delay;
    const tick = () => {
      const s = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      this.status('closed', `Disconnected from the node: reconnecting in ${s} s`);
    };
    tick();
    this.timer = setInterval(tick, 1000);
    setTimeout(() => this.connect(), delay);
  }

  status(state, text) {
    this.statusEl.dataset.state = state;
    this.statusEl.textContent = text;
  }

  send(m) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
  }

  // subscribe keeps m to send on every connect and sends it now; null
  // with an unsubscribe message stops it.
  subscribe(key, m) {
    this.subs.set(key, m);
    this.send(m);
  }
  unsubscribe(key, m) {
    if (!this.subs.delete(key)) return;
    this.send(m);
  }
}
