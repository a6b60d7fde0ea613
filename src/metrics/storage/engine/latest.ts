import type { HostLatest } from '../../domain/metrics-store.js';
import { decodeSamples } from '../sample-codec.js';
import { decodeBlock } from './block-codec.js';
import type { SqlConn } from './sql-conn.js';

/**
 * Each host's latest report, read from where it lives (the head, or the last
 * block of a host that went quiet) rather than kept in a row every report
 * would update: the ingest path stays append-only.
 */
export async function latestByHost(conn: SqlConn, tenantId: string, nameOf: (ids: Iterable<number>) => Promise<Map<number, string>>): Promise<HostLatest[]> {
  const hosts = await conn.all<{ key: number; host_id: string; hostname: string; platform: string }>(
    'SELECT key, host_id, hostname, platform FROM hosts WHERE tenant_id = ?', [tenantId]);
  const newest = new Map<number, Array<{ ts: number; values: Map<number, number> }>>();
  for (const h of hosts) {
    const rows = (await conn.all<{ ts: number; samples: Uint8Array }>('SELECT ts, samples FROM reports WHERE host_key = ? ORDER BY ts DESC LIMIT 2', [h.key]))
      .map((r) => { const { metricIds, values } = decodeSamples(r.samples); return { ts: Number(r.ts), values: new Map(Array.from(metricIds, (id, i) => [id, values[i]!])) }; });
    if (rows.length < 2) {
      const [block] = await conn.all<{ data: Uint8Array }>('SELECT data FROM blocks WHERE host_key = ? ORDER BY window_start DESC LIMIT 1', [h.key]);
      if (block) {
        const b = decodeBlock(block.data);
        for (let i = b.ts.length - 1; i >= Math.max(0, b.ts.length - 2); i--) {
          const values = new Map<number, number>();
          for (const [id, col] of b.columns) if (col[i] === col[i]) values.set(id, col[i]!);
          rows.push({ ts: b.ts[i]!, values });
        }
      }
    }
    rows.sort((a, b) => b.ts - a.ts);
    newest.set(h.key, rows.slice(0, 2));
  }
  const names = await nameOf(new Set([...newest.values()].flatMap((rows) => (rows[0] ? [...rows[0].values.keys()] : []))));
  const out: HostLatest[] = [];
  for (const h of hosts) {
    const [last, previous] = newest.get(h.key)!;
    if (!last) continue;
    let cpuUsage: number | null = null;
    let memoryPercent: number | null = null;
    let diskPercent: number | null = null;
    for (const [id, v] of last.values) {
      const name = names.get(id);
      if (name === 'cpu.usage') cpuUsage = v;
      else if (name === 'memory.percent') memoryPercent = v;
      else if (name?.startsWith('disk.') && name.endsWith('.percent') && (diskPercent === null || v > diskPercent)) diskPercent = v;
    }
    out.push({
      hostId: h.host_id, hostname: h.hostname, platform: h.platform, lastTs: last.ts,
      cpuUsage, memoryPercent, diskPercent, intervalMs: previous ? last.ts - previous.ts : null,
    });
  }
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return out.sort((a, b) => cmp(a.hostname, b.hostname) || cmp(a.hostId, b.hostId));
}
