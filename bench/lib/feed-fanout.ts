// Why: the fan-out phase of the sync benchmark: thousands of feed sockets in a child process, one-change pushes, delivery times and the service's memory.
import { randomUUID } from 'node:crypto';
import { nextMessage, startChild } from './children.js';
import { memoryAfterGc } from './memory.js';

export interface FanOut {
  sockets: number;
  businesses: number;
  p50: number; p95: number; p99: number; max: number;
  lastP50: number; lastP99: number;
  cpuMsPerPush: number;
  /** MiB after a full GC: before the sockets, with them open, half-way, at the end. */
  heap: number[];
  rss: number[];
}

interface Stats { kind: 'stats'; received: number; deliveries: number; p50: number; p95: number; p99: number; max: number }

/**
 * `sockets` subscribers spread evenly over `businessIds` (socket i on business i mod n); pushes go to the
 * businesses in turn, so each reaches the sockets of one business.
 */
export async function feedFanOut(o: { url: string; token: string; userId: string; businessIds: string[]; sockets: number; pushes: number }): Promise<FanOut> {
  const before = memoryAfterGc();
  const child = startChild('feed-sockets');
  const n = o.businessIds.length;
  const socketsOf = (k: number) => Math.floor(o.sockets / n) + (k < o.sockets % n ? 1 : 0);
  try {
    child.send({ url: o.url, token: o.token, businessIds: o.businessIds, userId: o.userId, sockets: o.sockets });
    const ready = await nextMessage<{ kind: string; error?: string }>(child, (m) => m.kind === 'ready' || m.kind === 'failed');
    if (ready.kind === 'failed') throw new Error(`feed sockets failed to open: ${ready.error}`);
    const open = memoryAfterGc();
    let half = open;
    const last: number[] = [];
    const cpu0 = process.cpuUsage();
    let gcUs = 0;
    let expected = 0;
    for (let i = 0; i < o.pushes; i++) {
      const uuid = randomUUID();
      const businessId = o.businessIds[i % n]!;
      const delivered = nextMessage<{ kind: string; uuid: string; lastMs: number }>(child, (m) => m.kind === 'delivered' && m.uuid === uuid);
      const body = JSON.stringify({ business_id: businessId, instance_id: 'bench-fanout', changes: [{ table_name: 'customers', record_uuid: uuid, version: 1, operation: 'create', data: { i } }] });
      const headers = { authorization: `Bearer ${o.token}`, 'x-business-id': businessId, 'content-type': 'application/json' };
      expected += socketsOf(i % n);
      child.send({ kind: 'push', uuid, sentAt: performance.timeOrigin + performance.now(), expect: socketsOf(i % n) });
      const r = await fetch(`${o.url}/api/sync/push`, { method: 'POST', headers, body });
      await r.arrayBuffer();
      if (r.status !== 200) throw new Error(`push answered ${r.status}`);
      last.push((await delivered).lastMs);
      if (i === (o.pushes >> 1)) {
        const gc0 = process.cpuUsage();
        half = memoryAfterGc();
        gcUs += cpuUs(process.cpuUsage(gc0));
      }
    }
    const pushUs = cpuUs(process.cpuUsage(cpu0)) - gcUs;
    const end = memoryAfterGc();
    child.send({ kind: 'stats' });
    const s = await nextMessage<Stats>(child, (m) => m.kind === 'stats');
    if (s.deliveries !== expected) throw new Error(`${s.deliveries} deliveries, expected ${expected}`);
    last.sort((a, b) => a - b);
    const q = (p: number) => last[Math.min(last.length - 1, Math.floor(p * last.length))] ?? 0;
    return {
      sockets: o.sockets, businesses: n, p50: s.p50, p95: s.p95, p99: s.p99, max: s.max, lastP50: q(0.5), lastP99: q(0.99),
      // The service's CPU (and this loop's) per push; the half-way collection is left out.
      cpuMsPerPush: pushUs / 1000 / o.pushes,
      heap: [before, open, half, end].map((m) => m.heapMiB), rss: [open, end].map((m) => m.rssMiB),
    };
  } finally {
    child.send({ kind: 'close' });
    await new Promise((resolve) => { child.once('exit', resolve); setTimeout(resolve, 5000).unref(); });
    child.kill();
  }
}

function cpuUs(u: NodeJS.CpuUsage): number {
  return u.user + u.system;
}
