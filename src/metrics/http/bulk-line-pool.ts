import { shuttingDown } from '../../core/errors.js';
import { createThreadSlots } from '../../core/worker/request-thread.js';
import { readBulkLinesTakingTurns, type BulkLineOptions, type BulkLines } from './bulk-lines.js';

/**
 * Parsing, checking and flattening a bulk body's reports is most of what a
 * bulk request costs the event loop (a thousand reports: JSON, schema,
 * flattening and the garbage they leave). Parse threads do it instead, as
 * VictoriaMetrics parses on every core: the event loop keeps answering other
 * requests meanwhile, and bodies are read in parallel where there are cores.
 * Without a thread (`--bulk-parse-threads 0`, the default on two cores) the
 * body is read on the event loop, a slice of lines per turn.
 */
export interface BulkLinePool {
  read(body: Uint8Array, opts: BulkLineOptions): Promise<BulkLines>;
  /** Bodies read by a thread so far (what the tests check the pool by). */
  readonly readApart: number;
  close(): Promise<void>;
}

export interface BulkLineRequest {
  body: Uint8Array;
  opts: BulkLineOptions;
}

export function createBulkLinePool(threads: number): BulkLinePool {
  // Started on first use: a service that is never sent a bulk body keeps no parse thread.
  const slots = createThreadSlots<BulkLineRequest, BulkLines>(import.meta.url, 'bulk-line-worker', threads);
  let readApart = 0;
  let closed = false;
  // The body being read on the event loop; the next waits for it. Read in turns with each other, bodies were all
  // parsed at about the same moment and the writer thread stored them while the event loop had nothing to parse: a
  // quarter less bulk throughput than one body being stored while the next is read. Other requests still get a turn
  // between slices.
  let reading: Promise<unknown> = Promise.resolve();
  return {
    get readApart() { return readApart; },
    async read(body, opts) {
      if (closed) throw shuttingDown();
      if (!slots.count) {
        const mine = reading.then(() => readBulkLinesTakingTurns(body, opts));
        reading = mine.catch(() => undefined);
        return mine;
      }
      // The thread with the fewest bodies waiting; each reads its queue in order.
      let slot = 0;
      for (let i = 1; i < slots.count; i++) if (slots.pending(i) < slots.pending(slot)) slot = i;
      readApart++;
      return slots.thread(slot).send({ body, opts });
    },
    async close() {
      closed = true;
      await slots.terminate();
    },
  };
}
