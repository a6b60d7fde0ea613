import os from 'node:os';
import { createThreadSlots, type RequestThread } from '../../../core/worker/request-thread.js';
import type { Buckets, PartialBuckets } from './buckets.js';
import { subgrid, type Grid } from './query-plan.js';
import { WINDOW_MS } from './windows.js';

/**
 * Decoding and folding sealed blocks is most of a long host query's time
 * (a host-day is 24 blocks, 242,000 samples). The event loop folds one part
 * of them while idle fold threads fold the others, as VictoriaMetrics spreads
 * one query over its cores; the parts are merged bucket for bucket. A busy
 * pool is not waited for: the query folds its blocks itself. Threads start
 * with the first series query of any length (warm), so that the first long
 * one finds them ready.
 */
export interface FoldPool {
  /**
   * Folds `blocks` (sealed blocks of the windows starting at `windowStarts`, in order) into `buckets`; per block,
   * whether one of its reports is in the range (Buckets.addBlock).
   */
  fold(buckets: Buckets, blocks: Uint8Array[], windowStarts: number[]): Promise<boolean[]>;
  /**
   * Starts the threads that are not running, and settles once they are ready. Until a thread is ready, queries fold
   * without it: its start (loading the decoder into a new isolate) takes a few hundred milliseconds, which the first
   * long query would otherwise wait for. Never rejects.
   */
  warm(): Promise<void>;
  /** Parts folded by the threads so far (what the tests check the pool by). */
  readonly foldedApart: number;
  close(): Promise<void>;
}

export interface FoldRequest {
  grid: Grid;
  first: number;
  blocks: Uint8Array[];
}

/** Below this many blocks a part is not worth a message to a thread and back. */
export const MIN_BLOCKS_TO_SPLIT = 4;

/** One thread per core beyond the event loop's, at most four; none on one core. */
export function defaultFoldThreads(): number {
  return Math.max(0, Math.min(4, os.availableParallelism() - 1));
}

/** A part folded by a thread, and per block of it whether one of its reports is in the range. */
export type FoldResult = PartialBuckets & { inRange: boolean[] };

type FoldThread = RequestThread<FoldRequest, FoldResult>;

export function createFoldPool(threads: number): FoldPool {
  // Started on first use: a service that never answers a long query keeps no fold thread.
  const slots = createThreadSlots<FoldRequest, FoldResult>(import.meta.url, 'fold-worker', threads);
  let foldedApart = 0;
  let closed = false;

  function idleThreads(): FoldThread[] {
    if (closed) return [];
    const out: FoldThread[] = [];
    for (let i = 0; i < slots.count; i++) {
      const t = slots.thread(i);
      if (t.ready && !t.pending) out.push(t);
    }
    return out;
  }

  function send(t: FoldThread, grid: Grid, first: number, blocks: Uint8Array[]): Promise<FoldResult> {
    foldedApart++;
    return t.send({ grid, first, blocks });
  }

  return {
    async warm() {
      if (closed) return;
      try {
        await Promise.all(Array.from({ length: slots.count }, (_, i) => slots.thread(i).started));
      } catch {
        // A thread that cannot be started is not this call's failure: the fold that would use it reports it.
      }
    },
    get foldedApart() { return foldedApart; },
    async fold(buckets, blocks, windowStarts) {
      const idle = blocks.length >= MIN_BLOCKS_TO_SPLIT ? idleThreads() : [];
      const parts = Math.max(1, Math.min(idle.length + 1, Math.floor(blocks.length / (MIN_BLOCKS_TO_SPLIT / 2))));
      const per = Math.ceil(blocks.length / parts);
      const apart: Array<Promise<FoldResult>> = [];
      for (let p = 1; p < parts; p++) {
        const from = p * per;
        const to = Math.min(blocks.length, from + per);
        if (from >= to) break;
        const sub = subgrid(buckets.grid, windowStarts[from]!, windowStarts[to - 1]! + WINDOW_MS);
        apart.push(send(idle[p - 1]!, sub.grid, sub.first, blocks.slice(from, to)));
      }
      // This thread folds the first part meanwhile; a failed part fails the read (as a failed decode here would).
      const settled = Promise.allSettled(apart);
      const inRange: boolean[] = [];
      for (let i = 0, end = apart.length ? per : blocks.length; i < end; i++) inRange.push(buckets.addBlock(blocks[i]!));
      for (const r of await settled) {
        if (r.status === 'rejected') throw r.reason;
        buckets.merge(r.value);
        inRange.push(...r.value.inRange);
      }
      return inRange;
    },
    async close() {
      closed = true;
      await slots.terminate();
    },
  };
}
