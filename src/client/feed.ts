// Why: the WebSocket feed brings the changes (or hints to pull them), so this keeps one socket open, reconnects with backoff and jitter, and lets the engine catch up after each (re)connect.
import { backoffDelay, type BackoffOptions } from './backoff.js';
import type { FeedMessage } from './wire.js';

/** The part of the WebSocket API the client uses; the browser's WebSocket and the `ws` package both fit. */
export interface FeedSocket {
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  close(code?: number): void;
}
export type FeedSocketConstructor = new (url: string) => FeedSocket;

export interface FeedHandlers {
  /** The socket URL to connect to (fetching a fresh token first); a throw counts as a failed attempt. */
  url(): Promise<string>;
  /** The server's subscription of this socket is in place: every change committed from here on comes over it. */
  onReady(): void;
  onMessage(message: FeedMessage): void;
  /** `code` is the close code; 1008 means the token is no longer valid, SILENT (4001) that the socket went silent. */
  onClose(code: number): void;
  /** Failures to connect that will be retried (the engine reports them as errors and goes offline). */
  onRetry(error: unknown): void;
}

/** Heartbeats (of the interval the server's `ready` names) a socket may miss before it is given up as silent. */
const SILENT_HEARTBEATS = 2.5;
/**
 * The close code a socket given up as silent is reported with: no close frame came, the connection is presumed dead
 * (a NAT that forgot it, a network switch), and nothing else would notice while the client sends nothing.
 */
export const SILENT = 4001;

/** Keeps the feed connected until `stop()`. */
export class FeedConnection {
  private socket: FeedSocket | null = null;
  /** Gives the current socket up once it has been silent too long (set on its `ready`). */
  private watchdog: ReturnType<typeof setInterval> | null = null;
  private heardAt = 0;
  /** The socket being opened: `stop` closes it too, or it would open after the stop and stay open. */
  private connecting: FeedSocket | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private attempt = 0;
  private stopped = true;

  constructor(private readonly Socket: FeedSocketConstructor, private readonly handlers: FeedHandlers, private readonly backoff: BackoffOptions = {}) {}

  get connected(): boolean {
    return this.socket !== null;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.unwatch();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const s of [this.socket, this.connecting]) if (s) detach(s, 1000);
    this.socket = null;
    this.connecting = null;
  }

  /** Drops the current socket as if the network had (tests, and apps that know the network changed). */
  drop(): void {
    this.socket?.close(4000);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    let url: string;
    try {
      url = await this.handlers.url();
    } catch (e: unknown) {
      this.handlers.onRetry(e);
      this.scheduleReconnect();
      return;
    }
    if (this.stopped) return;
    const socket = new this.Socket(url);
    this.connecting = socket;
    let opened = false;
    socket.onopen = () => {
      if (this.connecting !== socket) { socket.close(1000); return; }
      this.connecting = null;
      opened = true;
      this.attempt = 0;
      this.socket = socket;
    };
    socket.onmessage = (ev) => {
      this.heardAt = Date.now();
      let msg: unknown;
      try {
        msg = JSON.parse(typeof ev.data === 'string' ? ev.data : String(ev.data));
      } catch {
        return;
      }
      if (isFeedMessage(msg)) this.handlers.onMessage(msg);
      else if ((msg as { type?: unknown } | null)?.type === 'ready') {
        this.watch(socket, (msg as { heartbeat_ms?: unknown }).heartbeat_ms);
        this.handlers.onReady();
      }
    };
    // An error is always followed by close; reconnecting happens there.
    socket.onerror = () => undefined;
    socket.onclose = (ev) => {
      if (this.socket === socket) { this.socket = null; this.unwatch(); }
      if (this.connecting === socket) this.connecting = null;
      if (this.stopped) return;
      this.handlers.onClose(opened ? ev.code : 1006);
      this.scheduleReconnect();
    };
  }

  /**
   * Watches `socket` for silence: the server sends a message every `heartbeatMs` at least (its heartbeat), so one
   * that sends nothing for SILENT_HEARTBEATS of them is gone. A server that names no heartbeat is not watched.
   */
  private watch(socket: FeedSocket, heartbeatMs: unknown): void {
    this.unwatch();
    if (typeof heartbeatMs !== 'number' || !(heartbeatMs > 0)) return;
    const limit = heartbeatMs * SILENT_HEARTBEATS;
    this.watchdog = setInterval(() => {
      if (this.socket !== socket) this.unwatch();
      else if (Date.now() - this.heardAt > limit) this.giveUp(socket);
    }, heartbeatMs / 2);
    (this.watchdog as { unref?: () => void }).unref?.();
  }

  private unwatch(): void {
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = null;
  }

  /** Drops a silent socket at once (its close handshake would wait on a dead connection) and connects anew. */
  private giveUp(socket: FeedSocket): void {
    this.unwatch();
    detach(socket, SILENT);
    if (this.socket === socket) this.socket = null;
    this.handlers.onClose(SILENT);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.timer) return;
    const delay = backoffDelay(this.attempt++, this.backoff);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.connect();
    }, delay);
  }
}

/** Closes a socket whose events no longer concern the feed (stopped, or given up): none of them reaches it. */
function detach(socket: FeedSocket, code: number): void {
  socket.onopen = null;
  socket.onclose = null;
  socket.onmessage = null;
  socket.close(code);
}

function isFeedMessage(m: unknown): m is FeedMessage {
  if (typeof m !== 'object' || m === null) return false;
  const o = m as Record<string, unknown>;
  return o['type'] === 'change' && typeof o['table_name'] === 'string' && typeof o['record_uuid'] === 'string'
    && typeof o['version'] === 'number' && typeof o['instance_id'] === 'string';
}
