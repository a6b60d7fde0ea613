// Early flush: a page's fast part goes out at once, its slow part when it is read, so the browser starts on the charts.
import { PassThrough } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { clientGone } from '../http/client-gone.js';
import { html, type SafeHtml } from './html-template.js';

/**
 * Sends `start` now, then `rest()` once it resolves, then `end`, as one
 * chunked response. The status and headers go with `start`, so a failure of
 * `rest` can no longer change them: it is logged and the page says that part
 * could not be read, and the document is still closed properly. `rest` gets a
 * signal that aborts when the browser leaves first (a fleet page's top lists
 * over a month are seconds of reads that nobody would see).
 */
export function streamPage(reply: FastifyReply, parts: { start: SafeHtml; end: SafeHtml }, rest: (signal: AbortSignal) => Promise<SafeHtml>): FastifyReply {
  const out = new PassThrough();
  const gone = clientGone(reply);
  out.write(parts.start.value);
  void rest(gone).then(
    (body) => body,
    (e: unknown) => {
      if (!gone.aborted) reply.log.error({ err: e }, 'dashboard page: the streamed part failed');
      return html`<p class="notice">Part of this page could not be read. Reload to try again.</p>`;
    },
  ).then((body) => {
    // A browser that left has closed the response, and the stream with it.
    if (!out.destroyed) out.end(body.value + parts.end.value);
  });
  return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(out);
}
