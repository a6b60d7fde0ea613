import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createAlertStore, FIRING_BATCH, hostKey, routeStates, type AlertStore, type AlertTables, type NewAlert, type StoredAlert } from '../../src/metrics/alerts/alert-store.js';
import { countHostReportsAfter } from '../../src/metrics/storage/engine/reader.js';
import { databaseConn, type SqlConn } from '../../src/metrics/storage/engine/sql-conn.js';
import type { Database } from '../../src/core/storage/database.js';
import type { MetricsTables } from '../../src/metrics/storage/tables.js';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { openTestMetricsDatabase } from '../helpers/metrics.js';

/** The AlertStore contract (src/metrics/alerts/alert-store.ts), the same on every backend. */
function incident(over: Partial<NewAlert> = {}): NewAlert {
  return {
    tenantId: 't-a', hostId: 'web-1', fingerprint: 'f1', name: 'HighCpu', severity: 'critical', message: 'hot', labels: { team: 'ops' },
    value: 97.5, threshold: 95, startsAt: 1_000, lastSeenAt: 1_000, resolvedAt: null, createdAt: 5_000, routes: routeStates(), resolvePending: false, ...over,
  };
}

/** Stores incidents of any hosts, each host's under its hold, as the router does. */
async function record(store: AlertStore, changes: { opened: NewAlert[]; updated: StoredAlert[] }): Promise<void> {
  const hosts = new Map([...changes.opened, ...changes.updated].map((a) => [hostKey(a.tenantId, a.hostId), a]));
  for (const { tenantId, hostId } of hosts.values()) {
    const mine = <T extends NewAlert>(list: T[]) => list.filter((a) => a.tenantId === tenantId && a.hostId === hostId);
    await store.forHost(tenantId, hostId, (host) => host.record({ opened: mine(changes.opened), updated: mine(changes.updated) }));
  }
}

