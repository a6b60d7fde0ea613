import { answerRequests } from '../../../core/worker/request-thread.js';
import { Buckets } from './buckets.js';
import type { FoldRequest, FoldResult } from './fold-pool.js';

/**
 * A fold thread: decodes sealed blocks and folds them into buckets for a part
 * of a query while the event loop folds the rest (fold-pool.ts). Pure
 * computation over the bytes it is sent; it opens no database.
 */
answerRequests<FoldRequest, FoldResult>((req) => {
  const buckets = new Buckets(req.grid);
  const inRange = req.blocks.map((b) => buckets.addBlock(b));
  return { result: { ...buckets.partial(req.first), inRange }, transfer: buckets.buffers() };
});
