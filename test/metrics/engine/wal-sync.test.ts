import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Database } from '../../../src/core/storage/database.js';
import { openMetricsDatabase } from '../../../src/metrics/deps.js';
import { AppError } from '../../../src/core/errors.js';
import { createEngineWriter, DEFAULT_WRITER_OPTIONS, pipelinedSync } from '../../../src/metrics/storage/engine/engine-writer.js';
import { sqliteConn } from '../../../src/metrics/storage/engine/sql-conn.js';
import type { MetricsTables } from '../../../src/metrics/storage/tables.js';
import { freshStorage, type TestStorage } from '../../helpers/backends.js';

/** A sync that finishes only when the test says so, and records when each one began. */
function gatedSync() {
  const calls: Array<{ release: (e?: Error) => void }> = [];
  const sync = () => new Promise<void>((resolve, reject) => { calls.push({ release: (e) => (e ? reject(e) : resolve()) }); });
  return { sync, calls };
}

const tick = () => new Promise((r) => setTimeout(r, 20));

test('pipelinedSync: a caller is settled by a sync that began after its call; callers during one share the next', async () => {
  const g = gatedSync();
  const synced = pipelinedSync(g.sync);
  const order: string[] = [];
  const a = synced().then(() => order.push('a'));
  assert.equal(g.calls.length, 1);
  const b = synced().then(() => order.push('b'));
  const c = synced().then(() => order.push('c'));
  await tick();
  assert.equal(g.calls.length, 1, 'b and c wait for a sync that begins after theirs');
  g.calls[0]!.release();
  await a;
  await tick();
  assert.deepEqual(order, ['a']);
  assert.equal(g.calls.length, 2, 'one more sync serves b and c together');
  g.calls[1]!.release();
  await Promise.all([b, c]);
  assert.deepEqual(order, ['a', 'b', 'c']);
});

describe('appends answered after the WAL sync, on SQLite', () => {
  let storage: TestStorage;
  let database: Database<MetricsTables>;
  before(async () => {
    storage = await freshStorage('sqlite');
    database = await openMetricsDatabase({ databaseUrl: undefined, dbSchema: storage.pgSchema, dataDir: storage.dataDir });
    database.sqlite!.prepare(`INSERT INTO tenants (id, name, created_at) VALUES ('t', 't', 0)`).run();
  });
  after(async () => {
    await database.close();
    await storage.cleanup();
  });
  const report = (ts: number) => ({ tenantId: 't', hostId: 'h', hostname: 'h', platform: 'linux', ts, names: ['cpu.usage'], values: [1] });
  const stored = () => (database.sqlite!.prepare('SELECT COUNT(*) AS n FROM reports').get() as { n: number }).n;

  test('no answer before the sync; the next batch commits while the sync runs; a failed sync answers 503 and refuses what follows', async () => {
    const g = gatedSync();
    const errors: unknown[] = [];
    const writer = createEngineWriter(sqliteConn(database.sqlite!), { ...DEFAULT_WRITER_OPTIONS, limits: { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 }, now: Date.now, sealIntervalMs: 0 }, (e) => errors.push(e), g.sync);
    let firstAnswered = false;
    const first = writer.append([report(1_000)]).then((o) => { firstAnswered = true; return o; });
    await tick();
    assert.equal(stored(), 1, 'committed');
    assert.equal(g.calls.length, 1, 'its sync began');
    assert.equal(firstAnswered, false, 'not answered before its sync finished');
    const second = writer.append([report(2_000)]);
    await tick();
    assert.equal(stored(), 2, 'the next batch committed while the first sync ran');
    g.calls[0]!.release();
    assert.deepEqual(await first, [{ status: 'stored' }]);
    await tick();
    assert.equal(g.calls.length, 2, 'the second batch waits for a sync of its own');
    g.calls[1]!.release(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
    await assert.rejects(second, (e: unknown) => (e as { code?: string }).code === 'unavailable');
    await assert.rejects(writer.append([report(3_000)]), (e: unknown) => (e as { code?: string }).code === 'unavailable' && /restart/.test(String(e)));
    assert.equal(errors.length, 1);
    await writer.close();
    await assert.rejects(writer.append([report(4_000)]), (e: unknown) => e instanceof AppError && e.code === 'unavailable' && e.extra?.['retry_after'] === 2,
      'a closed writer answers as a draining instance does: retry elsewhere in 2 s');
  });

  test('after a failed sync, a batch that committed meanwhile is refused even though its own, later sync succeeds', async () => {
    const g = gatedSync();
    const writer = createEngineWriter(sqliteConn(database.sqlite!), { ...DEFAULT_WRITER_OPTIONS, limits: { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 }, now: Date.now, sealIntervalMs: 0 }, () => undefined, g.sync);
    const first = writer.append([report(10_000)]);
    await tick();
    const second = writer.append([report(20_000)]);
    await tick();
    assert.equal(g.calls.length, 1, 'the second waits for a sync of its own');
    g.calls[0]!.release(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
    await assert.rejects(first, /restart/);
    await tick();
    g.calls[1]?.release();
    await assert.rejects(second, /restart/);
    await writer.close();
  });
});
