import type { Socket } from 'node:net';
import type { App } from '../../core/http/create-app.js';
import { HTTP_TIMEOUTS } from '../../core/http/create-app.js';
import { SECURITY_HEADERS } from '../../core/http/security-headers.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `true` marks a streaming upload route: its body is bounded by inactivity
     * (no byte for `uploadIdleMs`), not by a total duration, so a large file on
     * a slow link is not cut off while it is still arriving.
     */
    upload?: true;
  }
}

export interface RequestDeadlines {
  /** A request's body must have arrived within this, from the end of its headers (every route but uploads). */
  bodyMs: number;
  /** An upload fails when no byte arrives for this long. */
  uploadIdleMs: number;
}

/**
 * Same total bound as Node's request timeout it replaces, and the same length
 * of silence for uploads: 25 MiB then needs only about 1 KiB/s to get through,
 * while a client that stops sending still loses the connection in 30 s.
 */
export const REQUEST_DEADLINES: RequestDeadlines = { bodyMs: HTTP_TIMEOUTS.requestTimeoutMs, uploadIdleMs: HTTP_TIMEOUTS.requestTimeoutMs };

/** How often an arriving body is checked against its deadline; the bounds are tens of seconds. */
const CHECK_MS = 250;

/**
 * Takes over from Node's `requestTimeout`, which only knows one total
 * duration for every request (the app is built with it off): each request
 * whose body is still arriving is watched until it is complete. Past its
 * deadline the client gets a JSON 408 with the security headers and the
 * connection is closed, as Node's own timeout does; a response already begun
 * is cut off instead.
 */
export function enforceRequestDeadlines(app: App, deadlines: RequestDeadlines = REQUEST_DEADLINES): void {
  app.addHook('onRequest', async (req, reply) => {
    const raw = req.raw;
    // A WebSocket upgrade hands the connection to the feed, which has its own heartbeat.
    if (raw.complete || isUpgrade(raw)) return;
    const socket = raw.socket;
    const upload = req.routeOptions.config?.upload === true;
    const started = Date.now();
    let lastRead = socket.bytesRead;
    let lastProgress = started;
    const watch = setInterval(() => {
      if (raw.complete || socket.destroyed) return clearInterval(watch);
      const now = Date.now();
      if (socket.bytesRead !== lastRead) {
        lastRead = socket.bytesRead;
        lastProgress = now;
      }
      const expired = upload ? now - lastProgress > deadlines.uploadIdleMs : now - started > deadlines.bodyMs;
      if (!expired) return;
      clearInterval(watch);
      req.log.warn({ upload, receivedBytes: socket.bytesRead }, upload ? 'upload stalled, closing' : 'request body too slow, closing');
      timeOut(socket, reply.raw.headersSent, upload
        ? `no data arrived for ${Math.round(deadlines.uploadIdleMs / 1000)} s; the upload is abandoned`
        : `the request body did not arrive within ${Math.round(deadlines.bodyMs / 1000)} s`);
    }, CHECK_MS);
    watch.unref();
  });
}

function timeOut(socket: Socket, responseStarted: boolean, details: string): void {
  if (responseStarted) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ error: 'request_timeout', details });
  const headers = Object.entries(SECURITY_HEADERS).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.end(`HTTP/1.1 408 Request Timeout\r\n${headers}content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  // The half-closed socket goes once the answer is flushed, whatever the client does.
  setTimeout(() => socket.destroy(), 1000).unref();
}

/** Node sets `upgrade` on a request it hands to an 'upgrade' listener (the WebSocket feed); its types omit it. */
export function isUpgrade(raw: object): boolean {
  return (raw as { upgrade?: boolean }).upgrade === true;
}
