import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import BetterSqlite3 from 'better-sqlite3';
import { BACKENDS, freshStorage } from '../helpers/backends.js';
import { newBusiness, newUser } from '../helpers/sync.js';
import { change, device, type Device, type PulledChange } from '../sync/push-client.js';
import { spawnService, type RealService } from './real-process.js';

/** SIGKILL cycles per backend: 8 in CI (the suite's largest cost: a service start each), `KILL9_CYCLES=100` for a long run. */
const CYCLES = Number(process.env['KILL9_CYCLES'] ?? 8);
const DEVICES = 4;
const PER_PUSH = 5;
const ARGS = ['--scrypt-log2n', '10', '--user-rate-limit', '1000000', '--ip-rate-limit', '1000000'];

function sqliteIntegrity(file: string): string {
  const db = new BetterSqlite3(file, { readonly: true });
  try { return db.pragma('integrity_check', { simple: true }) as string; } finally { db.close(); }
}

interface Push { records: string[]; acked: boolean }

/** Pushes new records from one device until the service dies; records every push sent and whether it was acknowledged. */
async function pusher(d: Device, pushes: Push[]): Promise<void> {
  for (;;) {
    const records = Array.from({ length: PER_PUSH }, () => randomUUID());
    const push: Push = { records, acked: false };
    pushes.push(push);
    const r = await d.push({ changes: records.map((rec, i) => change(rec, 1, { i })) }).catch(() => undefined);
    if (!r) return;
    if (r.status === 200) {
      assert.equal(r.body.accepted, PER_PUSH, r.text);
      push.acked = true;
    } else {
      assert.equal(r.status, 503, `push answered ${r.status} ${r.text}`);
    }
  }
}

/** Every page from version 0, retrying a shed pull as a client would. */
async function pullEverything(d: Device): Promise<PulledChange[]> {
  for (let tries = 0; ; tries++) {
    try {
      return (await d.pullAll(0, 1000)).changes;
    } catch (e: unknown) {
      // A shed pull (503), or a kept-alive socket closed by the server's idle timer as it was reused: try again.
      if (tries > 20 || !/503|fetch failed/.test(String(e))) throw e;
      await sleep(1000);
    }
  }
}

/** Acknowledged pushes all there, every push all-or-nothing, no change twice, versions 1..n without a gap. */
function verify(changes: PulledChange[], pushes: Push[], what: string): void {
  const versions = changes.map((c) => c.version);
  versions.forEach((v, i) => assert.equal(v, i + 1, `${what}: versions must run 1..n without a gap (got ${v} at ${i})`));
  const stored = new Set(changes.map((c) => c.record_uuid));
  assert.equal(stored.size, changes.length, `${what}: a change stored twice`);
  for (const p of pushes) {
    const present = p.records.filter((r) => stored.has(r)).length;
    if (p.acked) assert.equal(present, PER_PUSH, `${what}: an acknowledged push lost ${PER_PUSH - present} of its changes`);
    else assert.ok(present === 0 || present === PER_PUSH, `${what}: an unacknowledged push half applied (${present}/${PER_PUSH})`);
  }
}

