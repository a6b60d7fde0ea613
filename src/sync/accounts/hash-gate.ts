import { AppError } from '../../core/errors.js';

/**
 * Bounds concurrent password hashing. scrypt runs on libuv's small thread
 * pool, which file I/O (attachment reads and writes) shares: unbounded
 * parallel logins would fill the pool and make a download wait behind every
 * queued hash. At most `concurrency` hashes run at once (fewer than the pool
 * has threads, so file I/O always finds one free); up to `queue` more wait in
 * order; past that a request gets 503 at once with Retry-After instead of
 * queueing without bound (the answer load balancers and clients retry on).
 */
export interface HashGate {
  /**
   * Takes a place in line, synchronously: throws `unavailable` when every
   * running and waiting place is taken. The promise resolves when a slot is
   * free; call the release it gives when the hashing is done.
   */
  enter(): Promise<() => void>;
  /** Hashes running plus waiting. */
  readonly inFlight: number;
}

/** Seconds a client refused for load is told to wait: about one round of queued hashes. */
const RETRY_AFTER_SECONDS = 1;

export function createHashGate(limits: { concurrency: number; queue: number }): HashGate {
  let running = 0;
  const waiting: (() => void)[] = [];

  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else running -= 1;
  };
  const once = () => {
    let done = false;
    return () => { if (!done) { done = true; release(); } };
  };

  return {
    enter() {
      if (running < limits.concurrency) {
        running += 1;
        return Promise.resolve(once());
      }
      if (waiting.length >= limits.queue) {
        throw new AppError('unavailable', 'too many sign-ins in progress; retry shortly', { retry_after: RETRY_AFTER_SECONDS });
      }
      return new Promise((resolve) => waiting.push(() => resolve(once())));
    },
    get inFlight() {
      return running + waiting.length;
    },
  };
}

/** Runs `work` in a place taken with `gate.enter()` (already reserved, so the caller decided admission first). */
export async function inTurn<T>(turn: Promise<() => void>, work: () => Promise<T>): Promise<T> {
  const release = await turn;
  try {
    return await work();
  } finally {
    release();
  }
}
