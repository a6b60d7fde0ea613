// Why: the service's pools of threads that answer requests by id (fold threads, bulk parse threads) start, track and fail them one way.
import { parentPort, type Transferable } from 'node:worker_threads';
import { AppError } from '../errors.js';
import { SMALL_YOUNG_GENERATION, startModuleWorker } from './module-worker.js';
import { fromWireError, toWireError, type WireError } from './wire-error.js';

export type ThreadRequest<Q> = Q & { id: number };
export type ThreadReply<R> = { id: number; ok: true; result: R } | { id: number; ok: false; error: WireError };
/** Posted once by a thread when its module has loaded and it answers requests. */
type ThreadReady = { ready: true };

export interface RequestThread<Q, R> {
  /** Posts `request` and resolves with the thread's result, or rejects with its error (an AppError stays one). */
  send(request: Q, transfer?: readonly Transferable[]): Promise<R>;
  /** Requests sent and not answered yet. */
  readonly pending: number;
  /** Whether the thread has loaded and answers at once (a request sent before waits for its start, a few hundred ms). */
  readonly ready: boolean;
  /** Settles when the thread is ready, or has stopped without being so. */
  readonly started: Promise<void>;
  terminate(): Promise<number>;
}

/**
 * Starts the module `name` next to `callerUrl` as a thread that answers with
 * `answerRequests`, with a small young generation (it keeps little alive
 * between requests), holding the process up only while it has requests to
 * answer (an idle pool never keeps a process from exiting). If it
 * fails or exits, what it had pending is rejected (`unavailable`: the caller
 * may retry) and `onGone` runs, so its pool starts another on next use.
 */
export function startRequestThread<Q, R>(callerUrl: string, name: string, onGone: () => void): RequestThread<Q, R> {
  const worker = startModuleWorker(callerUrl, name, undefined, SMALL_YOUNG_GENERATION);
  worker.unref();
  const pending = new Map<number, { resolve: (r: R) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let ready = false;
  let settleStart!: () => void;
  const started = new Promise<void>((resolve) => { settleStart = resolve; });
  const rejectAll = (e: Error) => {
    for (const p of pending.values()) p.reject(e);
    pending.clear();
  };
  const fail = (e: Error) => {
    onGone();
    rejectAll(e);
  };
  // A reply that cannot be read back (a thread's larger stack serializes an array nested 10,000 deep that this
  // thread's deserializer refuses) carries no id: whatever is pending fails, rather than waiting for ever. The
  // thread keeps running. (The other way round cannot happen: a thread reads anything this thread could write.)
  worker.on('messageerror', () => {
    rejectAll(new AppError('internal', `a ${name} thread's answer could not be read`));
    worker.unref();
  });
  worker.on('message', (r: ThreadReply<R> | ThreadReady) => {
    if ('ready' in r) {
      ready = true;
      settleStart();
      return;
    }
    const p = pending.get(r.id);
    if (!p) return;
    pending.delete(r.id);
    if (!pending.size) worker.unref();
    if (r.ok) p.resolve(r.result);
    else p.reject(fromWireError(r.error));
  });
  worker.on('error', fail);
  worker.on('exit', (code) => {
    settleStart();
    fail(new AppError('unavailable', `a ${name} thread stopped (${code}); retry`));
  });
  return {
    send(request, transfer) {
      const id = nextId++;
      return new Promise<R>((resolve, reject) => {
        if (!pending.size) worker.ref();
        pending.set(id, { resolve, reject });
        worker.postMessage({ ...request, id } satisfies ThreadRequest<Q>, transfer);
      });
    },
    get pending() { return pending.size; },
    get ready() { return ready; },
    started,
    terminate: () => worker.terminate(),
  };
}

/**
 * `count` slots for request threads of the module `name` (next to
 * `callerUrl`): a pool's threads. A slot's thread starts on first use (a pool
 * that is never asked keeps none) and again on the next use after it stopped.
 */
export interface ThreadSlots<Q, R> {
  readonly count: number;
  /** The thread of slot `i`, started if it is not running. */
  thread(i: number): RequestThread<Q, R>;
  /** Requests pending on slot `i`: 0 while its thread is not running. */
  pending(i: number): number;
  terminate(): Promise<void>;
}

export function createThreadSlots<Q, R>(callerUrl: string, name: string, count: number): ThreadSlots<Q, R> {
  const slots: Array<RequestThread<Q, R> | undefined> = Array.from({ length: count }, () => undefined);
  return {
    count,
    thread(i) {
      const running = slots[i];
      if (running) return running;
      const t: RequestThread<Q, R> = startRequestThread(callerUrl, name, () => { if (slots[i] === t) slots[i] = undefined; });
      slots[i] = t;
      return t;
    },
    pending: (i) => slots[i]?.pending ?? 0,
    async terminate() {
      await Promise.all(slots.map((t) => t?.terminate()));
    },
  };
}

/** The thread side: answers each request with `handle`'s result (its buffers moved, not copied) or the error it threw. */
export function answerRequests<Q, R>(handle: (request: Q) => { result: R; transfer?: readonly Transferable[] }): void {
  const port = parentPort!;
  port.on('message', (req: ThreadRequest<Q>) => {
    try {
      const { result, transfer } = handle(req);
      port.postMessage({ id: req.id, ok: true, result } satisfies ThreadReply<R>, transfer);
    } catch (e) {
      port.postMessage({ id: req.id, ok: false, error: toWireError(e) } satisfies ThreadReply<R>);
    }
  });
  port.postMessage({ ready: true } satisfies ThreadReady);
}
