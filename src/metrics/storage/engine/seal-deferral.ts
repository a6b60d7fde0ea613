import type { SealCandidate } from './sealer.js';

/**
 * Background work yields to a backlog being replayed. While backlog reports
 * (bulk bodies: agents draining their spools after an outage, relays) arrive
 * faster than `busyReportsPerS`, a window that became due for sealing waits
 * up to `maxMs` before it is sealed anyway: its reports are already durable in
 * the head, and the CPU a seal takes (reading, merging and compressing an hour
 * of a host) goes to taking the backlog instead. Once the rate drops,
 * everything due is sealed; a pass that finds the backlog back at that rate
 * leaves the windows not yet overdue for a later pass. `maxMs` bounds the
 * lag: under a backlog that never slows down, windows are sealed `maxMs`
 * late, not never. Reports sent one by one (a live fleet) never defer seals:
 * live windows close at the pace of the clock, and sealing them promptly keeps
 * the head, and the disk it takes, small.
 */
export interface SealDeferralSettings {
  busyReportsPerS: number;
  maxMs: number;
}

export interface SealDeferral {
  /** Counts reports committed (the rate is measured from these). */
  appended(reports: number): void;
  /**
   * Which of a pass's due windows may be sealed, judged by the append rate
   * since the previous pass began; starts measuring the rate for this pass.
   */
  pick<C extends SealCandidate>(due: C[], wallNow: number): C[];
  /** Whether the pass may seal `c` next: appends have not come back at a busy rate since it began, or `c` is overdue. */
  mayGoOn(c: SealCandidate, wallNow: number): boolean;
}

/** The shortest span a rate is judged over within a pass; a few commits' worth says nothing yet. */
const MIN_SPAN_MS = 200;

export function createSealDeferral(s: SealDeferralSettings, wallNow: number): SealDeferral {
  // When each window still due was first seen due (wall clock); rebuilt every pass from the due list, so sealed or
  // dropped windows leave it.
  let dueSince = new Map<string, number>();
  let appended = 0;
  let since = wallNow;
  const key = (c: SealCandidate) => `${c.hostKey}:${c.windowStart}`;
  const busy = (now: number, minSpan: number) => now - since >= minSpan && (appended * 1000) / Math.max(1, now - since) >= s.busyReportsPerS;
  const overdue = (c: SealCandidate, now: number) => now - (dueSince.get(key(c)) ?? now) >= s.maxMs;
  return {
    appended(reports) {
      appended += reports;
    },
    pick(due, now) {
      const wasBusy = busy(now, 0);
      appended = 0;
      since = now;
      const seen = new Map<string, number>();
      for (const c of due) {
        const k = key(c);
        seen.set(k, dueSince.get(k) ?? now);
      }
      dueSince = seen;
      return wasBusy ? due.filter((c) => overdue(c, now)) : due;
    },
    mayGoOn(c, now) {
      return !busy(now, MIN_SPAN_MS) || overdue(c, now);
    },
  };
}
