// A sync server restored from a backup hands out again the versions its clients had pulled past; a device must notice
// (by the change at its cursor, not by the version alone), pull everything again and converge, keeping its unsent edits.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { createSqliteStore } from '../../src/client/sqlite.js';
import type { ChangeApplied, HistoryReset, SyncClient, SyncClientOptions } from '../../src/client/index.js';
import { device, until } from './client-fixtures.js';
import WebSocket from 'ws';

const run = promisify(execFile);

/**
 * Takes a backup of the running service's database and, later, puts it back with the service stopped: as
 * docs/deployment.md, "Backups and restore", says (pg_dump/pg_restore; SQLite's backup API, then the file in place).
 */
async function backup(storage: TestStorage): Promise<{ restore(): Promise<void> }> {
  const file = path.join(storage.dataDir, `backup-${randomUUID()}`);
  if (storage.backend === 'sqlite') {
    const db = new Database(path.join(storage.dataDir, 'sync.db'));
    try { await db.backup(file); } finally { db.close(); }
    return {
      async restore() {
        const target = path.join(storage.dataDir, 'sync.db');
        copyFileSync(file, target);
        rmSync(`${target}-wal`, { force: true });
        rmSync(`${target}-shm`, { force: true });
      },
    };
  }
  await run('pg_dump', ['--format=custom', `--schema=${storage.pgSchema}`, '-f', file, storage.databaseUrl!]);
  return { async restore() { await run('pg_restore', ['--clean', '--if-exists', '-d', storage.databaseUrl!, file]); } };
}

/**
 * One user's business on a service the test can stop and start again on the same data. Devices reach it through one
 * base URL their fetch maps to the live process (a restart listens on another port); they sync by `sync()` alone.
 */
async function restartable(t: { after(fn: () => Promise<void>): void }, backend: (typeof BACKENDS)[number]) {
  const storage = await freshStorage(backend);
  let server: SyncUnderTest | undefined = await startSync(backend, {}, { storage });
  const devices: SyncClient[] = [];
  t.after(async () => {
    for (const d of devices) await d.close();
    await server?.close();
    await storage.cleanup();
  });
  const u = await newUser(server);
  const b = await newBusiness(server, u);
  const base = 'http://sync.invalid';
  const live: typeof fetch = (input, init) => fetch(String(input).replace(base, server!.url), init);
  return {
    storage,
    live: () => server!,
    async restart(between: () => Promise<void>) {
      await server!.close();
      server = undefined;
      await between();
      server = await startSync(backend, {}, { storage });
    },
    async open(options: Partial<SyncClientOptions> = {}): Promise<SyncClient> {
      const d = await device(base, u, b.id, { fetch: live, ...options });
      devices.push(d);
      return d;
    },
  };
}

async function contents(d: SyncClient, table: string): Promise<Record<string, unknown>> {
  return Object.fromEntries((await d.list(table)).map((r) => [r.uuid, r.data]));
}

