import type { App } from '../../core/http/create-app.js';
import { isUpgrade } from './request-deadlines.js';

/**
 * What the server still reads of a request body it answered early (401
 * before the body, a 413, a malformed form): the rest of a body this size
 * arrives in well under a second on any link a client uploads over.
 */
export const DRAIN_LIMITS = { bytes: 1024 * 1024, ms: 5_000 };

/**
 * After an answer sent before the whole request body arrived, keeps reading
 * and discarding the body, within `DRAIN_LIMITS`, then closes the connection
 * if the body has not ended. Reading on is what lets the connection serve the
 * next request (a parser stopped mid-body would leave it hanging) and what
 * makes the close a lingering one (RFC 9112 section 9.6): a client still
 * sending has read the answer long before the socket closes, instead of
 * losing it to a reset. The bound keeps a client from making the server read
 * an unwanted 10 GB body.
 */
export function drainEarlyAnswers(app: App): void {
  app.addHook('onResponse', async (req) => {
    const raw = req.raw;
    if (raw.complete || raw.destroyed || isUpgrade(raw)) return;
    const socket = raw.socket;
    // Counted on the socket: Node discards an unread body below the request stream ("dumps" it), so no 'data' event shows it.
    const startedAt = socket.bytesRead;
    const started = Date.now();
    const watch = setInterval(() => {
      if (raw.complete || socket.destroyed) return clearInterval(watch);
      if (socket.bytesRead - startedAt > DRAIN_LIMITS.bytes || Date.now() - started > DRAIN_LIMITS.ms) {
        clearInterval(watch);
        socket.destroy();
      }
    }, DRAIN_CHECK_MS);
    watch.unref();
    // A body piped into a parser that gave up (multipart) is paused mid-stream: detach it and let it flow.
    raw.unpipe();
    raw.resume();
  });
}

/** How often a drain is checked against its bounds; between checks a fast client sends a few hundred KiB more at most. */
const DRAIN_CHECK_MS = 20;
