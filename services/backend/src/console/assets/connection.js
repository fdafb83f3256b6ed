// Protocol v3 over the backend's WebSocket (docs/protocol.md), like the TUI: requests
// matched by id, one subscription with exactly-once events (gaps pulled with
// `session.events`, duplicates after a reconnect ignored), reconnect with backoff.

import { uuid } from './dom.js';

const SUBPROTOCOL = 'lumina.v3';

export class Connection {
  constructor({ jwt, onStatus }) {
    this.jwt = jwt || null; // held in memory only
    this.onStatus = onStatus || (() => {});
    this.pending = new Map();
    this.ws = null;
    this.hello = null;
    this.sub = null; // {sessionId, lastSeq, onEvent, onDelta, onResume, queue, filling}
    this.everOpen = false;
    this.closed = false;
    this.retry = 0;
  }

  url() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${scheme}//${location.host}/v1/ws`;
  }

  /** Opens the socket and says hello; rejects when the backend refuses the credential. */
  open() {
    return new Promise((resolve, reject) => {
      const protocols = [SUBPROTOCOL];
      if (this.jwt) protocols.push('bearer.' + this.jwt);
      let ws;
      try {
        ws = new WebSocket(this.url(), protocols);
      } catch (error) {
        reject(error);
        return;
      }
      this.ws = ws;
      let opened = false;
      ws.onopen = async () => {
        opened = true;
        try {
          this.hello = await this.request('hello', { protocols: [3], client: 'lumina-console' });
          this.everOpen = true;
          this.retry = 0;
          this.onStatus('connected');
          resolve(this.hello);
        } catch (error) {
          reject(error);
        }
      };
      ws.onmessage = (msg) => this.receive(msg.data);
      ws.onclose = () => {
        for (const { reject: rej } of this.pending.values()) rej(new Error('connection closed'));
        this.pending.clear();
        if (!opened) {
          reject(new Error('refused'));
          return;
        }
        if (!this.closed) this.reconnect();
      };
    });
  }

  async reconnect() {
    this.onStatus('reconnecting');
    const delay = Math.min(500 * 2 ** this.retry, 8000);
    this.retry += 1;
    await new Promise((r) => setTimeout(r, delay));
    try {
      await this.open();
      if (this.sub) await this.resume();
    } catch {
      // A socket that opened but could not resume is closed before the next attempt.
      if (this.ws && this.ws.readyState === WebSocket.OPEN) {
        this.ws.onclose = null;
        this.ws.close();
      }
      // A backend that is down (restarting, say) is waited for as long as it takes; one
      // that answers but keeps refusing the socket has ended this sign-in.
      if (this.retry > 7 && (await this.reachable())) this.onStatus('signed-out');
      else this.reconnect();
    }
  }

  /** Whether the backend answers plain HTTP at all (the page's own stylesheet). */
  async reachable() {
    try {
      await fetch('/console/style.css', { method: 'HEAD', cache: 'no-store', credentials: 'omit' });
      return true;
    } catch {
      return false;
    }
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
  }

  request(method, params) {
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new Error('not connected'));
        return;
      }
      const id = uuid();
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params: params || {} }));
    });
  }

  receive(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.type === 'response' || (frame.type === 'error' && frame.id)) {
      const waiter = this.pending.get(frame.id);
      if (!waiter) return;
      this.pending.delete(frame.id);
      if (frame.type === 'response') waiter.resolve(frame.result);
      else waiter.reject(Object.assign(new Error(frame.error.message), { code: frame.error.code }));
      return;
    }
    const sub = this.sub;
    if (!sub || frame.session_id !== sub.sessionId) return;
    if (frame.type === 'delta') sub.onDelta(frame);
    else if (frame.type === 'event') this.event(frame);
  }

  /** Subscribes to a session (replacing the previous subscription). */
  async subscribe(sessionId, handlers) {
    this.sub = { sessionId, lastSeq: 0, queue: [], filling: false, ...handlers };
    return this.resume();
  }

  unsubscribe() {
    this.sub = null;
  }

  async resume() {
    const sub = this.sub;
    const result = await this.request('session.resume', { session_id: sub.sessionId, after_seq: sub.lastSeq });
    if (this.sub === sub) sub.onResume(result);
    return result;
  }

  event(frame) {
    const sub = this.sub;
    if (sub.filling) {
      sub.queue.push(frame);
      return;
    }
    if (frame.seq <= sub.lastSeq) return; // a duplicate after a reconnect
    if (frame.seq > sub.lastSeq + 1) {
      sub.queue.push(frame);
      this.backfill(sub);
      return;
    }
    sub.lastSeq = frame.seq;
    sub.onEvent(frame);
  }

  async backfill(sub) {
    sub.filling = true;
    try {
      let more = true;
      while (more && this.sub === sub) {
        const page = await this.request('session.events', { session_id: sub.sessionId, after_seq: sub.lastSeq, limit: 500 });
        for (const frame of page.events) {
          if (frame.seq === sub.lastSeq + 1) {
            sub.lastSeq = frame.seq;
            sub.onEvent(frame);
          }
        }
        more = page.more && page.events.length > 0;
      }
    } catch {
      // the reconnect resumes from lastSeq
    }
    sub.filling = false;
    const queued = sub.queue.sort((a, b) => a.seq - b.seq);
    sub.queue = [];
    for (const frame of queued) this.event(frame);
  }
}