for (const backend of BACKENDS) {
  describe(`alert store on ${backend}`, () => {
    let storage: TestStorage;
    let database: Database<MetricsTables>;
    let store: AlertStore;

    before(async () => {
      storage = await freshStorage(backend);
      database = await openTestMetricsDatabase(storage);
      store = createAlertStore(database.db.withTables<AlertTables>(), databaseConn(database), countHostReportsAfter);
    });
    after(async () => {
      await database.close();
      await storage.cleanup();
    });

    test('record opens incidents and updates them in one commit; firing lists the open ones of one host', async () => {
      await record(store, { opened: [incident(), incident({ fingerprint: 'f2', name: 'DiskFilling', severity: 'warning', labels: {}, message: null, value: null, threshold: null }), incident({ tenantId: 't-b' }), incident({ hostId: 'web-2' })], updated: [] });
      const open = await store.firing('t-a', 'web-1');
      assert.deepEqual(open.map((a) => a.name), ['HighCpu', 'DiskFilling'], 'oldest first, this tenant and host only');
      const [cpu, disk] = open;
      assert.ok(cpu!.id > 0);
      assert.deepEqual({ ...cpu!, id: 0 }, { ...incident(), id: 0 }, 'every field round-trips');
      assert.equal(disk!.message, null);

      cpu!.lastSeenAt = 2_000;
      cpu!.value = 99;
      cpu!.routes = routeStates({ pager: { notifiedAt: 6_000, outcome: 'failed', status: 500, error: 'receiver answered HTTP 500' } });
      disk!.resolvedAt = 2_000;
      await record(store, { opened: [], updated: [cpu!, disk!] });
      const after = await store.firing('t-a', 'web-1');
      assert.deepEqual(after.map((a) => [a.name, a.lastSeenAt, a.value, a.routes]), [['HighCpu', 2_000, 99, cpu!.routes]]);
    });

    test('a resolved incident is read with its host\'s open ones while its resolved notification is pending, in both reads', async () => {
      await record(store, { opened: [incident({ tenantId: 't-p', hostId: 'web-p', fingerprint: 'p1' }), incident({ tenantId: 't-p', hostId: 'web-p', fingerprint: 'p2' })], updated: [] });
      const [p1, p2] = await store.firing('t-p', 'web-p');
      p1!.resolvedAt = 3_000;
      p1!.resolvePending = true;
      p2!.resolvedAt = 3_000;
      await record(store, { opened: [], updated: [p1!, p2!] });
      const read = await store.firing('t-p', 'web-p');
      assert.deepEqual(read.map((a) => [a.fingerprint, a.resolvedAt, a.resolvePending]), [['p1', 3_000, true]], 'the pending one only');
      assert.deepEqual(await store.forHost('t-p', 'web-p', (host) => host.open()), read, 'the same under the host\'s hold');
      assert.deepEqual(await store.firing('t-a', 'web-p'), [], 'never another tenant\'s');
      p1!.resolvePending = false;
      await record(store, { opened: [], updated: [p1!] });
      assert.deepEqual(await store.firing('t-p', 'web-p'), []);
    });

    test('an update names its tenant: another tenant\'s incident id changes nothing', async () => {
      const [foreign] = await store.firing('t-b', 'web-1');
      await record(store, { opened: [], updated: [{ ...foreign!, tenantId: 't-a', resolvedAt: 9 }] });
      assert.equal((await store.firing('t-b', 'web-1')).length, 1);
    });

    test('firing reads asked for together are one statement, and each caller gets only its own host\'s incidents', async () => {
      let statements = 0;
      const conn = databaseConn(database);
      const counting: SqlConn = { ...conn, all: (text, params) => { statements++; return conn.all(text, params); } };
      const coalesced = createAlertStore(database.db.withTables<AlertTables>(), counting, countHostReportsAfter);
      const [a1, a1again, b1, a2, none] = await Promise.all([
        coalesced.firing('t-a', 'web-1'), coalesced.firing('t-a', 'web-1'), coalesced.firing('t-b', 'web-1'),
        coalesced.firing('t-a', 'web-2'), coalesced.firing('t-a', 'web-9'),
      ]);
      assert.equal(statements, 1);
      assert.deepEqual(a1, await store.firing('t-a', 'web-1'));
      assert.deepEqual(a1!.map((a) => [a.tenantId, a.hostId, a.name]), [['t-a', 'web-1', 'HighCpu']]);
      assert.deepEqual(a1again, a1);
      assert.notEqual(a1again![0], a1![0], 'two callers of one host get objects of their own');
      assert.deepEqual(b1!.map((a) => [a.tenantId, a.hostId]), [['t-b', 'web-1']], 'the same host id in another tenant is another host');
      assert.deepEqual(a2!.map((a) => [a.tenantId, a.hostId]), [['t-a', 'web-2']]);
      assert.deepEqual(none, []);
      // More hosts than one statement takes: every one answered, in two statements.
      statements = 0;
      const many = await Promise.all(Array.from({ length: FIRING_BATCH + 10 }, (_, i) => coalesced.firing('t-a', i === FIRING_BATCH + 5 ? 'web-2' : `h-${i}`)));
      assert.equal(statements, 2);
      assert.deepEqual(many.map((rows, i) => (rows.length ? i : -1)).filter((i) => i >= 0), [FIRING_BATCH + 5]);
    });

    test('a failed firing read fails every caller of its statement; the next read is a new one', async () => {
      const conn = databaseConn(database);
      let fail = true;
      const flaky: SqlConn = { ...conn, all: (text, params) => (fail ? Promise.reject(new Error('database away')) : conn.all(text, params)) };
      const s = createAlertStore(database.db.withTables<AlertTables>(), flaky, countHostReportsAfter);
      const reads = await Promise.allSettled([s.firing('t-a', 'web-1'), s.firing('t-a', 'web-2')]);
      assert.deepEqual(reads.map((r) => r.status), ['rejected', 'rejected']);
      fail = false;
      assert.equal((await s.firing('t-a', 'web-2')).length, 1);
    });

    test('list: the tenant\'s incidents active in the range, newest start first, host filter and limit', async () => {
      await record(store, { opened: [incident({ fingerprint: 'f3', name: 'Later', startsAt: 3_000, lastSeenAt: 3_000 })], updated: [] });
      const all = await store.list('t-a', { from: 0, to: 10_000, limit: 10 });
      assert.deepEqual(all.map((a) => [a.hostId, a.name]), [['web-1', 'Later'], ['web-2', 'HighCpu'], ['web-1', 'DiskFilling'], ['web-1', 'HighCpu']], 'newest start first, then newest stored');
      assert.ok(all.every((a) => a.tenantId === 't-a'));
      assert.deepEqual((await store.list('t-a', { from: 2_500, to: 10_000, limit: 10 })).map((a) => a.name).sort(), ['HighCpu', 'HighCpu', 'Later'], 'DiskFilling was resolved before the range');
      assert.deepEqual((await store.list('t-a', { from: 0, to: 1_500, limit: 10 })).map((a) => a.name).sort(), ['DiskFilling', 'HighCpu', 'HighCpu'], 'Later started after it');
      assert.deepEqual((await store.list('t-a', { hostId: 'web-2', from: 0, to: 10_000, limit: 10 })).map((a) => a.hostId), ['web-2']);
      assert.equal((await store.list('t-a', { from: 0, to: 10_000, limit: 2 })).length, 2);
      assert.deepEqual(await store.list('t-c', { from: 0, to: 10_000, limit: 10 }), []);
    });

    test('deleteEndedBefore: incidents resolved, or open and last seen, before the cutoff go, of every tenant; the rest stay', async () => {
      // Retention reaches incidents through the tenants table (as every sweep statement does); the other tests' tenants
      // are not in it, so their incidents are out of this sweep's reach.
      const conn = databaseConn(database);
      for (const id of ['t-r1', 't-r2']) await conn.run('INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)', [id, id]);
      const cutoff = 100_000;
      const at = (tenantId: string, name: string, startsAt: number, lastSeenAt: number, resolvedAt: number | null) =>
        incident({ tenantId, hostId: 'h', fingerprint: name, name, startsAt, lastSeenAt, resolvedAt });
      await record(store, { opened: [
        at('t-r1', 'resolved-before', 10_000, 40_000, 50_000),
        at('t-r1', 'resolved-at-cutoff', 10_000, 90_000, cutoff),
        at('t-r1', 'open-last-seen-before', 10_000, 90_000, null),
        at('t-r1', 'open-still-carried', 10_000, 150_000, null),
        at('t-r1', 'resolved-after', 20_000, 110_000, 120_000),
        at('t-r1', 'started-after', 130_000, 130_000, null),
        at('t-r2', 'other-tenant-resolved-before', 5_000, 5_000, 6_000),
      ], updated: [] });
      assert.equal(await store.deleteEndedBefore(cutoff), 3);
      const left = async (tenantId: string) => (await store.list(tenantId, { from: 0, to: 1_000_000, limit: 100 })).map((a) => a.name).sort();
      assert.deepEqual(await left('t-r1'), ['open-still-carried', 'resolved-after', 'resolved-at-cutoff', 'started-after']);
      assert.deepEqual(await left('t-r2'), []);
      assert.equal((await store.list('t-a', { from: 0, to: 10_000, limit: 10 })).length, 4, 'tenants the sweep does not know keep theirs');
      assert.equal(await store.deleteEndedBefore(cutoff), 0, 'a second sweep finds nothing more');
    });

    test('one open incident per fingerprint: the database refuses a second, and a new one may open once the first resolved', async () => {
      await record(store, { opened: [incident({ tenantId: 't-u', fingerprint: 'fu' })], updated: [] });
      await assert.rejects(record(store, { opened: [incident({ tenantId: 't-u', fingerprint: 'fu', startsAt: 2_000 })], updated: [] }));
      const [open] = await store.firing('t-u', 'web-1');
      await record(store, { opened: [incident({ tenantId: 't-u', fingerprint: 'fu', startsAt: 3_000 })], updated: [{ ...open!, resolvedAt: 2_500 }] });
      assert.deepEqual((await store.list('t-u', { from: 0, to: 10_000, limit: 10 })).map((a) => [a.startsAt, a.resolvedAt]), [[3_000, null], [1_000, 2_500]]);
    });

    test('migration 0008 keeps every row of a database holding open duplicates: the oldest carries on, merged, the others resolve', async () => {
      const conn = databaseConn(database);
      await conn.run('DROP INDEX alerts_open_incident');
      await conn.run("DELETE FROM schema_migrations WHERE name = '0008_alerts_open_unique'");
      const insert = (fingerprint: string, startsAt: number, lastSeenAt: number, resolvedAt: number | null, value: number, routes: object) => conn.run(
        `INSERT INTO alerts (tenant_id, host_id, fingerprint, name, severity, message, labels, value, threshold, starts_at, last_seen_at, resolved_at, created_at, routes)
         VALUES ('t-m', 'web-1', ?, 'HighCpu', 'critical', ?, '{}', ?, NULL, ?, ?, ?, 0, ?)`,
        [fingerprint, `at ${lastSeenAt}`, value, startsAt, lastSeenAt, resolvedAt, JSON.stringify(routes)]);
      await insert('fd', 500, 600, 700, 0, {});
      await insert('fd', 1_000, 5_000, null, 1, { pager: { notifiedAt: 10, outcome: 'delivered', status: 200 } });
      await insert('fd', 2_000, 9_000, null, 2, { pager: { notifiedAt: 20, outcome: 'failed', status: 503, error: 'receiver answered HTTP 503' }, chat: { notifiedAt: 20, outcome: 'delivered', status: 200 } });
      await insert('fd', 3_000, 7_000, null, 3, {});
      await insert('other', 4_000, 4_000, null, 4, {});
      await database.close();
      database = await openTestMetricsDatabase(storage);
      store = createAlertStore(database.db.withTables<AlertTables>(), databaseConn(database), countHostReportsAfter);

      const all = await store.list('t-m', { from: 0, to: 100_000, limit: 100 });
      assert.deepEqual(all.map((a) => [a.fingerprint, a.startsAt, a.lastSeenAt, a.resolvedAt, a.value, a.message]).sort(), [
        ['fd', 1_000, 9_000, null, 2, 'at 9000'],
        ['fd', 2_000, 9_000, 9_000, 2, 'at 9000'],
        ['fd', 3_000, 7_000, 7_000, 3, 'at 7000'],
        ['fd', 500, 600, 700, 0, 'at 600'],
        ['other', 4_000, 4_000, null, 4, 'at 4000'],
      ], 'every row kept; the oldest open one carries the latest sighting, the others resolved at their own');
      const [kept] = await store.firing('t-m', 'web-1');
      assert.deepEqual({ ...kept!.routes }, {
        pager: { notifiedAt: 10, outcome: 'delivered', status: 200, deliveredAt: 10 },
        chat: { notifiedAt: 20, outcome: 'delivered', status: 200, deliveredAt: 20 },
      }, 'per route, the state that delivered: the resolved notification still goes out');
      await assert.rejects(record(store, { opened: [incident({ tenantId: 't-m', fingerprint: 'fd' })], updated: [] }), 'the index is in place');
    });
  });
}
