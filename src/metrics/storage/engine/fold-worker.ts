import { answerRequests } from '../../../core/worker/request-thread.js';
import { Buckets, type PartialBuckets } from './buckets.js';
import type { FoldRequest } from './fold-pool.js';

/**
 * A fold thread: decodes sealed blocks and folds them into buckets for a part
 * of a query while the event loop folds the rest (fold-pool.ts). Pure
 * computation over the bytes it is sent; it opens no database.
 */
answerRequests<FoldRequest, PartialBuckets>((req) => {
  const buckets = new Buckets(req.grid);
  for (const b of req.blocks) buckets.addBlock(b);
  return { result: buckets.partial(req.first), transfer: buckets.buffers() };
});
