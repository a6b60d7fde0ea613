import type { Logger } from '../logger.js';
import { backoffDelay } from './backoff.js';
import type { PostOutcome } from './post-report.js';
import type { Spool } from './spool.js';

export interface DeliveryOptions {
  spool: Spool;
  send: (body: Buffer, signal: AbortSignal) => Promise<PostOutcome>;
  log: Logger;
  retryBaseMs: number;
  retryMaxMs: number;
  random?: () => number;
}

export interface DeliveryLoop {
  /** Wakes the loop after an append (it otherwise sleeps while the spool is empty). */
  notify(): void;
  /** Stops after the request in flight, or aborts it after `graceMs`; whatever is unsent stays spooled. */
  stop(graceMs: number): Promise<void>;
}

/** One attempt at the head of the spool: the delay before the next one (0: go on now), or 'empty'. */
type Attempt = (signal: AbortSignal, stopping: () => boolean) => Promise<number | 'empty'>;

function attempter(opts: DeliveryOptions): Attempt {
  const { spool, log } = opts;
  let failures = 0;
  return async (signal, stopping) => {
    const entry = spool.peek();
    if (!entry) return 'empty';
    const outcome = await opts.send(await spool.read(entry), signal);
    if (outcome.kind === 'retry') {
      if (stopping()) return 0;
      failures++;
      const delay = outcome.retryAfterMs ?? backoffDelay(failures, opts.retryBaseMs, opts.retryMaxMs, opts.random);
      // The first failure and then every tenth: a long outage must not flood the journal.
      if (failures === 1 || failures % 10 === 0) {
        log.warn('metrics service unavailable, reports stay spooled', { reason: outcome.reason, status: outcome.status, attempt: failures, retryInMs: delay, spooled: spool.length });
      }
      return Math.max(1, delay);
    }
    if (failures > 0) log.info('metrics service reachable again, sending spooled reports', { afterAttempts: failures, spooled: spool.length });
    failures = 0;
    if (outcome.kind === 'rejected') {
      await spool.remove(entry, 'rejected');
      log.error('metrics service refused a report; not retrying it', { status: outcome.status, error: outcome.error, details: outcome.details, reportTs: entry.ts, rejectedTotal: spool.counters.rejected });
      return 0;
    }
    await spool.remove(entry, 'delivered');
    log.debug('report delivered', { reportTs: entry.ts, status: outcome.status, spooled: spool.length });
    if (outcome.status === 202) log.warn('report stored but routing of some alerts failed', { alertResults: outcome.alertResults, reportTs: entry.ts });
    return 0;
  };
}

/**
 * Sends what is spooled until the spool is empty (true) or the service asks to
 * wait (false, the rest stays spooled for the next run). Used by `--once`.
 */
export async function drainSpool(opts: DeliveryOptions): Promise<boolean> {
  const attempt = attempter(opts);
  const signal = new AbortController().signal;
  for (;;) {
    const r = await attempt(signal, () => false);
    if (r === 'empty') return true;
    if (r > 0) return false;
  }
}

/**
 * Sends spooled reports one at a time, oldest first. A report leaves the spool
 * only when the service answered 2xx (stored) or a non-retryable 4xx (logged
 * with the service's `details` and counted); anything else keeps it at the head
 * and waits with exponential backoff and full jitter, or the service's
 * Retry-After. Runs apart from collection, which only appends to the spool.
 */
export function startDeliveryLoop(opts: DeliveryOptions): DeliveryLoop {
  const attempt = attempter(opts);
  let stopping = false;
  let wake: (() => void) | undefined;
  /** Set by `notify` so an append racing with the "spool is empty" check is not missed. */
  let appended = false;
  let idle = false;
  const inFlight = new AbortController();

  // Waiting for an append (ms undefined) ends on notify; a backoff wait ends only on its timer or stop, so a
  // stream of new reports cannot hammer a service that is down.
  const sleep = (ms: number | undefined) => new Promise<void>((resolve) => {
    idle = ms === undefined;
    if (idle && appended) { appended = false; idle = false; resolve(); return; }
    const timer = ms === undefined ? undefined : setTimeout(() => { wake = undefined; resolve(); }, ms);
    wake = () => { if (timer) clearTimeout(timer); wake = undefined; idle = false; resolve(); };
  });

  const running = (async () => {
    while (!stopping) {
      let next: number | 'empty';
      appended = false;
      try {
        next = await attempt(inFlight.signal, () => stopping);
      } catch (e: unknown) {
        // Disk trouble reading or removing a spool file: keep the report, try again later.
        opts.log.error('spool error during delivery', { error: String(e) });
        next = opts.retryMaxMs;
      }
      if (stopping) break;
      if (next === 'empty') await sleep(undefined);
      else if (next > 0) await sleep(next);
    }
  })();

  return {
    notify() {
      appended = true;
      if (idle) { appended = false; wake?.(); }
    },
    async stop(graceMs) {
      stopping = true;
      wake?.();
      const timer = setTimeout(() => inFlight.abort(), graceMs);
      try { await running; } finally { clearTimeout(timer); }
    },
  };
}