describe('sync under kill -9', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: ${CYCLES} SIGKILLs at random moments under ${DEVICES} pushing devices lose no acknowledged push, half-apply none, and leave versions gap-free`, { timeout: 300_000 }, async (t) => {
      const storage = await freshStorage(backend);
      let svc: RealService | undefined;
      // Hooks run in the order registered: the process stops before its schema is dropped.
      t.after(async () => { await svc?.kill(); await storage.cleanup(); });
      svc = await spawnService('sync', storage, ARGS);
      const user = await newUser(svc);
      const business = await newBusiness(svc, user);
      const pushes: Push[] = [];
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        if (cycle > 0) {
          svc = await spawnService('sync', storage, ARGS);
          verify(await pullEverything(device(svc.url, user.token, business.id)), pushes, `cycle ${cycle}`);
        }
        const running = svc;
        const writers = Array.from({ length: DEVICES }, (_, k) => pusher(device(running.url, user.token, business.id, `dev-${k}`), pushes));
        await sleep(50 + Math.random() * 350);
        await running.kill();
        await Promise.all(writers);
        if (backend === 'sqlite') assert.equal(sqliteIntegrity(path.join(storage.dataDir, 'sync.db')), 'ok', `cycle ${cycle}`);
      }
      svc = await spawnService('sync', storage, ARGS);
      const changes = await pullEverything(device(svc.url, user.token, business.id));
      verify(changes, pushes, 'after the last restart');
      assert.ok(pushes.filter((p) => p.acked).length > CYCLES, 'pushes were acknowledged between the kills');
      await svc.kill();
    });

    // Alongside the pushes' test (its own storage and processes): the two wait on process starts more than they compute.
    test(`on ${backend}: a resumable upload: 3 SIGKILLs while pieces arrive lose no acknowledged byte, and the upload goes on to the exact file`, { timeout: 120_000 }, async (t) => {
      const storage = await freshStorage(backend);
      let svc: RealService | undefined;
      t.after(async () => { await svc?.kill(); await storage.cleanup(); });
      svc = await spawnService('sync', storage, ARGS);
      const user = await newUser(svc);
      const business = await newBusiness(svc, user);
      const bytes = randomBytes(768 * 1024);
      const auth = { authorization: `Bearer ${user.token}`, 'x-business-id': business.id };
      const started = await fetch(`${svc.url}/api/sync/uploads`, {
        method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ record_type: 'invoice', record_uuid: randomUUID(), filename: 'big.bin', size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') }),
      });
      const { id } = await started.json() as { id: string };
      const status = async (url: string) => (await (await fetch(`${url}/api/sync/uploads/${id}`, { headers: auth })).json()) as { received: number; attachment: { uuid: string } | null };
      let acked = 0;
      let attachment: string | undefined;
      let sender: Promise<void> = Promise.resolve();
      // Three runs end in a SIGKILL at a random moment; the fourth sends the rest.
      for (let cycle = 0; cycle < 4 && !attachment; cycle++) {
        if (cycle > 0) {
          svc = await spawnService('sync', storage, ARGS);
          const now = await status(svc.url);
          assert.ok(now.received >= acked, `cycle ${cycle}: ${now.received} bytes stored, ${acked} acknowledged`);
          acked = now.received;
          if (now.attachment) { attachment = now.attachment.uuid; break; }
        }
        const running = svc;
        // 32 KiB pieces from where the stored bytes end, until the process dies or the file is complete.
        sender = (async () => {
          for (;;) {
            const r = await fetch(`${running.url}/api/sync/uploads/${id}`, {
              method: 'PATCH', headers: { ...auth, 'content-type': 'application/offset+octet-stream', 'upload-offset': String(acked) },
              body: bytes.subarray(acked, acked + 32 * 1024),
            }).catch(() => undefined);
            const text = await r?.text().catch(() => undefined);
            if (!r || text === undefined) return;
            assert.equal(r.status, 200, text);
            const body = JSON.parse(text) as { received: number; attachment: { uuid: string } | null };
            acked = body.received;
            if (body.attachment) { attachment = body.attachment.uuid; return; }
          }
        })();
        if (cycle === 3) break;
        await sleep(30 + Math.random() * 150);
        await running.kill();
        await sender;
      }
      await sender;
      assert.ok(attachment, 'the upload completed');
      await svc.kill();
      svc = await spawnService('sync', storage, ARGS);
      const down = await fetch(`${svc.url}/api/sync/attachment/${attachment}`, { headers: auth });
      assert.equal(down.status, 200);
      assert.ok(Buffer.from(await down.arrayBuffer()).equals(bytes), 'the exact bytes');
      await svc.kill();
    });
  }
});
