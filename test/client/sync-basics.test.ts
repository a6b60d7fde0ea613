import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { newBusiness, newUser, startSync } from '../helpers/sync.js';
import { call } from '../helpers/http.js';
import { createMemoryStore, isTransient, SyncClientError, type ChangeApplied, type SyncState } from '../../src/client/index.js';
import { device, Network, oneBusiness, refusingStore, until } from './client-fixtures.js';

/** A fetch that records the status of every push it carries. */
function pushStatuses(): { statuses: number[]; fetch: typeof fetch } {
  const statuses: number[] = [];
  return {
    statuses,
    fetch: async (input, init) => {
      const r = await fetch(input, init);
      if (new URL(String(input instanceof Request ? input.url : input)).pathname === '/api/sync/push') statuses.push(r.status);
      return r;
    },
  };
}

describe('sync client: local writes, push and pull', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: writes on one device reach another, deletes as tombstones, versions numbered as the server expects`, async (t) => {
      const { s, u, b, open } = await oneBusiness(t, backend);
      const a = await open();
      const c = await open();

      const r1 = randomUUID();
      const r2 = randomUUID();
      await a.put('customers', r1, { name: 'Ann' });
      await a.put('customers', r1, { name: 'Anne' }); // coalesced with the unsent create
      await a.put('customers', r2, { name: 'Bob' });
      assert.equal(a.pendingChanges, 2);
      await a.sync();
      assert.equal(a.pendingChanges, 0);

      const applied: string[] = [];
      c.on('change', (e) => applied.push(`${e.uuid}:${e.version}:${JSON.stringify(e.data)}`));
      await c.sync();
      assert.deepEqual(await c.get('customers', r1), { name: 'Anne' });
      assert.deepEqual(await c.get('customers', r2), { name: 'Bob' });
      assert.deepEqual(applied.sort(), [`${r1}:1:{"name":"Anne"}`, `${r2}:1:{"name":"Bob"}`].sort());

      await c.put('customers', r1, { name: 'Anna' });
      await c.delete('customers', r2);
      await c.sync();
      await a.sync();
      assert.deepEqual(await a.get('customers', r1), { name: 'Anna' });
      assert.equal(await a.get('customers', r2), null);
      assert.deepEqual((await a.list('customers')).map((r) => [r.uuid, r.version]), [[r1, 2]]);

      // The server holds exactly one change per local edit that left the device: 2 creates, 1 update, 1 delete.
      const pulled = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id }, json: { since_version: 0 } });
      assert.deepEqual(pulled.body.changes.map((ch: { record_uuid: string; record_version: number; operation: string }) => [ch.record_uuid === r1 ? 'r1' : 'r2', ch.record_version, ch.operation]),
        [['r1', 1, 'create'], ['r2', 1, 'create'], ['r1', 2, 'update'], ['r2', 2, 'delete']]);
      assert.equal(a.pulledVersion, 4);
      assert.equal(c.pulledVersion, 4);
    });

    test(`on ${backend}: the outbox is pushed in batches; a record created and deleted offline never reaches the server`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const net = new Network();
      const a = await open({ fetch: net.fetch, pushBatchSize: 400 });
      for (let i = 0; i < 1000; i++) await a.put('lines', randomUUID(), { i });
      const gone = randomUUID();
      await a.put('lines', gone, { i: -1 });
      await a.delete('lines', gone);
      assert.equal(a.pendingChanges, 1000);
      await a.sync();
      assert.equal(net.count('/api/sync/push'), 3);
      assert.equal((await a.status()).server_version, 1000);
      assert.equal(await a.get('lines', gone), null);
    });

    test(`on ${backend}: pushes are sized in UTF-8 bytes, so text of 3-byte characters never makes a push the server refuses`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const { statuses, fetch: recording } = pushStatuses();
      const a = await open({ fetch: recording });
      // 21,000 characters of 3 UTF-8 bytes: 63,000 bytes each, under the 64 KiB item limit. Counted in characters, 40
      // of them looked like 0.8 MiB of JSON and went out as 2.5 MB: 413 every time, and every later edit waited.
      const text = '漢'.repeat(21_000);
      for (let i = 0; i < 40; i++) await a.put('notes', randomUUID(), { text });
      await a.put('notes', randomUUID(), { text: 'a small edit made after them' });
      await a.sync();
      assert.equal(a.pendingChanges, 0);
      assert.equal((await a.status()).server_version, 41);
      assert.ok(statuses.length >= 4 && statuses.every((st) => st === 200), `push answers ${statuses.join(',')}`);
    });

    test(`on ${backend}: a batch the server finds too large (413) is sent in halves, and nothing waits behind it`, async (t) => {
      // A body limit under the client's budget (768 KiB), as a server may be configured.
      const s = await startSync(backend, { bodyLimit: 512 * 1024 });
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const { statuses, fetch: recording } = pushStatuses();
      const a = await device(s.url, u, b.id, { fetch: recording });
      t.after(() => a.close());
      // 12 items of 60 KB fit the client's budget (756 KB) and not this server's limit.
      for (let i = 0; i < 12; i++) await a.put('notes', randomUUID(), { text: 'x'.repeat(60_000) });
      const later = randomUUID();
      await a.put('notes', later, { text: 'a small edit made after them' });
      await a.sync();
      assert.equal(a.pendingChanges, 0);
      assert.equal((await a.status()).server_version, 13);
      assert.equal(statuses[0], 413, 'the first batch was too large');
      assert.ok(statuses.slice(1).every((st) => st === 200), `then halves: ${statuses.join(',')}`);
      const c = await device(s.url, u, b.id);
      t.after(() => c.close());
      await c.sync();
      assert.deepEqual(await c.get('notes', later), { text: 'a small edit made after them' });
    });

    test(`on ${backend}: a push answered by a proxy's bare 408 (no JSON) keeps its edits and sends them again; none is rejected`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      let timedOut = 0;
      // HAProxy's `timeout http-request` answers so: a page of HTML, not the service's JSON error.
      const proxy = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
        if (url.pathname === '/api/sync/push' && timedOut++ === 0) {
          return new Response('<html><body><h1>408 Request Time-out</h1></body></html>', { status: 408, headers: { 'content-type': 'text/html' } });
        }
        return fetch(input, init);
      };
      const a = await open({ fetch: proxy });
      const errors: string[] = [];
      a.on('error', (e) => errors.push(e.code));
      const rec = randomUUID();
      await a.put('notes', rec, { text: 'kept' });
      await assert.rejects(a.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'request_timeout' && e.status === 408);
      assert.equal(a.pendingChanges, 1, 'the edit is still queued');
      await a.sync();
      assert.equal(a.pendingChanges, 0);
      assert.ok(!errors.includes('rejected'), `no edit rejected: ${errors.join(', ')}`);
      const c = await open();
      await c.sync();
      assert.deepEqual(await c.get('notes', rec), { text: 'kept' });
    });

    test(`on ${backend}: data the server would refuse is refused by put with a typed error, and a queued item it refuses as a whole is rejected so the rest flows`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const store = createMemoryStore();
      // Items an older client queued unchecked: over the 1 MiB body limit (413), and a lone surrogate (400).
      const bad = [{ text: 'x'.repeat(1100 * 1024) }, { text: 'a\ud800b' }];
      const ops = bad.flatMap((data, i) => {
        const uuid = randomUUID();
        return [
          { op: 'put', collection: 'outbox', key: String(i + 1).padStart(16, '0'), value: { seq: i + 1, table: 'notes', uuid, version: 1, operation: 'create', data, sent: false, editedAt: 0 } },
          { op: 'put', collection: 'records', key: `notes\u0000${uuid}`, value: { table: 'notes', uuid, data, version: 1, remote: { data: null, version: 0, instanceId: '', at: '' }, base: null } },
        ] as const;
      });
      await store.write([...ops, { op: 'put', collection: 'meta', key: 'next_seq', value: 3 }]);
      const a = await open({ store });
      const errors: SyncClientError[] = [];
      a.on('error', (e) => errors.push(e));
      const deep: Record<string, unknown> = {};
      let at = deep;
      for (let i = 0; i < 70; i++) at = (at['n'] = {}) as Record<string, unknown>;
      for (const [data, code] of [[{ text: 'x'.repeat(70 * 1024) }, 'payload_too_large'], [{ text: 'a\udc00' }, 'invalid_request'], [deep, 'invalid_request']] as const) {
        await assert.rejects(a.put('notes', randomUUID(), data), (e: unknown) => e instanceof Error && (e as SyncClientError).code === code);
      }
      const good = [randomUUID(), randomUUID(), randomUUID()];
      for (const uuid of good) await a.put('notes', uuid, { text: 'fine' });
      await a.sync();
      assert.equal(a.pendingChanges, 0, 'nothing is stuck');
      assert.deepEqual(errors.map((e) => [e.code, /payload_too_large|invalid_request/.test(e.details ?? '')]), [['rejected', true], ['rejected', true]]);
      assert.equal((await a.status()).server_version, 3);
      assert.deepEqual((await a.list('notes')).map((r) => r.uuid).sort(), [...good].sort(), 'the refused records show the server\'s state again: none');
    });

    test(`on ${backend}: a pull of many pages applies each change once, in order; a page that fails to apply stops the pull where it was`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const writer = await open();
      const uuids = Array.from({ length: 10 }, () => randomUUID());
      for (const [i, uuid] of uuids.entries()) await writer.put('customers', uuid, { i });
      await writer.sync();

      // The store refuses its second write of pulled records, as a full disk would.
      const store = createMemoryStore();
      let pageWrites = 0;
      let refuse = true;
      const write = store.write.bind(store);
      store.write = async (ops, o) => {
        if (ops.some((op) => op.collection === 'records') && ++pageWrites === 2 && refuse) throw new Error('disk full');
        return write(ops, o);
      };
      const net = new Network();
      const reader = await open({ store, fetch: net.fetch, pullPageSize: 3 });
      const seen: number[] = [];
      reader.on('change', (e) => seen.push((e.data as { i: number }).i));
      await assert.rejects(reader.sync(), /disk full/);
      assert.equal(reader.pulledVersion, 3, 'the cursor stays after the last page applied');
      assert.deepEqual(seen, [0, 1, 2]);
      refuse = false;
      await reader.sync();
      assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'every change once, in version order');
      assert.equal(reader.pulledVersion, 10);
      assert.deepEqual((await reader.list('customers')).map((r) => r.uuid).sort(), [...uuids].sort());
    });

    test(`on ${backend}: a sync() queued behind a round when close() is called rejects with closed, and the closed client neither sends nor writes again`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const net = new Network();
      const base = createMemoryStore();
      let closed = false;
      const late: string[] = [];
      const store = {
        ...base,
        write: async (...args: Parameters<typeof base.write>) => { if (closed) late.push('write'); return base.write(...args); },
        close: async () => { closed = true; return base.close(); },
      };
      const c = await open({ fetch: net.fetch, store });
      await c.sync();
      await c.put('customers', randomUUID(), { name: 'a' });
      const running = c.sync();
      const queued = c.sync();
      running.catch(() => undefined);
      queued.catch(() => undefined);
      await c.close();
      const sent = net.calls.length;
      // The store has a new owner now: the closed client must leave it alone.
      const next = await open({ store: base });
      await Promise.allSettled([running, queued]);
      await next.sync();
      await assert.rejects(queued, (e: unknown) => e instanceof SyncClientError && e.code === 'closed');
      assert.deepEqual(net.calls.slice(sent), []);
      assert.deepEqual(late, []);
      // Nor do its local calls: a put would land in the new owner's store under a sequence number it also hands out.
      const isClosed = (e: unknown) => e instanceof SyncClientError && e.code === 'closed';
      await assert.rejects(c.put('customers', randomUUID(), { name: 'late' }), isClosed);
      await assert.rejects(c.delete('customers', randomUUID()), isClosed);
      await assert.rejects(c.get('customers', randomUUID()), isClosed);
      await assert.rejects(c.list('customers'), isClosed);
      await assert.rejects(c.conflicts(), isClosed);
      assert.deepEqual(late, []);
      assert.equal(next.pendingChanges, 0);
      await next.close();
    });

    test(`on ${backend}: after stop(), a background trigger that came during a round starts no further round`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      let hold: Promise<void> | null = null;
      const c = await open({
        fetch: async (input, init) => {
          if (hold && new URL(String(input instanceof Request ? input.url : input)).pathname === '/api/sync/pull') await hold;
          return fetch(input, init);
        },
      });
      c.start();
      await until(() => c.syncState === 'up-to-date', 10_000, 'the first round');
      let release!: () => void;
      hold = new Promise((resolve) => { release = resolve; });
      const states: SyncState[] = [];
      c.on('state', (st) => states.push(st));
      await c.put('customers', randomUUID(), { name: 'a' });
      await until(() => states.includes('syncing'), 10_000, 'a round for the write');
      // A second write during the round: its trigger fires (a 0 ms timer) while the round waits for its pull.
      await c.put('customers', randomUUID(), { name: 'b' });
      await new Promise((r) => setTimeout(r, 5));
      c.stop();
      hold = null;
      release();
      await until(() => states.at(-1) !== 'syncing', 10_000, 'the round to end');
      assert.deepEqual(states, ['syncing', 'up-to-date']);
    });

    test(`on ${backend}: an item the server rejects is reported as a typed error and the record shows the server's state again`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      // Two stores claiming one device id: the second numbers version 1 with other content, which the server rejects.
      const a = await open({ instanceId: 'shared-id' });
      const c = await open({ instanceId: 'shared-id' });
      const rec = randomUUID();
      await a.put('customers', rec, { name: 'first' });
      await a.sync();
      const errors: SyncClientError[] = [];
      const changes: ChangeApplied[] = [];
      c.on('error', (e) => errors.push(e));
      c.on('change', (e) => changes.push(e));
      await c.put('customers', rec, { name: 'second' });
      await c.sync();
      assert.equal(errors.length, 1);
      assert.equal(errors[0]!.code, 'rejected');
      assert.match(errors[0]!.details ?? '', /already pushed by this instance with different content/);
      assert.equal(c.pendingChanges, 0);
      assert.deepEqual(await c.get('customers', rec), { name: 'first' });
      // The round pulled the server's version before pushing, so the revert lands directly on it.
      assert.deepEqual(changes.map((e) => [e.origin, e.data]), [['revert', { name: 'first' }]]);
    });

    test(`on ${backend}: a push whose answers were lost, accepted as a retry after another device's newer change was pulled, leaves the record showing that change`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      let lose = 0;
      // The server stores the push; its answer is lost on the way back.
      const fetchA = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const res = await fetch(input, init);
        if (lose > 0 && new URL(String(input)).pathname === '/api/sync/push') {
          lose--;
          throw new TypeError('fetch failed (answer lost)');
        }
        return res;
      };
      const a = await open({ fetch: fetchA });
      const c = await open();
      const rec = randomUUID();
      await a.put('notes', rec, { text: 'v1' });
      await a.sync();
      await c.sync();
      await a.put('notes', rec, { text: 'from a' });
      lose = 3; // the push and its two immediate resends
      await assert.rejects(a.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
      assert.equal(a.pendingChanges, 1);
      await c.sync();
      await c.put('notes', rec, { text: 'from c' });
      await c.sync();
      const changes: ChangeApplied[] = [];
      a.on('change', (e) => changes.push(e));
      // Pulls c's version 3 (kept from showing by a's queued edit), then the resent version 2 is accepted as a retry.
      await a.sync();
      assert.equal(a.pendingChanges, 0);
      assert.deepEqual(await a.get('notes', rec), { text: 'from c' }, 'a shows what the server holds (it stayed on its own edit, its cursor past c\'s change)');
      assert.deepEqual((await a.list('notes')).map((r) => r.version), [3]);
      assert.deepEqual(changes.map((e) => [e.origin, e.version, e.data]), [['remote', 3, { text: 'from c' }]]);
    });
  }
});

