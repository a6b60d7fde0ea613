// Why: the service side of the SQLite push thread: a group of pushes goes there and its results come back.
import type { Worker } from 'node:worker_threads';
import { AppError, shuttingDown } from '../../core/errors.js';
import { startModuleWorker } from '../../core/worker/module-worker.js';
import { fromWireError, type WireError } from '../../core/worker/wire-error.js';
import type { PushOutcome, QueuedPush } from './push-apply.js';

export type PushThreadRequest = { op: 'apply'; id: number; group: QueuedPush[] } | { op: 'close' };
export type PushThreadReply = { id: number; ok: true; result: PushOutcome[] } | { id: number; ok: false; error: WireError } | { ready: true };

export interface PushThread {
  /** Applies the group in one transaction on the thread's connection; resolves once it is committed (fsynced). */
  apply(group: QueuedPush[]): Promise<PushOutcome[]>;
  /** Lets the group in flight finish, then closes the thread's connection and ends it. */
  close(): Promise<void>;
}

/** Starts the thread's module (push-thread.ts) on `sqliteFile`. */
export function spawnPushWorker(workerData: { sqliteFile: string }): Worker {
  return startModuleWorker(import.meta.url, 'push-thread', workerData);
}

/**
 * Starts the thread and resolves once its connection is open; a thread that
 * died is started again by the next push (the pushes it had in flight fail as
 * `unavailable`, which clients retry: a push commits whole or not at all).
 */
export async function startPushThread(sqliteFile: string, spawn: typeof spawnPushWorker = spawnPushWorker): Promise<PushThread> {
  const pending = new Map<number, { resolve: (r: PushOutcome[]) => void; reject: (e: unknown) => void }>();
  let worker: Worker | undefined;
  let nextId = 1;
  let closed = false;

  let ready!: Promise<unknown>;
  const start = (): Worker => {
    const w = spawn({ sqliteFile });
    ready = new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('exit', () => reject(new Error('the push writer thread failed to start')));
    });
    w.on('message', (r: PushThreadReply) => {
      if ('ready' in r) return;
      const p = pending.get(r.id);
      pending.delete(r.id);
      if (r.ok) p?.resolve(r.result);
      else p?.reject(fromWireError(r.error));
    });
    // 'error' is followed by 'exit'; the pushes in flight fail there.
    w.on('error', () => undefined);
    w.on('exit', () => {
      if (worker === w) worker = undefined;
      for (const p of pending.values()) p.reject(new AppError('unavailable', 'the push writer stopped; retry the push'));
      pending.clear();
    });
    return w;
  };

  worker = start();
  await ready;
  return {
    apply(group) {
      if (closed) return Promise.reject(shuttingDown());
      worker ??= start();
      const id = nextId++;
      const w = worker;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        w.postMessage({ op: 'apply', id, group } satisfies PushThreadRequest);
      });
    },
    async close() {
      closed = true;
      const w = worker;
      if (!w) return;
      const exited = new Promise((resolve) => w.once('exit', resolve));
      w.postMessage({ op: 'close' } satisfies PushThreadRequest);
      await exited;
    },
  };
}
