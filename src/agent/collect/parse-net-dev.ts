/** Cumulative counters of one interface from /proc/net/dev. */
export interface InterfaceCounters {
  rxBytes: number;
  rxPackets: number;
  rxErrors: number;
  rxDropped: number;
  txBytes: number;
  txPackets: number;
  txErrors: number;
  txDropped: number;
}

/** Parses /proc/net/dev (two header lines, then `name: 16 counters`). */
export function parseNetDev(text: string): Map<string, InterfaceCounters> {
  const out = new Map<string, InterfaceCounters>();
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon === -1) continue;
    const name = line.slice(0, colon).trim();
    const v = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    if (!name || v.length < 16 || v.some((n) => !Number.isFinite(n))) continue;
    out.set(name, {
      rxBytes: v[0]!, rxPackets: v[1]!, rxErrors: v[2]!, rxDropped: v[3]!,
      txBytes: v[8]!, txPackets: v[9]!, txErrors: v[10]!, txDropped: v[11]!,
    });
  }
  return out;
}
