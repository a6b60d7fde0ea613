import { parentPort } from 'node:worker_threads';
import { Buckets } from './buckets.js';
import type { FoldReply, FoldRequest } from './fold-pool.js';

/**
 * A fold thread: decodes sealed blocks and folds them into buckets for a part
 * of a query while the event loop folds the rest (fold-pool.ts). Pure
 * computation over the bytes it is sent; it opens no database.
 */
const port = parentPort!;
port.on('message', (req: FoldRequest) => {
  try {
    const buckets = new Buckets(req.grid);
    for (const b of req.blocks) buckets.addBlock(b);
    const part = buckets.partial(req.first);
    port.postMessage({ id: req.id, ok: true, part } satisfies FoldReply, buckets.buffers());
  } catch (e) {
    port.postMessage({ id: req.id, ok: false, message: e instanceof Error ? e.message : String(e) } satisfies FoldReply);
  }
});
