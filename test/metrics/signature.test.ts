import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { verifySignature } from '../../src/metrics/domain/verify-signature.js';
import { ConfigError } from '../../src/core/config.js';
import { loadMetricsConfig } from '../../src/metrics/config.js';

const SECRET = 'collector-secret-for-tests';
const hmac = (body: string, key = SECRET) => createHmac('sha256', key).update(body).digest('hex');

test('verifySignature accepts hex in either case with an optional sha256= prefix, nothing else', () => {
  const body = Buffer.from('{"a":1}');
  const sig = hmac('{"a":1}');
  assert.equal(verifySignature(SECRET, body, sig), true);
  assert.equal(verifySignature(SECRET, body, `sha256=${sig}`), true);
  assert.equal(verifySignature(SECRET, body, sig.toUpperCase()), true);
  assert.equal(verifySignature(SECRET, body, undefined), false);
  assert.equal(verifySignature(SECRET, body, ''), false);
  assert.equal(verifySignature(SECRET, body, sig.slice(0, 63)), false);
  assert.equal(verifySignature(SECRET, body, `sha1=${sig}`), false);
  assert.equal(verifySignature(SECRET, body, Buffer.from(createHmac('sha256', SECRET).update(body).digest()).toString('base64')), false);
  assert.equal(verifySignature('other', body, sig), false);
});

test('--secret / METRICS_SECRET given but empty, or shorter than 16 characters, stops the start; unset, reports go unsigned', () => {
  const refused = (argv: string[], env: Record<string, string>, why: RegExp) => assert.throws(() => loadMetricsConfig(argv, env), (e: unknown) => e instanceof ConfigError && why.test(e.message));
  refused(['--secret', ''], {}, /secret.*empty/);
  refused([], { METRICS_SECRET: '' }, /secret.*empty/);
  refused(['--secret', 'short-secret'], {}, /--secret \/ METRICS_SECRET: invalid value/);
  assert.equal(loadMetricsConfig(['--secret', SECRET], {}).secret, SECRET);
  assert.equal(loadMetricsConfig([], {}).secret, undefined);
});

for (const backend of BACKENDS) {
  describe(`ingest signatures on ${backend}`, () => {
    let signed: MetricsHarness;
    let open: MetricsHarness;
    let token: string;
    before(async () => {
      signed = await startMetrics(backend, { secret: SECRET });
      open = await startMetrics(backend);
      token = (await signed.newTenant()).token;
    });
    after(async () => {
      await signed.close();
      await open.close();
    });

    test('a report signed over its exact bytes is accepted, with or without the sha256= prefix', async () => {
      const body = JSON.stringify(makeReport({ agentId: 's1' }));
      let r = await ingest(signed.url, token, body, { headers: { 'x-collector-signature': hmac(body) } });
      assert.equal(r.status, 200);
      const body2 = JSON.stringify(makeReport({ agentId: 's2' }), null, 2);
      r = await ingest(signed.url, token, body2, { headers: { 'x-collector-signature': `sha256=${hmac(body2)}` } });
      assert.equal(r.status, 200);
    });

    test('a captured signed body sent again is a duplicate: stored once, its host\'s series unchanged', async () => {
      const t = await signed.newTenant();
      const body = JSON.stringify(makeReport({ agentId: 'replayed', cpu: { usage: 7 } }));
      const headers = { 'x-collector-signature': hmac(body) };
      assert.equal((await ingest(signed.url, t.token, body, { headers })).body.duplicate, false);
      const again = await ingest(signed.url, t.token, body, { headers });
      assert.deepEqual([again.status, again.body.duplicate], [200, true]);
      const series = await call(signed.url, 'GET', '/api/v1/host/replayed?from=0', { token: t.token });
      assert.deepEqual(series.body.metrics['cpu.usage'], [7]);
    });

    test('401 for a missing, forged, wrong-key or other-body signature; nothing stored', async () => {
      const t = await signed.newTenant();
      const body = JSON.stringify(makeReport({ agentId: 'forged' }));
      const cases: Array<[Record<string, string>, RegExp]> = [
        [{}, /missing x-collector-signature/],
        [{ 'x-collector-signature': 'deadbeef' }, /does not match/],
        [{ 'x-collector-signature': hmac(body, 'wrong-key') }, /does not match/],
        [{ 'x-collector-signature': hmac(JSON.stringify(JSON.parse(body), null, 1)) }, /does not match/],
        [{ 'x-collector-signature': hmac(body.replace('"web-1"', '"web-2"')) }, /does not match/],
      ];
      for (const [headers, details] of cases) {
        const r = await ingest(signed.url, t.token, body, { headers });
        assert.equal(r.status, 401);
        assert.deepEqual(Object.keys(r.body), ['error', 'details']);
        assert.equal(r.body.error, 'unauthorized');
        assert.match(r.body.details, details);
      }
      const hosts = await signed.deps.store.listHosts(t.tenantId);
      assert.deepEqual(hosts, []);
    });

    test('the signature is checked before parsing: an unsigned malformed body is a 401, a signed one a 400', async () => {
      const junk = '{"agentId": ';
      let r = await ingest(signed.url, token, junk);
      assert.equal(r.status, 401);
      r = await ingest(signed.url, token, junk, { headers: { 'x-collector-signature': hmac(junk) } });
      assert.equal(r.status, 400);
      assert.equal(r.body.error, 'invalid_request');
    });

    test('an unsigned request is a 401 before its body is looked at: whatever its type or size, single or bulk', async () => {
      const cases: Array<[string, { body: string | Buffer; headers: Record<string, string> }]> = [
        ['/api/v1/ingest', { body: 'hello', headers: { 'content-type': 'text/plain' } }],
        ['/api/v1/ingest', { body: 'x', headers: {} }],
        ['/api/v1/ingest', { body: Buffer.alloc(2_000_000, 0x20), headers: { 'content-type': 'application/json' } }],
        ['/api/v1/ingest/bulk', { body: 'x', headers: { 'content-type': 'text/plain' } }],
      ];
      for (const [path, { body, headers }] of cases) {
        const r = await call(signed.url, 'POST', path, { token, body, headers });
        assert.equal(r.status, 401, `${path} ${headers['content-type'] ?? 'no type'} ${body.length} bytes`);
        assert.match(r.body.details, /missing x-collector-signature/);
      }
      // Signed, the same bodies get their own answers.
      const plain = await call(signed.url, 'POST', '/api/v1/ingest', { token, body: 'hello', headers: { 'content-type': 'text/plain', 'x-collector-signature': hmac('hello') } });
      assert.equal(plain.status, 415);
    });

    test('without --secret the header is not required', async () => {
      const t = await open.newTenant();
      const r = await ingest(open.url, t.token, makeReport());
      assert.equal(r.status, 200);
    });
  });
}
