import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeBlock } from '../../../src/metrics/storage/engine/block-codec.js';
import { appendBatch, newWriterState } from '../../../src/metrics/storage/engine/head-writer.js';
import { SealedTimestamps } from '../../../src/metrics/storage/engine/sealed-timestamps.js';
import { encodeRollup, rollUp } from '../../../src/metrics/storage/engine/rollup.js';
import { prepareSeal, sealWindow, sealWindows } from '../../../src/metrics/storage/engine/sealer.js';
import { HOST_TIER_MS } from '../../../src/metrics/storage/engine/windows.js';
import { BACKENDS } from '../../helpers/backends.js';
import { useEngineDatabase } from '../../helpers/metrics.js';

/**
 * A seal's block is built and compressed before its transaction (prepareSeal);
 * the transaction writes it only if the head rows and the old block are still
 * what it was built from. Anything that changed in between (a late report, a
 * seal by another pass or instance) makes the transaction build the block
 * again from what it finds: no report is lost or sealed twice.
 */
for (const backend of BACKENDS) {
  describe(`prepared seals on ${backend}`, () => {
    const db = useEngineDatabase(backend);
    let tenant = 0;

    /** A new tenant with one host; `append(ts[])` stores reports at those times (cpu.usage = ts / 1000). */
    async function host(): Promise<{ key: number; append: (ts: number[]) => Promise<void>; block: () => Promise<{ ts: number[]; cpu: number[]; data: Buffer }> }> {
      const tenantId = `t-${++tenant}`;
      await db.conn.run('INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)', [tenantId, tenantId]);
      const deps = { conn: db.conn, state: newWriterState(), limits: { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 }, sealed: new SealedTimestamps(), wallNow: () => 0, now: () => 0 };
      const append = async (ts: number[]) => {
        const outcomes = await appendBatch(deps, ts.map((t) => ({ tenantId, hostId: 'h', hostname: 'h', platform: 'linux', ts: t, names: ['cpu.usage'], values: [t / 1000] })));
        assert.ok(outcomes.every((o) => o.status === 'stored'));
      };
      await append([0]);
      const [{ key }] = await db.conn.all<{ key: number }>('SELECT h.key FROM hosts h WHERE h.tenant_id = ?', [tenantId]) as [{ key: number }];
      const block = async () => {
        const [row] = await db.conn.all<{ data: Buffer }>('SELECT data FROM blocks WHERE host_key = ? AND window_start = 0', [key]);
        const b = decodeBlock(row!.data);
        return { ts: [...b.ts], cpu: [...b.columns.values()][0] ? [...[...b.columns.values()][0]!] : [], data: row!.data };
      };
      return { key, append, block };
    }

    async function headRows(key: number): Promise<number> {
      const [r] = await db.conn.all<{ n: number | string }>('SELECT COUNT(*) AS n FROM reports WHERE host_key = ?', [key]);
      return Number(r!.n);
    }

    test('nothing changed since it was prepared: the prepared bytes are written as they are', async () => {
      const h = await host();
      await h.append([10_000, 20_000]);
      const prepared = await prepareSeal(db.conn, { hostKey: h.key, windowStart: 0 });
      assert.ok(prepared);
      assert.equal(await sealWindow(db.conn, { hostKey: h.key, windowStart: 0 }, 0, prepared), true);
      const b = await h.block();
      assert.deepEqual(b.ts, [0, 10_000, 20_000]);
      assert.deepEqual(b.cpu, [0, 10, 20]);
      assert.equal(Buffer.compare(b.data, prepared.data), 0);
      const [{ rollup }] = await db.conn.all<{ rollup: Buffer }>('SELECT rollup FROM blocks WHERE host_key = ?', [h.key]) as [{ rollup: Buffer }];
      assert.equal(Buffer.compare(rollup, prepared.rollup), 0, 'and the prepared rollup');
      assert.equal(await headRows(h.key), 0);
    });

    test('a late report arrived after it was prepared: the block is built again and holds it too', async () => {
      const h = await host();
      await h.append([10_000]);
      const prepared = await prepareSeal(db.conn, { hostKey: h.key, windowStart: 0 });
      await h.append([5_000]);
      assert.equal(await sealWindow(db.conn, { hostKey: h.key, windowStart: 0 }, 0, prepared), true);
      const b = await h.block();
      assert.deepEqual(b.ts, [0, 5_000, 10_000]);
      assert.deepEqual(b.cpu, [0, 5, 10]);
      const [{ rollup }] = await db.conn.all<{ rollup: Buffer }>('SELECT rollup FROM blocks WHERE host_key = ?', [h.key]) as [{ rollup: Buffer }];
      assert.equal(Buffer.compare(rollup, encodeRollup(rollUp(decodeBlock(b.data), HOST_TIER_MS))), 0, 'the rollup is of the block written, late report included');
      assert.equal(await headRows(h.key), 0);
    });

    test('the window was sealed meanwhile (another pass or instance), then got a late report: the stale preparation is not used', async () => {
      const h = await host();
      const stale = await prepareSeal(db.conn, { hostKey: h.key, windowStart: 0 });
      assert.equal(await sealWindow(db.conn, { hostKey: h.key, windowStart: 0 }, 0), true);
      await h.append([30_000]);
      assert.equal(await sealWindow(db.conn, { hostKey: h.key, windowStart: 0 }, 0, stale), true);
      const b = await h.block();
      assert.deepEqual(b.ts, [0, 30_000], 'the sealed report and the late one, each once');
      assert.deepEqual(b.cpu, [0, 30]);
      assert.equal(await headRows(h.key), 0);
    });

    test('several windows sealed in one transaction: each block written, every head row moved, each tenant window marked changed once', async () => {
      const tenantId = `t-${++tenant}`;
      await db.conn.run('INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)', [tenantId, tenantId]);
      const deps = { conn: db.conn, state: newWriterState(), limits: { perHost: 10, perTenant: 10, hostsPerTenant: 10_000 }, sealed: new SealedTimestamps(), wallNow: () => 0, now: () => 0 };
      const hour = 3_600_000;
      // Two hosts of one tenant in window 0, the second also in window 1, reports interleaved as a fleet's arrive.
      const reports = [0, 10_000, 20_000].flatMap((t) => ['a', 'b'].map((hostId) => ({ tenantId, hostId, hostname: hostId, platform: 'linux', ts: t, names: ['cpu.usage'], values: [t / 1000] })));
      reports.push({ tenantId, hostId: 'b', hostname: 'b', platform: 'linux', ts: hour + 5_000, names: ['cpu.usage'], values: [7] });
      assert.ok((await appendBatch(deps, reports)).every((o) => o.status === 'stored'));
      const keys = new Map((await db.conn.all<{ key: number; host_id: string }>('SELECT key, host_id FROM hosts WHERE tenant_id = ?', [tenantId])).map((r) => [r.host_id, r.key]));
      const other = await host();
      await sealWindow(db.conn, { hostKey: other.key, windowStart: 0 }, 0);
      const windows = [{ hostKey: keys.get('a')!, windowStart: 0 }, { hostKey: keys.get('b')!, windowStart: 0 }, { hostKey: keys.get('b')!, windowStart: hour },
        { hostKey: other.key, windowStart: 0 }];
      const items = await Promise.all(windows.map(async (c) => ({ c, prepared: await prepareSeal(db.conn, c) })));
      assert.deepEqual(await sealWindows(db.conn, items, 0), [true, true, true, false], 'a window whose rows were sealed already is not sealed again');
      for (const key of keys.values()) assert.equal(await headRows(key), 0);
      const blocks = await db.conn.all<{ host_key: number; window_start: number | string; rows: number }>(
        'SELECT host_key, window_start, rows FROM blocks WHERE host_key IN (?, ?) ORDER BY host_key, window_start', [keys.get('a')!, keys.get('b')!]);
      assert.deepEqual(blocks.map((r) => [r.host_key, Number(r.window_start), r.rows]), [[keys.get('a')!, 0, 3], [keys.get('b')!, 0, 3], [keys.get('b')!, hour, 1]]);
      const marked = await db.conn.all<{ window_start: number | string; version: number }>('SELECT window_start, version FROM tenant_windows WHERE tenant_id = ? ORDER BY window_start', [tenantId]);
      assert.deepEqual(marked.map((r) => [Number(r.window_start), r.version]), [[0, 1], [hour, 1]], 'one version step per tenant window and transaction');
    });
  });
}
