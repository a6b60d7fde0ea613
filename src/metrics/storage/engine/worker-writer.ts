import { AppError } from '../../../core/errors.js';
import { startModuleWorker } from '../../../core/worker/module-worker.js';
import { fromWireError } from '../../../core/worker/wire-error.js';
import type { AppendOutcome } from '../../domain/metrics-store.js';
import type { EngineWriter, WriterOptions } from './engine-writer.js';
import type { WriterReply, WriterRequest, WriterTarget } from './worker-protocol.js';

type Op = WriterRequest extends infer R ? (R extends WriterRequest ? Omit<R, 'id' | 'now'> : never) : never;

/**
 * The service side of the writer thread: an EngineWriter whose calls travel
 * to the thread, gathered per event-loop turn into one message.
 */
export function createWorkerWriter(target: WriterTarget, options: Omit<WriterOptions, 'now'>, now: () => number, onError: (e: unknown) => void): EngineWriter {
  const worker = startModuleWorker(import.meta.url, 'writer-worker', { target, options });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  let outbox: WriterRequest[] = [];
  let nextId = 1;
  let exited = false;

  const handle = (r: WriterReply): void => {
    if (r.kind === 'batch') { r.replies.forEach(handle); return; }
    if (r.kind === 'log') { onError(fromWireError(r.error)); return; }
    const p = pending.get(r.id);
    if (!p) return;
    pending.delete(r.id);
    if (r.ok) p.resolve(r.result);
    else p.reject(fromWireError(r.error));
  };
  worker.on('message', handle);
  worker.on('error', (e) => { onError(e); failAll(e); });
  worker.on('exit', () => { exited = true; failAll(new AppError('unavailable', 'the storage writer stopped')); });

  function failAll(e: unknown): void {
    for (const p of pending.values()) p.reject(e);
    pending.clear();
  }

  function send<T>(op: Op): Promise<T> {
    if (exited) return Promise.reject(new AppError('unavailable', 'the storage writer stopped'));
    return new Promise<T>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      if (!outbox.length) setImmediate(() => { const requests = outbox; outbox = []; worker.postMessage({ kind: 'requests', requests }); });
      outbox.push({ ...op, id, now: now() } as WriterRequest);
    });
  }

  return {
    append: (reports) => send<AppendOutcome[]>({ op: 'append', reports }),
    deleteBefore: (cutoff) => send<{ reports: number; hosts: number }>({ op: 'delete', cutoff }),
    flush: () => send<void>({ op: 'flush' }),
    async close() {
      if (exited) return;
      await send<null>({ op: 'close' });
      await new Promise<void>((resolve) => { if (exited) resolve(); else worker.once('exit', () => resolve()); });
    },
  };
}

