import { AppError } from '../../../core/errors.js';
import { SMALL_YOUNG_GENERATION, startModuleWorker } from '../../../core/worker/module-worker.js';
import { fromWireError } from '../../../core/worker/wire-error.js';
import type { AppendOutcome, NewReport } from '../../domain/metrics-store.js';
import type { EngineWriter, WriterOptions } from './engine-writer.js';
import { createShapeTable } from '../../domain/report-shapes.js';
import { createWireBuilder } from './wire-reports.js';
import { WITHDRAWN, type WriterMessage, type WriterReply, type WriterRequest, type WriterTarget } from './worker-protocol.js';

type Op = WriterRequest extends infer R ? (R extends WriterRequest ? Omit<R, 'id' | 'now'> : never) : never;

/** The writer as the store calls it: appends take any iterable of reports, read once during the call. */
export type ServiceWriter = Omit<EngineWriter<NewReport>, 'append'> & {
  append(reports: Iterable<NewReport>, signal?: AbortSignal, backlog?: boolean): Promise<AppendOutcome[]>;
};

/**
 * The service side of the writer thread: an EngineWriter whose calls travel
 * to the thread, gathered per event-loop turn into one message. An append's
 * reports go into the message's columns (wire-reports.ts) as they are read.
 */
export function createWorkerWriter(target: WriterTarget, options: Omit<WriterOptions, 'now'>, now: () => number, onError: (e: unknown) => void): ServiceWriter {
  const worker = startModuleWorker(import.meta.url, 'writer-worker', { target, options }, SMALL_YOUNG_GENERATION);
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  let outbox: WriterRequest[] = [];
  const shapes = createShapeTable();
  const wire = createWireBuilder(shapes);
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

  function post(request: WriterRequest): void {
    if (!outbox.length) {
      setImmediate(() => {
        const requests = outbox;
        outbox = [];
        // Every shape numbered so far goes with the first message after it, even if its request was withdrawn.
        const { reports, transfer } = wire.take();
        worker.postMessage({ kind: 'requests', shapes: shapes.takeNew(), reports, requests } satisfies WriterMessage, transfer);
      });
    }
    outbox.push(request);
  }

  function refusal(signal: AbortSignal | undefined): Promise<never> | undefined {
    if (exited) return Promise.reject(new AppError('unavailable', 'the storage writer stopped'));
    if (signal?.aborted) return Promise.reject(new AppError('unavailable', WITHDRAWN));
    return undefined;
  }

  function send<T>(op: Op, signal?: AbortSignal): Promise<T> {
    return refusal(signal) ?? new Promise<T>((resolve, reject) => {
      const id = nextId++;
      const request = { ...op, id, now: now() } as WriterRequest;
      // Withdrawn before it left this thread: dropped here; after: the thread withdraws it if it still waits.
      const withdraw = (): void => {
        const at = outbox.indexOf(request);
        if (at < 0) { post({ op: 'withdraw', target: id, id: nextId++, now: now() }); return; }
        outbox.splice(at, 1);
        pending.delete(id);
        reject(new AppError('unavailable', WITHDRAWN));
      };
      signal?.addEventListener('abort', withdraw, { once: true });
      const settled = () => signal?.removeEventListener('abort', withdraw);
      pending.set(id, {
        resolve: (v) => { settled(); resolve(v as T); },
        reject: (e) => { settled(); reject(e); },
      });
      post(request);
    });
  }

  return {
    // Async: the reports are still read during the call (before the first await), and an iterable that fails
    // rejects. Reports read before it failed, like a withdrawn append's, stay in the message's columns unread.
    async append(reports, signal, backlog = false) {
      const refused = refusal(signal);
      if (refused) return refused;
      const from = wire.size;
      for (const r of reports) wire.add(r);
      return wire.size === from ? [] : send<AppendOutcome[]>({ op: 'append', from, to: wire.size, backlog }, signal);
    },
    deleteBefore: (cutoff) => send<{ reports: number; hosts: number }>({ op: 'delete', cutoff }),
    flush: () => send<void>({ op: 'flush' }),
    async close() {
      if (exited) return;
      await send<null>({ op: 'close' });
      await new Promise<void>((resolve) => { if (exited) resolve(); else worker.once('exit', () => resolve()); });
    },
  };
}

