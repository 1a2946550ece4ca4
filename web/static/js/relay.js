// One WebSocket to the relay that keeps itself open: it reconnects with exponential backoff (1 s
// doubling to 30 s, with jitter so a relay restart is not met by every browser at once), runs
// `onOpen` (hello with the token, or watch) on every new connection, and matches replies to
// requests by id.

export class RelayError extends Error {
  constructor(code, message) {
    super(message || code);
    this.code = code;
  }
}

export class RelaySocket extends EventTarget {
  constructor({ onOpen, shouldReconnect } = {}) {
    super();
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    this.url = `${scheme}//${location.host}/v1/ws`;
    this.onOpen = onOpen;
    this.shouldReconnect = shouldReconnect || (() => true);
    this.state = 'offline';
    this.pending = new Map();
    this.nextId = 1;
    this.attempt = 0;
    this.timer = null;
    this.stopped = true;
    window.addEventListener('online', () => this.reconnectSoon());
  }

  start() {
    this.stopped = false;
    if (!this.ws) this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000);
  }

  get isOpen() {
    return this.ws && this.ws.readyState === WebSocket.OPEN;
  }

  connect() {
    clearTimeout(this.timer);
    this.setState('connecting');
    let ws;
    try {
      ws = new WebSocket(this.url, 'homeward.v1');
    } catch (error) {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.addEventListener('open', async () => {
      this.attempt = 0;
      this.setState('open');
      try {
        if (this.onOpen) await this.onOpen(this);
      } catch (error) {
        this.dispatchEvent(new CustomEvent('openfailed', { detail: error }));
      }
    });
    ws.addEventListener('message', (event) => this.received(event.data));
    ws.addEventListener('close', (event) => {
      if (this.ws === ws) this.ws = null;
      for (const { reject } of this.pending.values()) reject(new RelayError('offline', 'connection closed'));
      this.pending.clear();
      this.setState('offline');
      this.dispatchEvent(new CustomEvent('closed', { detail: { code: event.code, reason: event.reason } }));
      if (!this.stopped && this.shouldReconnect(event)) this.scheduleReconnect();
    });
  }

  received(text) {
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (message === null || typeof message !== 'object') return;
    if (message.re !== undefined && this.pending.has(message.re)) {
      const { resolve, reject } = this.pending.get(message.re);
      this.pending.delete(message.re);
      if (message.type === 'error') reject(new RelayError(message.code, message.message));
      else resolve(message);
      return;
    }
    this.dispatchEvent(new CustomEvent('message', { detail: message }));
  }

  /** Sends a request with an id; resolves with the ok reply, rejects with a RelayError. */
  request(type, fields = {}) {
    return new Promise((resolve, reject) => {
      if (!this.isOpen) {
        reject(new RelayError('offline', 'not connected to the relay'));
        return;
      }
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ type, id, ...fields }));
    });
  }

  /** Sends without an id (positions): only a failure is answered. */
  send(type, fields = {}) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify({ type, ...fields }));
    return true;
  }

  setState(state) {
    this.state = state;
    this.dispatchEvent(new CustomEvent('state', { detail: state }));
  }

  scheduleReconnect() {
    clearTimeout(this.timer);
    const base = Math.min(30000, 1000 * 2 ** Math.min(this.attempt, 5));
    this.attempt += 1;
    const delay = base / 2 + Math.random() * (base / 2);
    this.nextAttemptAt = Date.now() + delay;
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Back online (the browser says so, or the user asks): try now instead of waiting out the backoff. */
  reconnectSoon() {
    if (this.stopped || this.ws) return;
    this.attempt = 0;
    this.connect();
  }
}
