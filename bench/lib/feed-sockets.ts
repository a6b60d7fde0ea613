// Why: the feed benchmark's subscribers live in their own process, so the service's CPU and memory are measured alone.
//
// Started by bench/sync.ts with an IPC channel. Opens `sockets` change-feed WebSockets spread over the
// businesses it is given, then for each {uuid, sentAt, expect} it is told about, times the message of that
// record on each of the `expect` sockets of its business (sentAt and arrival
// are epoch milliseconds from performance.timeOrigin, comparable across processes) and answers once all
// sockets have it; `stats` answers the quantiles over every (push, socket) delivery.
import WebSocket from 'ws';

/** Socket i subscribes to businessIds[i % businessIds.length]. */
interface Start { url: string; token: string; businessIds: string[]; userId: string; sockets: number }
type Command = { kind: 'push'; uuid: string; sentAt: number; expect: number } | { kind: 'stats' } | { kind: 'close' };

const now = () => performance.timeOrigin + performance.now();
const send = (m: unknown) => process.send!(m);
/** Arrival times per record; the push's send time may come before or after its messages. */
const arrivals = new Map<string, { at: number[]; sentAt?: number; expect?: number }>();
const latencies: number[] = [];
const sockets: WebSocket[] = [];
let received = 0;

function settle(uuid: string): void {
  const a = arrivals.get(uuid);
  if (!a || a.sentAt === undefined || a.expect === undefined || a.at.length < a.expect) return;
  arrivals.delete(uuid);
  const ms = a.at.map((t) => t - a.sentAt!);
  latencies.push(...ms);
  send({ kind: 'delivered', uuid, lastMs: Math.max(...ms) });
}

function onMessage(data: WebSocket.RawData): void {
  const at = now();
  received++;
  const uuid = (JSON.parse(String(data)) as { record_uuid: string }).record_uuid;
  let a = arrivals.get(uuid);
  if (!a) arrivals.set(uuid, (a = { at: [] }));
  a.at.push(at);
  settle(uuid);
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

async function open(s: Start): Promise<void> {
  const target = (k: number) => `${s.url.replace('http', 'ws')}/ws/sync?business_id=${s.businessIds[k % s.businessIds.length]}&user_id=${s.userId}`;
  // A few hundred upgrades at a time: the service authorises each one against the database.
  for (let i = 0; i < s.sockets; i += 250) {
    await Promise.all(Array.from({ length: Math.min(250, s.sockets - i) }, (_, j) => new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(target(i + j), { headers: { authorization: `Bearer ${s.token}` } });
      // Counted once subscribed: the server says so with its `ready` message.
      ws.once('error', reject);
      ws.on('message', (data) => {
        const text = String(data);
        // The server's heartbeats (every 30 s) are not changes.
        if (text === '{"type":"heartbeat"}') return;
        if (!text.startsWith('{"type":"ready"')) return onMessage(data);
        sockets.push(ws);
        resolve();
      });
    })));
  }
}

let started: Start | undefined;
process.on('message', (m: Start | Command) => {
  if (!started) {
    started = m as Start;
    void open(started).then(() => send({ kind: 'ready' }), (e: unknown) => send({ kind: 'failed', error: String(e) }));
    return;
  }
  const c = m as Command;
  if (c.kind === 'push') {
    const a = arrivals.get(c.uuid) ?? { at: [] };
    arrivals.set(c.uuid, { ...a, sentAt: c.sentAt, expect: c.expect });
    settle(c.uuid);
  } else if (c.kind === 'stats') {
    latencies.sort((x, y) => x - y);
    send({ kind: 'stats', received, deliveries: latencies.length, p50: quantile(latencies, 0.5), p95: quantile(latencies, 0.95), p99: quantile(latencies, 0.99), max: latencies.at(-1) ?? 0 });
  }
  else {
    for (const ws of sockets) ws.close();
    process.disconnect();
  }
});
