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
 * Interfaces made and removed with a container, a compose network, a pod or a
 * VM, each under a new name: veth pairs, Docker's per-network bridges
 * (`br-<12 hex>`), VM taps (`tap*`, libvirt's `vnet<n>`, Proxmox's per-VM
 * `fwbr`/`fwln`/`fwpr`), Calico's `cali*` and Cilium's `lxc<hex>` endpoints.
 * The service keeps at most --max-metrics-per-host names a host ever sent (12
 * per interface), so reporting them would lock a busy host out of the service
 * within days, while their traffic also crosses a stable uplink or bridge
 * (`eth0`, `docker0`, `cni0`, `virbr0`), which is reported.
 */
const EPHEMERAL = /^(?:veth|br-[0-9a-f]{12}$|tap|vnet\d|fw(?:br|ln|pr)\d|cali|lxc(?!br)[0-9a-f_])/;

/** Loopback carries no host traffic; the ephemeral families above would churn through the names bound. */
export function isReportedInterface(name: string): boolean {
  return name !== 'lo' && !EPHEMERAL.test(name);
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
