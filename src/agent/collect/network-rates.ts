import type { InterfaceCounters } from './parse-net-dev.js';
import { round2 } from './parse-proc-stat.js';

/** Counters of one interface plus per-second rates over the last interval. */
export interface InterfaceReport extends InterfaceCounters {
  rxBytesPerSec: number;
  txBytesPerSec: number;
  rxPacketsPerSec: number;
  txPacketsPerSec: number;
}

/**
 * Loopback carries no host traffic, and veth pairs come and go with every
 * container: reporting them would churn through the service's bound on metric
 * names per host without telling anything the bridge/uplink does not.
 */
export function isReportedInterface(name: string): boolean {
  return name !== 'lo' && !name.startsWith('veth');
}

function rate(prev: number | undefined, next: number, seconds: number): number {
  // A counter that went backwards was reset (driver reload, interface recreated): no rate for this interval.
  if (prev === undefined || seconds <= 0 || next < prev) return 0;
  return round2((next - prev) / seconds);
}

/** The `network` object of a report: one entry per reported interface, keyed by its name. */
export function networkReport(
  prev: Map<string, InterfaceCounters> | undefined,
  next: Map<string, InterfaceCounters>,
  seconds: number,
): Record<string, InterfaceReport> {
  const out: Record<string, InterfaceReport> = {};
  for (const [name, c] of [...next].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (!isReportedInterface(name)) continue;
    const p = prev?.get(name);
    out[name] = {
      ...c,
      rxBytesPerSec: rate(p?.rxBytes, c.rxBytes, seconds),
      txBytesPerSec: rate(p?.txBytes, c.txBytes, seconds),
      rxPacketsPerSec: rate(p?.rxPackets, c.rxPackets, seconds),
      txPacketsPerSec: rate(p?.txPackets, c.txPackets, seconds),
    };
  }
  return out;
}
