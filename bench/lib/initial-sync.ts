// Why: the initial-sync phase of the sync benchmark: fresh library clients in a child process, timed, with each side's CPU.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nextMessage, startChild } from './children.js';

export interface InitialSync {
  clients: number;
  wallMs: number;
  p50Ms: number;
  maxMs: number;
  /** Records delivered to all clients together per second of wall time. */
  recordsPerS: number;
  /** CPU per record delivered (records x clients): this process (the service), PostgreSQL's backends, the clients' process. */
  serviceUs: number;
  pgUs: number;
  clientUs: number;
  /** HTTP requests one client's sync made (pulls, the business token, the push-less round's status checks). */
  requestsPerClient: number;
  /** Rounds that failed for the network and were run again (an app's background sync retries them too), with their causes. */
  retries: number;
  retryCauses: string[];
}

interface Reply { times: number[]; wallMs: number; cpuUs: number; held: number[]; requests: number; retries: number; causes: string[]; error?: string }

/** `clients` fresh clients sync the business at once; each must end up holding `records` records. */
export async function initialSync(o: { url: string; businessId: string; email: string; password: string; records: number; clients: number; pgNow: () => number }): Promise<InitialSync> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sync-bench-clients-'));
  const child = startChild('sync-clients');
  try {
    // The service's CPU is counted from the start, so it includes the clients' sign-ins (scrypt at the benchmark's low cost), a small share.
    const cpu0 = process.cpuUsage();
    const pg0 = o.pgNow();
    child.send({ url: o.url, businessId: o.businessId, email: o.email, password: o.password, clients: o.clients, dir });
    const r = await nextMessage<Reply>(child);
    const cpu = process.cpuUsage(cpu0);
    if (r.error) throw new Error(`initial sync failed: ${r.error}`);
    if (r.held.some((n) => n !== o.records)) throw new Error(`clients hold ${r.held.join(', ')} of ${o.records} records`);
    const delivered = o.records * o.clients;
    const times = [...r.times].sort((a, b) => a - b);
    return {
      clients: o.clients, wallMs: r.wallMs, p50Ms: times[times.length >> 1]!, maxMs: times.at(-1)!, recordsPerS: delivered / (r.wallMs / 1000),
      serviceUs: (cpu.user + cpu.system) / delivered, pgUs: ((o.pgNow() - pg0) * 1e6) / delivered, clientUs: r.cpuUs / delivered,
      requestsPerClient: r.requests, retries: r.retries, retryCauses: r.causes,
    };
  } finally {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}
