import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Value } from 'typebox/value';
import { PullResultSchema } from '../../src/sync/changes/change-schemas.js';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { businessToken, newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { change, device, type PulledChange } from './push-client.js';

for (const backend of BACKENDS) {
  describe(`sync pull on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { pullPageSize: 3, pullPageMax: 4 }); });
    after(() => s.close());

    async function setup() {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      return { u, b, dev: device(s.url, u.token, b.id) };
    }

    test('an empty business pulls nothing at version 0', async () => {
      const { dev } = await setup();
      const r = await dev.pull(0);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, { changes: [], version: 0, has_more: false });
    });

    test('pages in version order; version is the last change of a page while has_more, then the server version', async () => {
      const { dev } = await setup();
      await dev.push({ changes: Array.from({ length: 5 }, () => change(randomUUID(), 1)) });
      let r = await dev.pull(0, 2);
      assert.deepEqual(r.body.changes.map((c: PulledChange) => c.version), [1, 2]);
      assert.equal(r.body.has_more, true);
      assert.equal(r.body.version, 2);
      r = await dev.pull(2, 2);
      assert.deepEqual([r.body.changes.map((c: PulledChange) => c.version), r.body.has_more, r.body.version], [[3, 4], true, 4]);
      r = await dev.pull(4, 2);
      assert.deepEqual([r.body.changes.map((c: PulledChange) => c.version), r.body.has_more, r.body.version], [[5], false, 5]);
      r = await dev.pull(3, 2);
      assert.deepEqual([r.body.changes.map((c: PulledChange) => c.version), r.body.has_more, r.body.version], [[4, 5], false, 5], 'a page that ends exactly at the server version has no more');
      r = await dev.pull(5);
      assert.deepEqual(r.body, { changes: [], version: 5, has_more: false });
    });

    test('the page size defaults to --pull-page-size and a larger limit is reduced to --pull-page-max', async () => {
      const { dev } = await setup();
      await dev.push({ changes: Array.from({ length: 6 }, () => change(randomUUID(), 1)) });
      let r = await dev.pull(0);
      assert.equal(r.body.changes.length, 3);
      r = await dev.pull(0, 100);
      assert.equal(r.body.changes.length, 4);
      assert.equal(r.body.version, 4);
      // However large: past 2^53 too (1e300 is an integer to JSON).
      r = await call(s.url, 'POST', '/api/sync/pull', { token: dev.token, headers: { 'x-business-id': dev.businessId, 'content-type': 'application/json' }, body: '{"since_version":0,"limit":1e300}' });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.changes.length, 4);
    });

    test('a page ends once its changes\' data reach --pull-page-bytes, at least one change: has_more and version say where it stopped', async () => {
      const small = await startSync(backend, { pullPageBytes: 250 });
      try {
        const u = await newUser(small);
        const b = await newBusiness(small, u);
        const dev = device(small.url, u.token, b.id);
        // Each change's data is about 110 characters of JSON.
        await dev.push({ changes: Array.from({ length: 5 }, () => change(randomUUID(), 1, { text: 'y'.repeat(100) })) });
        let r = await dev.pull(0, 100);
        assert.deepEqual([r.body.changes.map((c: PulledChange) => c.version), r.body.has_more, r.body.version], [[1, 2, 3], true, 3]);
        r = await dev.pull(3, 100);
        assert.deepEqual([r.body.changes.map((c: PulledChange) => c.version), r.body.has_more, r.body.version], [[4, 5], false, 5]);
        // A change larger than the budget comes alone.
        await dev.push({ changes: [change(randomUUID(), 1, { text: 'z'.repeat(1000) }), change(randomUUID(), 1)] });
        r = await dev.pull(5, 100);
        assert.deepEqual([r.body.changes.map((c: PulledChange) => c.version), r.body.has_more, r.body.version], [[6], true, 6]);
      } finally {
        await small.close();
      }
    });

    test('a page is the documented JSON: data as pushed (nested values, text that needs escaping), {} for a delete, every field typed', async () => {
      const { dev } = await setup();
      const rec = randomUUID();
      const data = { name: 'Zoë "the" \\ <tab>\t', nested: { list: [1, 2.5, null, true], empty: {} }, n: -0.125 };
      await dev.push({ changes: [change(rec, 1, data), change(rec, 2, {}, 'delete')] });
      const r = await call(s.url, 'POST', '/api/sync/pull', { token: dev.token, headers: { 'x-business-id': dev.businessId }, json: { since_version: 0 } });
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      assert.ok(Value.Check(PullResultSchema, r.body), JSON.stringify([...Value.Errors(PullResultSchema, r.body)]));
      assert.deepEqual(r.body.changes.map((c: PulledChange) => [c.operation, c.data, c.record_version, c.table_name, c.record_uuid]), [['create', data, 1, 'customers', rec], ['delete', {}, 2, 'customers', rec]]);
      assert.ok(!Number.isNaN(Date.parse(r.body.changes[0]!.created_at)));
    });

    test('a since_version above the server version returns no changes and the server version', async () => {
      const { dev } = await setup();
      await dev.push({ changes: [change(randomUUID(), 1)] });
      const r = await dev.pull(99);
      assert.deepEqual(r.body, { changes: [], version: 1, has_more: false });
    });

    test('every change is pulled exactly once and in order while several devices push concurrently', async () => {
      const { u, b } = await setup();
      const devices = Array.from({ length: 4 }, () => device(s.url, u.token, b.id));
      const reader = device(s.url, u.token, b.id);
      const PUSHES = 12;
      const PER_PUSH = 3;
      let done = false;
      const pushing = Promise.all(devices.map(async (d) => {
        for (let i = 0; i < PUSHES; i++) {
          const r = await d.push({ changes: Array.from({ length: PER_PUSH }, (_, k) => change(randomUUID(), 1, { i, k })) });
          assert.equal(r.body.accepted, PER_PUSH);
        }
      })).finally(() => { done = true; });
      const total = devices.length * PUSHES * PER_PUSH;
      const seen: PulledChange[] = [];
      let version = 0;
      let pulls = 0;
      while (!done || version < total) {
        const r = await reader.pull(version, 4);
        assert.equal(r.status, 200);
        const page = r.body.changes as PulledChange[];
        for (const c of page) assert.ok(c.version > version, `version ${c.version} after cursor ${version}`);
        seen.push(...page);
        assert.ok(r.body.version >= version, 'the cursor never moves back');
        version = r.body.version;
        pulls++;
      }
      await pushing;
      assert.ok(pulls > 1);
      assert.deepEqual(seen.map((c) => c.version), Array.from({ length: total }, (_, i) => i + 1), 'versions 1..N, each once, in order, no gaps');
      assert.equal(new Set(seen.map((c) => c.record_uuid)).size, total);
      const status = await call(s.url, 'GET', '/api/sync/status', { token: u.token, headers: { 'x-business-id': b.id } });
      assert.equal(status.body.server_version, total);
    });

    test('bad cursors get 400', async () => {
      const { u, b } = await setup();
      for (const json of [{}, { since_version: -1 }, { since_version: '3' }, { since_version: 1.5 }, { since_version: 0, limit: 0 }, { since_version: 0, other: 1 }]) {
        const r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id }, json });
        assert.equal(r.status, 400, JSON.stringify(json));
        assert.equal(r.body.error, 'invalid_request');
      }
    });

    test('cross-business: nobody pulls another business\'s changes', async () => {
      const { u, b, dev } = await setup();
      await dev.push({ changes: [change(randomUUID(), 1, { secret: 'A' })] });
      const outsider = await newUser(s);
      const own = await newBusiness(s, outsider);
      let r = await call(s.url, 'POST', '/api/sync/pull', { token: outsider.token, headers: { 'x-business-id': b.id }, json: { since_version: 0 } });
      assert.equal(r.status, 403);
      const tokenOwn = await businessToken(s, outsider, own.id);
      r = await call(s.url, 'POST', '/api/sync/pull', { token: tokenOwn, headers: { 'x-business-id': b.id }, json: { since_version: 0 } });
      assert.equal(r.status, 400);
      r = await call(s.url, 'POST', '/api/sync/pull', { token: tokenOwn, json: { since_version: 0, business_id: b.id } });
      assert.equal(r.status, 400);
      r = await call(s.url, 'POST', '/api/sync/pull', { token: tokenOwn, json: { since_version: 0 } });
      assert.deepEqual(r.body, { changes: [], version: 0, has_more: false }, 'the business token pulls its own, empty, business');
      r = await call(s.url, 'POST', '/api/sync/pull', { headers: { 'x-business-id': b.id }, json: { since_version: 0 } });
      assert.equal(r.status, 401);
      r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': randomUUID() }, json: { since_version: 0 } });
      assert.deepEqual([r.status, r.body.details], [404, 'no such business']);
      // A body past the limit (1 MiB) and a body that is not JSON.
      r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id, 'content-type': 'application/json' }, body: `{"since_version":0,"pad":"${'x'.repeat(1_100_000)}"}` });
      assert.deepEqual([r.status, r.body.error], [413, 'payload_too_large']);
      r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id, 'content-type': 'text/plain' }, body: 'since_version=0' });
      assert.deepEqual([r.status, r.body.error], [415, 'unsupported_media_type']);
      // A Content-Encoding is refused whatever the bytes: compressed JSON would be read as text.
      for (const encoding of ['gzip', 'GZIP ', 'br']) {
        r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id, 'content-type': 'application/json', 'content-encoding': encoding }, body: '{"since_version":0}' });
        assert.deepEqual([r.status, r.body.error], [415, 'unsupported_media_type'], encoding);
      }
      r = await call(s.url, 'POST', '/api/sync/pull', { token: u.token, headers: { 'x-business-id': b.id, 'content-type': 'application/json', 'content-encoding': 'identity' }, body: '{"since_version":0}' });
      assert.equal(r.status, 200, 'identity is no encoding');
    });
  });
}