test('a put the local store refuses (the device\'s storage full) rejects and queues nothing: nothing of it is pushed, memory and store stay one; the retried put is pushed once', async (t) => {
  const { s, u, b, open } = await oneBusiness(t, 'sqlite');
  const inner = createMemoryStore();
  let refuse = false;
  const store = refusingStore(inner, () => refuse && !(refuse = false));
  const a = await open({ store });
  const edited = randomUUID();
  await a.put('customers', edited, { name: 'first' });
  refuse = true;
  // An edit of an entry not sent yet, and a new record: each refused by the store.
  const localStore = (e: unknown) => e instanceof SyncClientError && e.code === 'local_store' && /QuotaExceededError/.test(e.message) && (e.cause as Error).name === 'QuotaExceededError';
  await assert.rejects(a.put('customers', edited, { name: 'refused edit' }), localStore);
  const fresh = randomUUID();
  refuse = true;
  await assert.rejects(a.put('customers', fresh, { name: 'refused create' }), localStore);
  refuse = true;
  await assert.rejects(a.delete('customers', edited), localStore);
  assert.equal(a.pendingChanges, 1, 'only the first put is queued');
  assert.deepEqual(await a.get('customers', edited), { name: 'first' });
  await a.sync();
  const server = async () => {
    const r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id }, json: { since_version: 0, limit: 1000 } });
    return (r.body.changes as Array<{ record_uuid: string; record_version: number; data: unknown }>).map((c) => [c.record_uuid, c.record_version, c.data]);
  };
  assert.deepEqual(await server(), [[edited, 1, { name: 'first' }]], 'what the store refused never reached the server');
  await a.put('customers', fresh, { name: 'retried create' });
  await a.sync();
  assert.deepEqual(await server(), [[edited, 1, { name: 'first' }], [fresh, 1, { name: 'retried create' }]]);
  // The same store opened again holds what the server has: memory and store never parted.
  await a.close();
  const again = await open({ store: inner });
  assert.equal(again.pendingChanges, 0);
  assert.deepEqual(await again.get('customers', fresh), { name: 'retried create' });
});

