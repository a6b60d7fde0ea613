import { answerRequests } from '../../../core/worker/request-thread.js';
import { Buckets, type PartialBuckets } from './buckets.js';
import type { FoldRequest } from './fold-pool.js';
import { createInflatedBlocks } from './inflated-blocks.js';

/**
 * A fold thread: decodes sealed blocks and folds them into buckets for a part
 * of a query while the event loop folds the rest (fold-pool.ts). Pure
 * computation over the bytes it is sent; it opens no database. It keeps its
 * own decompressed blocks (inflated-blocks.ts).
 */
const inflated = createInflatedBlocks();

answerRequests<FoldRequest, PartialBuckets>((req) => {
  const buckets = new Buckets(req.grid, inflated.inflate);
  for (const b of req.blocks) buckets.addBlock(b);
  return { result: buckets.partial(req.first), transfer: buckets.buffers() };
});
