import { answerRequests } from '../../core/worker/request-thread.js';
import type { BulkLineRequest } from './bulk-line-pool.js';
import { readBulkLines, transferOf, type BulkLines } from './bulk-lines.js';

/**
 * A parse thread: reads bulk bodies into checked, flattened reports
 * (bulk-line-pool.ts). Pure computation over the bytes it is sent; it opens
 * no database and keeps nothing between bodies but the schema validator.
 */
answerRequests<BulkLineRequest, BulkLines>((req) => {
  const lines = readBulkLines(req.body, req.opts);
  return { result: lines, transfer: transferOf(lines) };
});