test('a push whose outcome the local store refuses to record is sent again as the same retry: nothing is lost, doubled or left pending', async (t) => {
  const { s, u, b, open } = await oneBusiness(t, 'sqlite');
  const inner = createMemoryStore();
  let refuseSettle = false;
  // The write that records a push's outcome is the one that takes entries out of the outbox.
  const store = refusingStore(inner, (ops) => refuseSettle && ops.some((o) => o.op === 'delete' && o.collection === 'outbox') && !(refuseSettle = false));
  const a = await open({ store });
  const rec = randomUUID();
  await a.put('customers', rec, { name: 'Ann' });
  refuseSettle = true;
  await assert.rejects(a.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'local_store' && isTransient(e));
  assert.equal(a.pendingChanges, 1, 'the outbox in memory is what the store holds: the entry is still there');
  await a.sync();
  assert.equal(a.pendingChanges, 0);
  const pulled = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id }, json: { since_version: 0, limit: 1000 } });
  assert.deepEqual(pulled.body.changes.map((c: { record_uuid: string; record_version: number }) => [c.record_uuid, c.record_version]), [[rec, 1]], 'stored once');
  await a.close();
  const again = await open({ store: inner });
  assert.equal(again.pendingChanges, 0, 'nothing left to send after a restart either');
  assert.equal((await again.conflicts()).length, 0);
});
