import type { HostLatest } from './metrics-store.js';

/**
 * Up / late / down, judged against each host's own reporting interval (the
 * gap between its two latest reports) rather than one fixed timeout, since
 * agents run at different cadences. Documented in docs/metrics-api.md.
 */
export type HostStatus = 'up' | 'late' | 'down';

/** Silent for more than this many intervals: late (one missed report is noise; two are worth a look). */
export const LATE_AFTER_INTERVALS = 2;
/** Silent for more than this many intervals: down. */
export const DOWN_AFTER_INTERVALS = 5;
/** Interval assumed after a host's first report: the agent's default cadence. */
export const DEFAULT_INTERVAL_MS = 10_000;
/**
 * Bounds on the interval used: a burst of reports (a drained spool) cannot
 * make a host late within a second, and a host back from a week offline
 * (a week-long gap) is still marked down within 5 x 5 min.
 */
export const MIN_INTERVAL_MS = 1_000;
export const MAX_INTERVAL_MS = 5 * 60_000;

export function effectiveInterval(intervalMs: number | null): number {
  return Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, intervalMs ?? DEFAULT_INTERVAL_MS));
}

export function hostStatus(host: Pick<HostLatest, 'lastTs' | 'intervalMs'>, now: number): HostStatus {
  const silence = now - host.lastTs;
  const interval = effectiveInterval(host.intervalMs);
  if (silence > DOWN_AFTER_INTERVALS * interval) return 'down';
  if (silence > LATE_AFTER_INTERVALS * interval) return 'late';
  return 'up';
}

export interface HostWithStatus extends HostLatest {
  status: HostStatus;
}

/** Every host of the tenant with its status, and how many hosts are in each status. */
export function withStatus(hosts: HostLatest[], now: number): { hosts: HostWithStatus[]; counts: Record<HostStatus, number> } {
  const counts: Record<HostStatus, number> = { up: 0, late: 0, down: 0 };
  const out = hosts.map((h) => {
    const status = hostStatus(h, now);
    counts[status] += 1;
    return { ...h, status };
  });
  return { hosts: out, counts };
}

/**
 * The time up to which every host that is not down has reported: the oldest
 * latest report among them (undefined when every host is down). A fleet
 * bucket starting later averages only the hosts that have reported so far,
 * so the fleet page leaves it out (docs/metrics-api.md, "Dashboard").
 */
export function reportedUntil(hosts: HostWithStatus[]): number | undefined {
  let until: number | undefined;
  for (const h of hosts) if (h.status !== 'down' && (until === undefined || h.lastTs < until)) until = h.lastTs;
  return until;
}
