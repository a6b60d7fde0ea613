import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { BACKENDS, freshStorage } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, ingestBulk as bulk, makeReport, ndjson, startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { signBody } from '../../src/metrics/domain/verify-signature.js';
import { gunzipLimited } from '../../src/metrics/http/decode-body.js';

const NOW = Date.UTC(2026, 10, 21, 12);
const SECRET = 'bulk-test-secret';

async function receiver(status: number): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(status).end()); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, server };
}

test('gunzipLimited stops at the limit: a 256 MiB bomb is refused after at most the limit of output', async () => {
  const bomb = gzipSync(Buffer.alloc(256 * 1024 * 1024));
  const before = process.memoryUsage().arrayBuffers;
  await assert.rejects(gunzipLimited(bomb, 1024 * 1024), (e: { code?: string }) => e.code === 'payload_too_large');
  assert.ok(process.memoryUsage().arrayBuffers - before < 64 * 1024 * 1024, 'the bomb was not inflated whole');
  assert.equal((await gunzipLimited(gzipSync('hello'), 5)).toString(), 'hello');
});

// Both ways a body is read: by a parse thread (the default from three cores) and on the event loop (two cores or fewer).
for (const backend of BACKENDS) for (const threads of [1, 0]) {
  describe(`POST /api/v1/ingest/bulk on ${backend}, lines read ${threads ? 'by a parse thread' : 'on the event loop'}`, () => {
    let m: MetricsHarness;
    let signed: MetricsHarness;
    let failing: Awaited<ReturnType<typeof receiver>>;
    const cleanups: Array<() => Promise<void>> = [];
    before(async () => {
      failing = await receiver(500);
      const s = await freshStorage('sqlite');
      cleanups.push(() => s.cleanup());
      const routesFile = path.join(s.dataDir, 'routes.json');
      writeFileSync(routesFile, JSON.stringify({ routes: [{ name: 'pager', match: { severity: ['critical'] }, url: failing.url }] }));
      m = await startMetrics(backend, { now: () => NOW, bodyLimit: 8 * 1024, bulkBodyLimit: 256 * 1024, maxMetricsPerHost: 40, alertRoutes: routesFile, bulkParseThreads: threads });
      signed = await startMetrics(backend, { now: () => NOW, secret: SECRET, bulkParseThreads: threads });
    });
    after(async () => {
      await m.close();
      await signed.close();
      failing.server.close();
      for (const c of cleanups) await c();
    });

    test('stores every valid line with one answer per line; a bad line never fails the others', async () => {
      const t = await m.newTenant();
      const tooMany = makeReport({ agentId: 'a-limit', ts: NOW, network: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`x${i}`, i])) });
      const body = [
        JSON.stringify(makeReport({ agentId: 'a', ts: NOW - 2000 })),
        '',
        '{"agentId": ',
        JSON.stringify(makeReport({ agentId: 'a', ts: NOW - 1000, cpu: { usage: '12' as never } })),
        JSON.stringify(makeReport({ agentId: 'a', ts: NOW + 3_600_000 })),
        JSON.stringify(makeReport({ agentId: 'a', ts: NOW - 2000 })),
        JSON.stringify(tooMany),
        'x'.repeat(9000),
        JSON.stringify(makeReport({ agentId: 'b', ts: NOW })),
      ].join('\r\n');
      const r = await bulk(m.url, t.token, body);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.stored, 2);
      assert.equal(r.body.duplicates, 1);
      assert.equal(r.body.rejected, 5);
      const byLine = Object.fromEntries(r.body.results.map((x: { line: number }) => [x.line, x]));
      assert.deepEqual(r.body.results.map((x: { line: number }) => x.line), [1, 3, 4, 5, 6, 7, 8, 9], 'blank lines have no entry; numbers are 1-based');
      assert.deepEqual(byLine[1], { line: 1, status: 'stored', hostId: 'a', ts: NOW - 2000, alertResults: [] });
      assert.equal(byLine[3].status, 'rejected');
      assert.equal(byLine[3].error, 'invalid_request');
      assert.deepEqual([byLine[4].error, byLine[4].details], ['invalid_request', 'body cpu.usage: must be number']);
      assert.match(byLine[5].details, /more than 600000 ms ahead/);
      assert.equal(byLine[6].status, 'duplicate', 'the same host and ts as line 1: stored once');
      assert.deepEqual([byLine[7].error, byLine[7].hostId], ['limit_exceeded', 'a-limit']);
      assert.equal(byLine[8].error, 'payload_too_large', 'a line over the single-ingest body limit');
      assert.equal(byLine[9].status, 'stored');
      // The same errors single ingest gives for the same reports.
      const single = await ingest(m.url, t.token, makeReport({ agentId: 'a', ts: NOW - 1000, cpu: { usage: '12' as never } }));
      assert.equal(single.body.details, byLine[4].details);
      const series = await call(m.url, 'GET', `/api/v1/host/a?from=${NOW - 5000}&to=${NOW}`, { token: t.token });
      assert.deepEqual(series.body.timestamps, [NOW - 2000]);
    });

    test('a line whose ts is 1e400 (Infinity) is refused as a schema violation, without a ts in its result; single ingest says the same', async () => {
      const t = await m.newTenant();
      const line = JSON.stringify(makeReport({ agentId: 'inf', ts: NOW })).replace(`"ts":${NOW}`, '"ts":1e400');
      const r = await bulk(m.url, t.token, line + '\n');
      assert.equal(r.status, 200, r.text);
      const [res] = r.body.results;
      assert.equal(res.status, 'rejected');
      assert.ok(!('ts' in res), JSON.stringify(res));
      assert.match(res.details, /ts: must be <= 9007199254740991/);
      const single = await fetch(`${m.url}/api/v1/ingest`, { method: 'POST', headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json' }, body: line });
      assert.equal(single.status, 400);
      assert.match((await single.json() as { details: string }).details, /ts: must be <= 9007199254740991/);
    });

    test('lines a parse thread leaves to Fastify\'s parser (__proto__, constructor, \\u escapes, a BOM) get the answer single ingest gives', async () => {
      const t = await m.newTenant();
      const base = JSON.stringify(makeReport({ agentId: 'p', ts: NOW - 5000 }));
      const lines = [
        base.replace('"network":{', '"network":{"__proto__":{"x":1},'),
        base.replace('"network":{', '"network":{"\\u005f_proto__":{"x":1},'),
        base.replace('"network":{', '"network":{"constructor":{"prototype":{"x":1}},'),
        base.replace('"network":{', '"network":{"constructor":{"x":1},'),
        JSON.stringify(makeReport({ agentId: 'p', ts: NOW - 4000 })).replace(/"hostname":"[^"]*"/, '"hostname":"caf\\u00e9"'),
        '\uFEFF' + JSON.stringify(makeReport({ agentId: 'p', ts: NOW - 3000 })),
        JSON.stringify(makeReport({ agentId: 'p', ts: NOW - 2000 })),
      ];
      assert.ok(lines.slice(0, 4).every((l) => l !== base), 'each variant changed the report');
      const r = await bulk(m.url, t.token, lines.join('\n'));
      assert.equal(r.status, 200, r.text);
      const other = await m.newTenant();
      for (const [i, line] of lines.entries()) {
        const single = await call(m.url, 'POST', '/api/v1/ingest', { token: other.token, body: line, headers: { 'content-type': 'application/json' } });
        const got = r.body.results[i];
        if (single.status === 200) assert.deepEqual([got.status, got.hostId, got.ts], ['stored', 'p', single.body.ts], `line ${i + 1}: ${line.slice(0, 60)}`);
        else assert.deepEqual([got.status, got.error, got.details], ['rejected', single.body.error, single.body.details], `line ${i + 1}: ${line.slice(0, 60)}`);
      }
      assert.deepEqual(r.body.results.map((x: { status: string }) => x.status), ['rejected', 'rejected', 'rejected', 'stored', 'stored', 'stored', 'stored']);
      const series = await call(m.url, 'GET', `/api/v1/host/p?from=${NOW - 6000}&to=${NOW}`, { token: t.token });
      assert.deepEqual(series.body.timestamps, [NOW - 5000, NOW - 4000, NOW - 3000, NOW - 2000], 'the four stored lines, nothing of the refused ones');
    });

    test('lines read without Fastify\'s parser skip no text check: raw invalid UTF-8, raw control bytes and \\u escapes of NUL or a lone surrogate get the single-ingest answer', async () => {
      const t = await m.newTenant();
      const report = (ts: number) => JSON.stringify(makeReport({ agentId: 'u', ts }));
      // The bytes go in raw, where "@@" is: no JSON escape spells them.
      const withBytes = (line: string, bytes: number[]) => { const [a, b] = line.split('@@'); return Buffer.concat([Buffer.from(a!), Buffer.from(bytes), Buffer.from(b!)]); };
      const inHostname = (ts: number, text: string) => report(ts).replace(/"hostname":"[^"]*"/, `"hostname":"h${text}"`);
      const inKey = (ts: number, text: string) => report(ts).replace('"network":{', `"network":{"k${text}":1,`);
      const lines = [
        withBytes(inHostname(NOW - 6000, '@@'), [0xed, 0xa0, 0x80]), // an encoded surrogate: not UTF-8
        withBytes(inKey(NOW - 5000, '@@'), [0xc0]), // a lone lead byte: not UTF-8
        withBytes(inHostname(NOW - 4000, '@@'), [0x00]), // a raw NUL in a string: not JSON
        Buffer.from(inHostname(NOW - 3000, '\\u0000')),
        Buffer.from(inKey(NOW - 2000, '\\ud800')),
        Buffer.from(report(NOW - 1000)),
      ];
      const r = await bulk(m.url, t.token, Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')])));
      assert.equal(r.status, 200, r.text);
      const other = await m.newTenant();
      for (const [i, line] of lines.entries()) {
        const single = await call(m.url, 'POST', '/api/v1/ingest', { token: other.token, body: line, headers: { 'content-type': 'application/json' } });
        const got = r.body.results[i];
        if (single.status === 200) assert.deepEqual([got.status, got.hostId, got.ts], ['stored', 'u', single.body.ts], `line ${i + 1}`);
        else assert.deepEqual([got.status, got.error, got.details], ['rejected', single.body.error, single.body.details], `line ${i + 1}`);
      }
      assert.deepEqual(r.body.results.map((x: { status: string }) => x.status), ['rejected', 'rejected', 'rejected', 'rejected', 'rejected', 'stored']);
      assert.deepEqual(r.body.results.slice(0, 2).map((x: { details: string }) => x.details), ['body: not valid UTF-8', 'body: not valid UTF-8'], 'never read as U+FFFD');
      const hosts = await call(m.url, 'GET', `/api/v1/host/u?from=${NOW - 7000}&to=${NOW}`, { token: t.token });
      assert.deepEqual(hosts.body.timestamps, [NOW - 1000]);
    });

    test('lines nested deeper than single ingest allows get its answer, however deep (an alert 10,000 deep once left the request unanswered)', { timeout: 30_000 }, async () => {
      const t = await signed.newTenant();
      const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
      const report = (ts: number) => JSON.stringify(makeReport({ agentId: 'deep', ts }));
      const lines = [
        report(NOW - 4000).replace('"network":{', `"extra":${nested(70)},"network":{`),
        report(NOW - 3000).replace(/}$/, `,"alerts":[{"name":"x","severity":"info","message":"m","extra":${nested(10_000)}}]}`),
        report(NOW - 2000).replace('"network":{', `"extra":${nested(63)},"network":{`),
        report(NOW - 1000),
      ];
      const body = lines.join('\n');
      const r = await bulk(signed.url, t.token, body, { 'x-collector-signature': signBody(SECRET, body) });
      assert.equal(r.status, 200, r.text);
      const other = await signed.newTenant();
      for (const [i, line] of lines.entries()) {
        const single = await call(signed.url, 'POST', '/api/v1/ingest', { token: other.token, body: line, headers: { 'content-type': 'application/json', 'x-collector-signature': signBody(SECRET, line) } });
        const got = r.body.results[i];
        if (single.status === 200) assert.deepEqual([got.status, got.ts], ['stored', single.body.ts], `line ${i + 1}`);
        else assert.deepEqual([got.status, got.error, got.details], ['rejected', single.body.error, single.body.details], `line ${i + 1}`);
      }
      assert.deepEqual(r.body.results.map((x: { status: string }) => x.status), ['rejected', 'rejected', 'stored', 'stored']);
      assert.match(r.body.results[0].details, /nested deeper than 64 levels/);
    });

    test('gzip bodies are accepted on bulk and single ingest; other encodings get 415', async () => {
      const t = await m.newTenant();
      const body = gzipSync(ndjson([makeReport({ agentId: 'g', ts: NOW - 1000 }), makeReport({ agentId: 'g', ts: NOW })]));
      const r = await bulk(m.url, t.token, body, { 'content-encoding': 'gzip' });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.stored, 2);
      const one = await call(m.url, 'POST', '/api/v1/ingest', { token: t.token, body: gzipSync(JSON.stringify(makeReport({ agentId: 'g1', ts: NOW }))), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      assert.equal(one.status, 200, one.text);
      assert.equal(one.body.hostId, 'g1');
      for (const send of [() => bulk(m.url, t.token, body, { 'content-encoding': 'br' }), () => call(m.url, 'POST', '/api/v1/ingest', { token: t.token, body: 'x', headers: { 'content-type': 'application/json', 'content-encoding': 'deflate' } })]) {
        const bad = await send();
        assert.equal(bad.status, 415);
        assert.equal(bad.body.error, 'unsupported_media_type');
      }
      const corrupt = await bulk(m.url, t.token, Buffer.from('not gzip at all'), { 'content-encoding': 'gzip' });
      assert.equal(corrupt.status, 400);
      const corruptOne = await call(m.url, 'POST', '/api/v1/ingest', { token: t.token, body: Buffer.from('not gzip at all'), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      assert.deepEqual([corruptOne.status, corruptOne.body.error], [400, 'invalid_request'], 'single ingest too');
      assert.match(corruptOne.body.details, /not valid gzip/);
    });

    test('a decompression bomb is refused with 413 on both endpoints, nothing stored', async () => {
      const t = await m.newTenant();
      const line = JSON.stringify(makeReport({ agentId: 'bomb', ts: NOW }));
      const bomb = gzipSync(Buffer.concat([Buffer.from(line + '\n'), Buffer.alloc(64 * 1024 * 1024, 0x20)]));
      assert.ok(bomb.length < 256 * 1024, 'small as sent');
      const r = await bulk(m.url, t.token, bomb, { 'content-encoding': 'gzip' });
      assert.equal(r.status, 413);
      assert.equal(r.body.error, 'payload_too_large');
      const one = await call(m.url, 'POST', '/api/v1/ingest', { token: t.token, body: bomb, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      assert.equal(one.status, 413);
      assert.deepEqual((await call(m.url, 'GET', '/api/v1/hosts', { token: t.token })).body, []);
    });

    test('413 past the bulk body limit as sent and past 10,000 reports; 400 for a body that is not NDJSON; 415 for JSON', async () => {
      const t = await m.newTenant();
      assert.equal((await bulk(m.url, t.token, 'x'.repeat(300 * 1024))).status, 413);
      const many = await bulk(m.url, t.token, '{}\n'.repeat(10_001));
      assert.equal(many.status, 413);
      assert.match(many.body.details, /more than 10000 reports/);
      const notNdjson = await bulk(m.url, t.token, '<html>proxy error</html>\n');
      assert.deepEqual([notNdjson.status, notNdjson.body.error], [400, 'invalid_request']);
      assert.match(notNdjson.body.details, /not NDJSON: no line is JSON/);
      const blank = await bulk(m.url, t.token, '\n\n');
      assert.deepEqual([blank.status, blank.body.error], [400, 'invalid_request']);
      assert.match(blank.body.details, /holds no report/);
      const json = await call(m.url, 'POST', '/api/v1/ingest/bulk', { token: t.token, json: [makeReport()] });
      assert.equal(json.status, 415);
    });

    test('a body of nothing but lines over the single-report limit is still NDJSON: 200, each line payload_too_large', async () => {
      const t = await m.newTenant();
      const big = JSON.stringify({ ...makeReport({ agentId: 'big', ts: NOW }), hostname: 'h'.repeat(9000) });
      const r = await bulk(m.url, t.token, `${big}\n${big}\n`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual([r.body.stored, r.body.rejected], [0, 2]);
      assert.deepEqual(r.body.results.map((l: { line: number; error: string }) => [l.line, l.error]), [[1, 'payload_too_large'], [2, 'payload_too_large']]);
    });

    test('a request with neither a body nor a Content-Type: 415 on both endpoints, its signature checked first with --secret; nothing stored', async () => {
      const t = await m.newTenant();
      for (const path of ['/api/v1/ingest/bulk', '/api/v1/ingest']) {
        const r = await call(m.url, 'POST', path, { token: t.token });
        assert.deepEqual([r.status, r.body.error], [415, 'unsupported_media_type'], `${path}: ${r.text}`);
        const s = await signed.newTenant();
        const forged = await call(signed.url, 'POST', path, { token: s.token, headers: { 'x-collector-signature': `sha256=${'0'.repeat(64)}` } });
        assert.deepEqual([forged.status, forged.body.details], [401, 'x-collector-signature does not match the body'], path);
        const signedEmpty = await call(signed.url, 'POST', path, { token: s.token, headers: { 'x-collector-signature': signBody(SECRET, Buffer.alloc(0)) } });
        assert.equal(signedEmpty.status, 415, path);
      }
      assert.deepEqual((await call(m.url, 'GET', '/api/v1/hosts', { token: t.token })).body, []);
    });

    test('the OpenAPI document describes the bulk route: NDJSON body, per-line results, its errors', async () => {
      const doc = (await call(m.url, 'GET', '/api/v1/openapi.json')).body;
      const op = doc.paths['/api/v1/ingest/bulk'].post;
      assert.ok(op.requestBody.content['application/x-ndjson']);
      assert.ok(op.responses['200'].content['application/json'].schema.properties.results);
      for (const status of ['400', '401', '413', '415']) assert.ok(op.responses[status], status);
    });

    test('401 without a valid token, before the body is read', async () => {
      const r = await bulk(m.url, 'nope', ndjson([makeReport({ ts: NOW })]));
      assert.equal(r.status, 401);
      assert.equal(r.body.details, 'unknown or revoked token');
    });

    test('alerts of stored reports are routed: 202 when a delivery failed; not again for a duplicate', async () => {
      const t = await m.newTenant();
      const alert = { name: 'disk', severity: 'critical', message: 'full', labels: {}, value: 99, threshold: 90 };
      const body = ndjson([makeReport({ agentId: 'al', ts: NOW, alerts: [alert] as never })]);
      const r = await bulk(m.url, t.token, body);
      assert.equal(r.status, 202);
      assert.equal(r.body.results[0].alertResults[0].outcome, 'failed');
      const again = await bulk(m.url, t.token, body);
      assert.equal(again.status, 200);
      assert.equal(again.body.results[0].status, 'duplicate');
    });

    test('with --secret the signature covers the bytes as sent (compressed), checked before inflating', async () => {
      const t = await signed.newTenant();
      const gz = gzipSync(ndjson([makeReport({ agentId: 's', ts: NOW })]));
      const ok = await bulk(signed.url, t.token, gz, { 'content-encoding': 'gzip', 'x-collector-signature': `sha256=${signBody(SECRET, gz)}` });
      assert.equal(ok.status, 200, ok.text);
      const overPlain = await bulk(signed.url, t.token, gz, { 'content-encoding': 'gzip', 'x-collector-signature': signBody(SECRET, ndjson([makeReport({ agentId: 's', ts: NOW })])) });
      assert.equal(overPlain.status, 401);
      const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
      const unsignedBomb = await bulk(signed.url, t.token, bomb, { 'content-encoding': 'gzip' });
      assert.deepEqual([unsignedBomb.status, unsignedBomb.body.details], [401, 'missing x-collector-signature header (this server requires signed reports)']);
      const single = await call(signed.url, 'POST', '/api/v1/ingest', { token: t.token, body: gz.subarray(0, 0), headers: { 'content-type': 'application/json' } });
      assert.equal(single.status, 401);
    });

    test('the bodies were read where this suite says: by the parse thread, or on the event loop', () => {
      if (threads) assert.ok(m.deps.bulkLines.readApart > 0, 'a parse thread read the bodies');
      else assert.equal(m.deps.bulkLines.readApart, 0, 'no thread: every body was read on the event loop');
    });
  });
}
