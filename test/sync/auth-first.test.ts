import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { call, type Reply } from '../helpers/http.js';
import { startSync, type SyncUnderTest } from '../helpers/sync.js';

/**
 * Requests an attacker without a token can send to protected routes, each
 * also invalid in some other way (body, params, size, media type). The token
 * is checked first, so every one is a 401, and every one counts against the
 * per-IP limit of unauthenticated requests.
 */
const BAD_TOKEN = { authorization: 'Bearer syu_not-a-real-token' };
const PROBES: [string, (url: string, headers: Record<string, string>) => Promise<Reply>][] = [
  ['push with a malformed body', (url, h) => call(url, 'POST', '/api/sync/push', { headers: h, json: { nonsense: true } })],
  ['pull with a malformed body', (url, h) => call(url, 'POST', '/api/sync/pull', { headers: h, json: { since_version: 'x' } })],
  ['create business with a malformed body', (url, h) => call(url, 'POST', '/api/business', { headers: h, json: {} })],
  ['resolve with a malformed id', (url, h) => call(url, 'POST', '/api/sync/conflicts/abc/resolve', { headers: h, json: { resolution: 'nope' } })],
  ['download with a malformed uuid', (url, h) => call(url, 'GET', '/api/sync/attachment/nope', { headers: h })],
  ['business with a malformed id', (url, h) => call(url, 'GET', '/api/business/nope', { headers: h })],
  ['conflicts with a malformed query', (url, h) => call(url, 'GET', '/api/sync/conflicts?status=bogus', { headers: h })],
  ['push of a non-JSON body', (url, h) => call(url, 'POST', '/api/sync/push', { headers: { ...h, 'content-type': 'text/plain' }, body: 'hello' })],
  ['push over the body limit', (url, h) => call(url, 'POST', '/api/sync/push', { headers: { ...h, 'content-type': 'application/json' }, body: `{"x":"${'a'.repeat(300 * 1024)}"}` })],
  ['upload with a malformed form', (url, h) => call(url, 'POST', '/api/sync/attachment', { headers: { ...h, 'content-type': 'multipart/form-data' }, body: 'garbage' })],
  ['business token for a malformed id', (url, h) => call(url, 'POST', '/api/auth/token', { headers: h, json: { business_id: 'x' } })],
  ['member removal with malformed ids', (url, h) => call(url, 'DELETE', `/api/business/x/members/${randomUUID()}`, { headers: h })],
];

for (const backend of BACKENDS) {
  describe(`sync authentication before validation on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend, { bodyLimit: 256 * 1024 }); });
    after(() => s.close());

    for (const [what, probe] of PROBES) {
      test(`${what}: 401 without a token and with a bad one`, async () => {
        for (const headers of [{}, BAD_TOKEN]) {
          const r = await probe(s.url, headers);
          assert.equal(r.status, 401, `${JSON.stringify(headers)}: ${r.text}`);
          assert.equal(r.body.error, 'unauthorized');
        }
      });
    }

    test('every one of them counts against the per-IP limit of unauthenticated requests', async (t) => {
      const own = await startSync(backend, { ipRateLimit: PROBES.length });
      t.after(() => own.close());
      for (const [what, probe] of PROBES) assert.equal((await probe(own.url, {})).status, 401, what);
      for (const [what, probe] of PROBES) {
        const r = await probe(own.url, {});
        assert.equal(r.status, 429, what);
        assert.ok(Number(r.headers.get('retry-after')) > 0);
      }
    });

    test('requests for routes that do not exist count against the per-IP limit too (path scanning)', async (t) => {
      const own = await startSync(backend, { ipRateLimit: 3 });
      t.after(() => own.close());
      for (let i = 0; i < 3; i++) assert.equal((await call(own.url, 'GET', `/api/admin-${i}`)).status, 404);
      const r = await call(own.url, 'GET', '/api/admin-x');
      assert.equal(r.status, 429);
      assert.equal((await call(own.url, 'GET', '/healthz')).status, 200, 'probes are never limited');
    });

    test('so do requests the router refuses before any route (a malformed escape, a segment too long to be an id)', async (t) => {
      const own = await startSync(backend, { ipRateLimit: 3 });
      t.after(() => own.close());
      for (const path of ['/api/business/%ZZ', `/api/business/${'x'.repeat(1600)}`, '/api/business/%ZZ']) {
        const r = await call(own.url, 'GET', path);
        assert.ok(r.status === 400 || r.status === 404, `${path.slice(0, 20)}: ${r.status}`);
        assert.match(r.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/, 'a request id like every response');
      }
      const r = await call(own.url, 'GET', '/api/business/%ZZ');
      assert.equal(r.status, 429);
      assert.ok(Number(r.headers.get('retry-after')) > 0);
      assert.equal((await call(own.url, 'GET', '/api/admin')).status, 429, 'the same budget as unknown routes');
    });
  });
}
