import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import fc from 'fast-check';
import { fromSchema, toJsonText } from './fuzz/arbitraries.js';
import { fuzzBody, fuzzQuery, operations, type FuzzTarget, type Operation } from './fuzz/operations.js';

// The backends run side by side: the work waits on fsync and the network more than on the CPU.
describe('metrics fuzzing', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`metrics fuzzing on ${backend}`, { concurrency: 1 }, () => {
      let h: MetricsHarness;
      let target: FuzzTarget;
      let ops: Operation[];
      before(async () => {
        h = await startMetrics(backend);
        const fuzzer = await h.newTenant();
        const other = await h.newTenant();
        assert.equal((await ingest(h.url, fuzzer.token, makeReport({ agentId: 'known-host', ts: Date.now() - 5_000 }))).status, 200);
        assert.equal((await ingest(h.url, other.token, makeReport({ agentId: 'other-host', ts: Date.now() - 5_000 }))).status, 200);
        // A fixed range: with the default `to` (now) the buckets would move between two reads.
        const to = Date.now() + 86_400_000;
        const read = async (token: string) => {
          const hosts = await call(h.url, 'GET', '/api/v1/hosts', { token });
          const agg = await call(h.url, 'GET', `/api/v1/aggregate?from=0&to=${to}`, { token });
          return { hosts: hosts.body, points: agg.body.timestamps, hostCount: agg.body.hosts };
        };
        target = {
          url: h.url,
          headers: { authorization: `Bearer ${fuzzer.token}` },
          param: (_op, name) => { assert.equal(name, 'id'); return 'known-host'; },
          fixBody: (op, body) => op.path === '/api/v1/ingest' && body && typeof body === 'object' && !Array.isArray(body)
            ? { ...body, ts: Date.now() - Math.floor(Math.random() * 3_600_000) } : body,
          fingerprint: async () => ({ fuzzer: await read(fuzzer.token), other: await read(other.token) }),
        };
        ops = operations(h.app);
      });
      after(() => h.close());

      test('the OpenAPI document lists the operations the fuzzer covers', () => {
        const listed = ops.map((o) => `${o.method} ${o.path}`);
        for (const expected of ['POST /api/v1/ingest', 'GET /api/v1/host/{id}', 'GET /api/v1/aggregate']) assert.ok(listed.includes(expected), expected);
      });

      test('the generator\'s unmutated reports are valid (so the hostile ones start from the real shape)', async () => {
        const op = ops.find((o) => o.path === '/api/v1/ingest')!;
        for (const body of fc.sample(fromSchema(op.body!).map((v) => target.fixBody!(op, v)), { numRuns: 5, seed: 7 })) {
          const r = await call(h.url, 'POST', '/api/v1/ingest', { token: target.headers['authorization']!.slice(7), body: toJsonText(body), headers: { 'content-type': 'application/json' } });
          assert.ok(r.status === 200 || r.status === 422, `${r.status} ${r.text}`);
        }
      });

      test('every JSON body: never a 5xx, a 4xx stores nothing', async () => {
        for (const op of ops.filter((o) => o.body)) await fuzzBody(target, op);
      });

      test('every query string: never a 5xx, a 4xx stores nothing', async () => {
        for (const op of ops.filter((o) => o.method === 'GET' && o.path.startsWith('/api/'))) await fuzzQuery(target, op);
      });

      test('the service still answers after the fuzzing', async () => {
        assert.equal((await call(h.url, 'GET', '/healthz')).status, 200);
      });
    });
  }
});
