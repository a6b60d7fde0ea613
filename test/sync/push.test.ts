import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { businessToken, newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { change, device, tombstone } from './push-client.js';
import { PUSH_LIMITS } from '../../src/sync/changes/change-limits.js';

const UNKNOWN = '00000000-0000-4000-8000-000000000000';

for (const backend of BACKENDS) {
  describe(`sync push on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { bodyLimit: 256 * 1024 }); });
    after(() => s.close());

    async function setup() {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      return { u, b, dev: device(s.url, u.token, b.id) };
    }

    test('applies changes and tombstones in order and answers accepted, rejected, server_version, conflicts', async () => {
      const { dev } = await setup();
      const a = randomUUID();
      const b = randomUUID();
      const r = await dev.push({ changes: [change(a, 1, { name: 'Ann' }), change(b, 1), change(a, 2, { name: 'Anne' })], tombstones: [tombstone(b, 2)] });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body, { accepted: 4, rejected: 0, server_version: 4, conflicts: [], rejections: [] });
      const { changes } = await dev.pullAll(0);
      assert.deepEqual(changes.map((c) => [c.version, c.record_uuid, c.operation, c.record_version]), [[1, a, 'create', 1], [2, b, 'create', 1], [3, a, 'update', 2], [4, b, 'delete', 2]]);
      assert.deepEqual(changes[2]!.data, { name: 'Anne' });
      assert.deepEqual(changes[3]!.data, {}, 'a tombstone pulls as operation delete with empty data');
      assert.equal(changes[0]!.instance_id, dev.instanceId);
    });

    test('a retried push is accepted again but never creates a second change', async () => {
      const { dev } = await setup();
      const rec = randomUUID();
      const body = { changes: [change(rec, 1, { n: 1 }), change(rec, 2, { n: 2 })], tombstones: [tombstone(rec, 3)] };
      const first = await dev.push(body);
      const retry = await dev.push(body);
      assert.equal(first.body.server_version, 3);
      assert.deepEqual(retry.body, { accepted: 3, rejected: 0, server_version: 3, conflicts: [], rejections: [] });
      // Key order does not make a retry look new.
      const reordered = await dev.push({ changes: [{ data: { n: 1 }, operation: 'create', version: 1, record_uuid: rec.toUpperCase(), table_name: 'customers' }] });
      assert.equal(reordered.body.accepted, 1);
      assert.equal((await dev.pullAll(0)).changes.length, 3);
    });

    test('a push holding a conflicted item twice, with a later item of the record between, answers the conflict for both, and a retry answers the same', async () => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const tablet = device(s.url, u.token, b.id, 'tablet-A');
      const phone = device(s.url, u.token, b.id, 'phone-B');
      const rec = randomUUID();
      assert.equal((await tablet.push({ changes: [change(rec, 1, { a: 1 })] })).status, 200);
      assert.equal((await phone.push({ changes: [change(rec, 2, { b: 2 })] })).body.accepted, 1);
      // The tablet edited twice offline, and its queue holds the first edit twice (a batch queued again).
      const body = { changes: [change(rec, 2, { a: 2 }), change(rec, 3, { a: 3 }), change(rec, 2, { a: 2 })] };
      const first = await tablet.push(body);
      const retry = await tablet.push(body);
      assert.deepEqual([first.body.accepted, first.body.rejected, first.body.conflicts.length], [1, 0, 1], JSON.stringify(first.body.rejections));
      assert.deepEqual(retry.body, first.body);
    });

    test('invalid items are rejected with reasons while the valid ones are applied', async () => {
      const { dev } = await setup();
      const rec = randomUUID();
      const upper = randomUUID().toUpperCase();
      const r = await dev.push({
        changes: [change(rec, 1), { table_name: '../etc', record_uuid: rec, version: 1, operation: 'create', data: {} }, { ...change(upper, 1), operation: 'merge' }, 'nope'],
        tombstones: [{ table_name: 'customers', record_uuid: 'x', version: 1 }],
      });
      assert.equal(r.status, 200);
      assert.equal(r.body.accepted, 1);
      assert.equal(r.body.rejected, 4);
      assert.deepEqual(r.body.rejections.map((x: { kind: string; index: number }) => [x.kind, x.index]), [['change', 1], ['change', 2], ['change', 3], ['tombstone', 0]]);
      assert.match(r.body.rejections[0].reason, /table_name/);
      assert.match(r.body.rejections[1].reason, /operation/);
      assert.match(r.body.rejections[3].reason, /record_uuid/);
      assert.equal(r.body.rejections[1].record_uuid, upper.toLowerCase(), 'a UUID is answered lower-case, whichever rule refused its item');
      assert.equal((await dev.pullAll(0)).changes.length, 1);
    });

    test('an older version from the same device is rejected as stale and nothing changes', async () => {
      const { dev } = await setup();
      const rec = randomUUID();
      await dev.push({ changes: [change(rec, 1), change(rec, 2)] });
      const r = await dev.push({ changes: [change(rec, 1, { other: true })] });
      assert.equal(r.body.rejected, 1);
      assert.match(r.body.rejections[0].reason, /already pushed by this instance with different content/);
      // A version this device skipped, below the one it pushed last: stale, not a conflict with itself.
      await dev.push({ changes: [change(rec, 4)] });
      const stale = await dev.push({ changes: [change(rec, 3)] });
      assert.equal(stale.body.rejected, 1);
      assert.match(stale.body.rejections[0].reason, /stale version: the server has version 4/);
      assert.deepEqual(stale.body.conflicts, []);
      assert.equal(stale.body.server_version, 3);
    });

    test('answers 200 listing the conflicts even when every change conflicts', async () => {
      const { u, b, dev } = await setup();
      const other = device(s.url, u.token, b.id);
      const rec = randomUUID();
      await dev.push({ changes: [change(rec, 1, { by: 'a' })] });
      const r = await other.push({ branch: 'feature-x', changes: [change(rec, 1, { by: 'b' })] });
      assert.equal(r.status, 200);
      assert.equal(r.body.accepted, 0);
      assert.equal(r.body.rejected, 0);
      assert.equal(r.body.server_version, 1);
      assert.equal(r.body.conflicts.length, 1);
      const c = r.body.conflicts[0];
      assert.equal(c.branch_name, 'feature-x');
      assert.equal(c.resolution, 'pending');
      assert.deepEqual(JSON.parse(c.local_data), { by: 'b' });
      assert.deepEqual(JSON.parse(c.remote_data), { by: 'a' });
      assert.equal(c.instance_id, other.instanceId);
      // Retrying the conflicting push returns the same conflict, it does not store another.
      const again = await other.push({ branch: 'feature-x', changes: [change(rec, 1, { by: 'b' })] });
      assert.equal(again.body.conflicts[0].id, c.id);
      const list = await call(s.url, 'GET', '/api/sync/conflicts', { token: u.token, headers: { 'x-business-id': b.id } });
      assert.equal(list.body.length, 1);
    });

    test('a business-scoped token pushes without X-Business-ID', async () => {
      const { u, b } = await setup();
      const token = await businessToken(s, u, b.id);
      const r = await call(s.url, 'POST', '/api/sync/push', { token, json: { business_id: b.id, instance_id: 'dev-1', branch: 'main', changes: [change(randomUUID(), 1)], tombstones: [] } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.accepted, 1);
    });

    test('a malformed request gets 400 and stores nothing', async () => {
      const { u, b, dev } = await setup();
      const h = { 'x-business-id': b.id };
      const base = { business_id: b.id, instance_id: 'dev-1', branch: 'main', changes: [change(randomUUID(), 1)], tombstones: [] };
      const bad: [unknown, RegExp][] = [
        [{ ...base, instance_id: undefined }, /instance_id/],
        [{ ...base, instance_id: 'has space' }, /instance_id/],
        [{ ...base, business_id: 'nope' }, /business_id/],
        [{ ...base, changes: {} }, /changes/],
        [{ ...base, changes: Array.from({ length: PUSH_LIMITS.maxItems + 1 }, () => 1) }, /changes/],
        [{ ...base, surprise: 1 }, /surprise/],
        [{ ...base, business_id: UNKNOWN }, /disagrees/],
        // NUL cannot be stored in PostgreSQL text (it was a 500 once a conflict recorded the branch); a bidirectional
        // override or a line break would change how a conflict's branch reads.
        [{ ...base, branch: 'a\u0000b' }, /branch/],
        [{ ...base, branch: 'main\u202egnp' }, /branch/],
        [{ ...base, branch: 'line\nbreak' }, /branch/],
        [{ ...base, branch: 'zero\u200bwidth' }, /branch/],
      ];
      for (const [json, details] of bad) {
        const r = await call(s.url, 'POST', '/api/sync/push', { token: u.token, headers: h, json });
        assert.equal(r.status, 400, JSON.stringify(json).slice(0, 80));
        assert.equal(r.body.error, 'invalid_request');
        assert.match(r.body.details, details);
      }
      const noHeader = await call(s.url, 'POST', '/api/sync/push', { token: u.token, json: base });
      assert.equal(noHeader.status, 400);
      assert.equal((await dev.pullAll(0)).changes.length, 0);
    });

    test('401 without a valid token, 403 for a non-member, 404 for an unknown business; 413 and 415 for bodies', async () => {
      const { b, dev } = await setup();
      const outsider = await newUser(s);
      const json = { business_id: b.id, instance_id: 'dev-1', branch: 'main', changes: [change(randomUUID(), 1)], tombstones: [] };
      let r = await call(s.url, 'POST', '/api/sync/push', { headers: { 'x-business-id': b.id }, json });
      assert.equal(r.status, 401);
      r = await call(s.url, 'POST', '/api/sync/push', { token: 'sync_notatoken123', headers: { 'x-business-id': b.id }, json });
      assert.equal(r.status, 401);
      r = await call(s.url, 'POST', '/api/sync/push', { token: outsider.token, headers: { 'x-business-id': b.id }, json });
      assert.equal(r.status, 403);
      assert.equal(r.body.error, 'forbidden');
      r = await call(s.url, 'POST', '/api/sync/push', { token: outsider.token, headers: { 'x-business-id': UNKNOWN }, json: { ...json, business_id: UNKNOWN } });
      assert.equal(r.status, 404);
      r = await call(s.url, 'POST', '/api/sync/push', { token: dev.token, headers: { 'x-business-id': b.id }, json: { ...json, changes: [change(randomUUID(), 1, { pad: 'x'.repeat(300 * 1024) })] } });
      assert.equal(r.status, 413);
      r = await call(s.url, 'POST', '/api/sync/push', { token: dev.token, headers: { 'x-business-id': b.id, 'content-type': 'text/plain' }, body: 'hello' });
      assert.equal(r.status, 415);
      assert.equal((await dev.pullAll(0)).changes.length, 0);
    });

    test('cross-business: a member of A cannot push into B, by header, body or business token', async () => {
      const { u, b: a, dev } = await setup();
      const other = await newUser(s);
      const bizB = await newBusiness(s, other);
      const json = { business_id: bizB.id, instance_id: 'dev-1', branch: 'main', changes: [change(randomUUID(), 1)], tombstones: [] };
      let r = await call(s.url, 'POST', '/api/sync/push', { token: u.token, headers: { 'x-business-id': bizB.id }, json });
      assert.equal(r.status, 403);
      r = await call(s.url, 'POST', '/api/sync/push', { token: u.token, headers: { 'x-business-id': a.id }, json });
      assert.equal(r.status, 400, 'body business_id of B with header A');
      const tokenA = await businessToken(s, u, a.id);
      r = await call(s.url, 'POST', '/api/sync/push', { token: tokenA, headers: { 'x-business-id': bizB.id }, json });
      assert.equal(r.status, 400, 'business token of A with header B');
      r = await call(s.url, 'POST', '/api/sync/push', { token: tokenA, json });
      assert.equal(r.status, 400, 'business token of A with body B');
      const bView = device(s.url, other.token, bizB.id);
      assert.equal((await bView.pullAll(0)).changes.length, 0);
      assert.equal((await dev.pullAll(0)).changes.length, 0);
    });
  });
}
