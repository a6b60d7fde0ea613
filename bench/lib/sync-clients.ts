// Why: the initial-sync benchmark's clients run in their own process, as devices do, so the service's CPU and the clients' are measured apart.
//
// Started by bench/sync.ts with an IPC channel. Signs `clients` fresh clients of the library (SQLite stores in
// `dir`) in, then starts sync() on all of them at once and answers with each one's time, the process's CPU and
// the records each store holds.
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { SyncClient, isTransient } from '../../src/client/index.js';
import { createSqliteStore } from '../../src/client/sqlite.js';

interface Start { url: string; businessId: string; email: string; password: string; clients: number; dir: string }

process.once('message', (s: Start) => {
  void run(s).then((r) => process.send!(r), (e: unknown) => process.send!({ error: String(e) })).finally(() => process.disconnect());
});

async function run(s: Start) {
  const files = Array.from({ length: s.clients }, (_, i) => path.join(s.dir, `client-${i}.sqlite`));
  // Signed in one after another (the service bounds concurrent password checks), then all sync at once.
  const clients: SyncClient[] = [];
  // Requests of the sync rounds, counted: each one is spent from the user's rate limit (100 a minute by default).
  let requests = 0;
  let counting = false;
  const counted: typeof fetch = (input, init) => {
    if (counting) requests++;
    return fetch(input, init);
  };
  for (const file of files) {
    // The library's own page size, as an app gets it.
    const client = await SyncClient.open({ baseUrl: s.url, businessId: s.businessId, store: createSqliteStore(file), fetch: counted });
    await client.login({ email: s.email, password: s.password });
    clients.push(client);
  }
  const cpu0 = process.cpuUsage();
  counting = true;
  const t0 = performance.now();
  // A round that fails for the network is run again, as an app's background sync does (counted: `retries`).
  let retries = 0;
  const causes: string[] = [];
  const times = await Promise.all(clients.map(async (client) => {
    for (;;) {
      try {
        await client.sync();
        break;
      } catch (e: unknown) {
        if (!isTransient(e)) throw e;
        retries++;
        causes.push(String((e as { cause?: { cause?: unknown } }).cause?.cause ?? (e as { cause?: unknown }).cause ?? e));
      }
    }
    const ms = performance.now() - t0;
    await client.close();
    return ms;
  }));
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const held = files.map((file) => {
    const db = new BetterSqlite3(file, { readonly: true });
    try { return (db.prepare('SELECT count(*) AS n FROM records').get() as { n: number }).n; } finally { db.close(); }
  });
  return { times, wallMs, cpuUs: cpu.user + cpu.system, held, requests: requests / s.clients, retries, causes: [...new Set(causes)] };
}