describe('sync client: a server restored from a backup', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: written again past the device's cursor, the device notices by the change at its cursor, pulls everything again and converges; its unsent edit is kept and pushed`, async (t) => {
      const env = await restartable(t, backend);
      const a = await env.open({ store: createSqliteStore(path.join(env.storage.dataDir, `a-${randomUUID()}.sqlite`)) });
      const resets: HistoryReset[] = [];
      const changes: ChangeApplied[] = [];
      a.on('reset', (r) => resets.push(r));
      a.on('change', (c) => changes.push(c));
      const [r1, r2, r3, r4] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      await a.put('jobs', r1, { n: 1 });
      await a.put('jobs', r2, { n: 2 });
      await a.put('jobs', r3, { n: 3 });
      await a.sync();
      const saved = await backup(env.storage);
      // After the backup: lost by the restore.
      await a.put('jobs', r4, { n: 4 });
      await a.put('jobs', r1, { n: 10 });
      await a.sync();
      await a.sync();
      assert.equal(a.pulledVersion, 5);
      assert.deepEqual(resets, [], 'no reset while the history is the one pulled');

      await env.restart(() => saved.restore());
      // Another device writes the restored server past version 5: versions 4-6 are new changes now.
      const b = await env.open();
      await b.sync();
      const r5 = randomUUID();
      await b.put('jobs', r5, { n: 5 });
      await b.sync();
      await b.put('jobs', r2, { n: 20 });
      await b.sync();
      await b.put('jobs', r2, { n: 21 });
      await b.sync();
      assert.equal(b.pulledVersion, 6);

      // An edit made on A meanwhile, not sent yet.
      await a.put('jobs', r3, { n: 30 });
      changes.length = 0;
      await a.sync();
      assert.deepEqual(resets, [{ cursor: 5, serverVersion: 6 }]);
      const expected = { [r1]: { n: 1 }, [r2]: { n: 21 }, [r3]: { n: 30 }, [r5]: { n: 5 } };
      assert.deepEqual(await contents(a, 'jobs'), expected);
      // The app heard of what moved: r4 gone, r1 back to the server's, r2 and r5 brought.
      const heard = new Map(changes.map((c) => [c.uuid, c.data]));
      assert.deepEqual(heard.get(r4), null);
      assert.deepEqual(heard.get(r1), { n: 1 });
      assert.deepEqual(heard.get(r2), { n: 21 });
      assert.deepEqual(heard.get(r5), { n: 5 });
      assert.equal(heard.has(r3), false, 'the unsent edit stays what the app shows');
      assert.equal(a.pendingChanges, 0, 'the edit was pushed');
      await b.sync();
      assert.deepEqual(await contents(b, 'jobs'), expected);
      // A device starting from nothing sees the same.
      const c = await env.open();
      await c.sync();
      assert.deepEqual(await contents(c, 'jobs'), expected);
      // And the next rounds are ordinary ones.
      await a.sync();
      assert.equal(resets.length, 1);
    });

    test(`on ${backend}: restored below the device's cursor and not written since, a store without a cursor mark notices by the version; reopened mid-way finishes the pull and drops what the server does not hold`, async (t) => {
      const env = await restartable(t, backend);
      const file = path.join(env.storage.dataDir, `a-${randomUUID()}.sqlite`);
      let a = await env.open({ store: createSqliteStore(file), pullPageSize: 2 });
      const kept = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      for (const [i, id] of kept.entries()) await a.put('jobs', id, { n: i });
      await a.sync();
      const saved = await backup(env.storage);
      const lost = randomUUID();
      await a.put('jobs', lost, { n: 99 });
      await a.sync();
      assert.equal(a.pulledVersion, 6);
      await env.restart(() => saved.restore());

      // The device stops after the first page of its pull from version 0 (a closed app): the next run goes on from there.
      let pages = 0;
      const stopping: typeof fetch = async (input, init) => {
        if (String(input).endsWith('/api/sync/pull') && ++pages >= 3) throw new TypeError('fetch failed (app closed)');
        return fetch(String(input).replace('http://sync.invalid', env.live().url), init);
      };
      await a.close();
      // As a store written by a client before cursor marks: only the version can tell.
      const older = createSqliteStore(file);
      await older.write([{ op: 'delete', collection: 'meta', key: 'cursor_mark' }]);
      await older.close();
      a = await env.open({ store: createSqliteStore(file), pullPageSize: 2, fetch: stopping });
      const resets: HistoryReset[] = [];
      a.on('reset', (r) => resets.push(r));
      await assert.rejects(a.sync());
      assert.deepEqual(resets, [{ cursor: 6, serverVersion: 5 }]);
      assert.equal(a.pulledVersion, 2);
      await a.close();

      a = await env.open({ store: createSqliteStore(file), pullPageSize: 2 });
      const dropped: ChangeApplied[] = [];
      a.on('change', (c) => dropped.push(c));
      a.on('reset', (r) => resets.push(r));
      await a.sync();
      assert.equal(resets.length, 1, 'the pull goes on; no second reset');
      assert.equal(a.pulledVersion, 5);
      assert.deepEqual(await contents(a, 'jobs'), Object.fromEntries(kept.map((id, i) => [id, { n: i }])));
      assert.deepEqual(dropped.map((c) => [c.uuid, c.data]), [[lost, null]]);
    });

    test(`on ${backend}: a record the restore lost that the device edited meanwhile keeps the edit, known as never synced, and the server takes it`, async (t) => {
      const env = await restartable(t, backend);
      const a = await env.open();
      const [kept, edited] = [randomUUID(), randomUUID()];
      await a.put('jobs', kept, { n: 0 });
      await a.sync();
      const saved = await backup(env.storage);
      // After the backup: the server's record is lost by the restore, the device's edit of it is not sent yet.
      await a.put('jobs', edited, { n: 1 });
      await a.sync();
      await a.put('jobs', edited, { n: 2 });
      await env.restart(() => saved.restore());

      const resets: HistoryReset[] = [];
      const changes: ChangeApplied[] = [];
      a.on('reset', (r) => resets.push(r));
      a.on('change', (c) => changes.push(c));
      await a.sync();
      assert.deepEqual(resets, [{ cursor: 2, serverVersion: 1 }]);
      assert.deepEqual(changes, [], 'the app keeps showing its edit: nothing moved');
      assert.equal(a.pendingChanges, 0, 'the edit was pushed');
      assert.deepEqual(await a.conflicts(), []);
      const expected = { [kept]: { n: 0 }, [edited]: { n: 2 } };
      assert.deepEqual(await contents(a, 'jobs'), expected);
      const c = await env.open();
      await c.sync();
      assert.deepEqual(await contents(c, 'jobs'), expected, 'the server holds the edit');
    });

    test(`on ${backend}: a conflict the device holds goes back to its outbox (its id is the old history's) and is pushed again; a server without it takes the edit`, async (t) => {
      const env = await restartable(t, backend);
      const a = await env.open();
      const b = await env.open();
      const r1 = randomUUID();
      await a.put('jobs', r1, { n: 1 });
      await a.sync();
      await b.sync();
      const saved = await backup(env.storage);
      await b.put('jobs', r1, { n: 2, by: 'b' });
      await b.sync();
      await a.put('jobs', r1, { n: 3, by: 'a' });
      await a.sync();
      assert.deepEqual((await a.conflicts()).map((c) => c.local), [{ n: 3, by: 'a' }]);

      await env.restart(() => saved.restore());
      const resets: HistoryReset[] = [];
      a.on('reset', (r) => resets.push(r));
      await a.sync();
      assert.equal(resets.length, 1);
      assert.deepEqual(await a.conflicts(), []);
      assert.equal(a.pendingChanges, 0);
      assert.deepEqual(await a.get('jobs', r1), { n: 3, by: 'a' });
      await b.sync();
      assert.deepEqual(await b.get('jobs', r1), { n: 3, by: 'a' });
    });

    test(`on ${backend}: restored and written past the cursor while the feed reconnects, the feed's change at cursor + 1 (of the new history) is not taken as the next one: the device notices and converges`, { timeout: 60_000 }, async (t) => {
      const env = await restartable(t, backend);
      // The feed reaches the live process too.
      const heard: number[] = [];
      class LiveSocket extends WebSocket {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(String(url).replace('ws://sync.invalid', env.live().url.replace(/^http/, 'ws')), protocols);
          this.on('message', (d) => {
            const m = JSON.parse(String(d)) as { type: string; version?: number };
            if (m.type === 'change') heard.push(m.version!);
          });
        }
      }
      // A round at most every 30 s: the catch-up round after the reconnect waits, as it does for up to a second normally.
      const a = await env.open({ WebSocket: LiveSocket as never, minRoundIntervalMs: 30_000 });
      const resets: HistoryReset[] = [];
      a.on('reset', (r) => resets.push(r));
      a.on('error', () => undefined);
      const [r1, r2, r3, r4] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      await a.put('jobs', r1, { n: 1 });
      await a.put('jobs', r2, { n: 2 });
      await a.put('jobs', r3, { n: 3 });
      await a.sync();
      const saved = await backup(env.storage);
      await a.put('jobs', r4, { n: 4 });
      await a.put('jobs', r1, { n: 10 });
      await a.sync();
      await a.sync();
      assert.equal(a.pulledVersion, 5);
      a.start();
      await until(() => a.syncState === 'up-to-date', 10_000, 'a up to date with its feed');

      await env.restart(() => saved.restore());
      // Another device writes the restored server: versions 4, 5 and 6 are new changes.
      const b = await env.open();
      await b.sync();
      const r5 = randomUUID();
      await b.put('jobs', r5, { n: 5 });
      await b.sync();
      await b.put('jobs', r2, { n: 20 });
      await b.sync();
      await b.put('jobs', r2, { n: 21 });
      await b.sync();
      assert.equal(b.pulledVersion, 6);
      // A's feed is back and brings version 6, "the next after its cursor"; the client has had it for a moment.
      await until(() => heard.includes(6), 20_000, 'the feed message at version 6');
      await new Promise((resolve) => setTimeout(resolve, 200));
      a.stop();
      await a.sync();
      const expected = { [r1]: { n: 1 }, [r2]: { n: 21 }, [r3]: { n: 3 }, [r5]: { n: 5 } };
      assert.deepEqual(await contents(a, 'jobs'), expected, 'a converges on what the server holds');
      assert.equal(resets.length, 1, 'the restore was noticed');
    });
  }
});
