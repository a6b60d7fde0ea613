import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import BetterSqlite3 from 'better-sqlite3';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport } from '../helpers/metrics.js';
import { metricsToken, spawnService, type RealService } from './real-process.js';

/** SIGKILL cycles per backend: 8 in CI (the suite's largest cost: a service start each), `KILL9_CYCLES=100` for a long run. */
const CYCLES = Number(process.env['KILL9_CYCLES'] ?? 8);
const WRITERS = 6;

function sqliteIntegrity(file: string): string {
  const db = new BetterSqlite3(file, { readonly: true });
  try { return (db.pragma('integrity_check', { simple: true }) as string); } finally { db.close(); }
}

/** Ingests reports for host `w<k>` with increasing ts until the service dies; returns the acknowledged ts. */
async function writer(svc: RealService, token: string, k: number, nextTs: () => number): Promise<number[]> {
  const acked: number[] = [];
  for (;;) {
    const ts = nextTs();
    const r = await ingest(svc.url, token, makeReport({ agentId: `w${k}`, ts, cpu: { usage: k } })).catch(() => undefined);
    if (!r) return acked;
    if (r.status === 200) acked.push(ts);
    else assert.equal(r.status, 503, `ingest answered ${r.status} ${r.text}`);
  }
}

/** Every acknowledged report of every host is there, once. */
async function verify(svc: RealService, token: string, acked: Map<number, Set<number>>, from: number, to: number): Promise<void> {
  for (const [k, want] of acked) {
    const read = () => call(svc.url, 'GET', `/api/v1/host/w${k}?from=${from}&to=${to}&points=10000`, { token });
    // A reader told to come back (load shedding while the service warms up) does, as a client would; so does one
    // whose kept-alive socket the server's idle timer closed just as it was reused (a loaded machine widens that race).
    let r = await read().catch(() => undefined);
    for (let tries = 0; (!r || r.status === 503) && tries < 20; tries++) {
      await sleep(1000 * Number(r?.headers.get('retry-after') ?? 1));
      r = await read().catch(() => undefined);
    }
    assert.ok(r, 'the restarted service answers');
    if (!want.size && r.status === 404) continue;
    assert.equal(r.status, 200, r.text);
    const got = r.body.timestamps as number[];
    assert.equal(new Set(got).size, got.length, `host w${k}: a report stored twice`);
    const stored = new Set(got);
    for (const ts of want) assert.ok(stored.has(ts), `host w${k}: acknowledged report ${ts} lost`);
  }
}

describe('metrics under kill -9', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: ${CYCLES} SIGKILLs at random moments under ${WRITERS} concurrent writers lose no acknowledged report and store none twice`, { timeout: 300_000 }, async (t) => {
      const storage: TestStorage = await freshStorage(backend);
      let svc: RealService | undefined;
      // Hooks run in the order registered: the process stops before its schema is dropped.
      t.after(async () => { await svc?.kill(); await storage.cleanup(); });
      const token = await metricsToken(storage, 'acme');
      const from = Date.now() - 3_600_000;
      let ts = from;
      const acked = new Map<number, Set<number>>(Array.from({ length: WRITERS }, (_, k) => [k, new Set<number>()]));
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        svc = await spawnService('metrics', storage, []);
        await verify(svc, token, acked, from, Date.now());
        const running = svc;
        const writers = Array.from({ length: WRITERS }, (_, k) => writer(running, token, k, () => ++ts));
        await sleep(50 + Math.random() * 350);
        await running.kill();
        (await Promise.all(writers)).forEach((list, k) => list.forEach((x) => acked.get(k)!.add(x)));
        if (backend === 'sqlite') assert.equal(sqliteIntegrity(path.join(storage.dataDir, 'metrics.db')), 'ok', `cycle ${cycle}`);
      }
      svc = await spawnService('metrics', storage, []);
      await verify(svc, token, acked, from, Date.now());
      const total = [...acked.values()].reduce((n, s) => n + s.size, 0);
      assert.ok(total > CYCLES, `writes were acknowledged between the kills (${total})`);
      await svc.kill();
    });
  }
});
