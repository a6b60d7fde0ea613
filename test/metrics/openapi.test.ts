import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { call } from '../helpers/http.js';
import { startMetrics, type MetricsHarness } from '../helpers/metrics.js';

let m: MetricsHarness;
before(async () => { m = await startMetrics('sqlite'); });
after(() => m.close());

test('the OpenAPI document is public and lists every status code of every data endpoint', async () => {
  const r = await call(m.url, 'GET', '/api/v1/openapi.json');
  assert.equal(r.status, 200);
  assert.equal(r.body.openapi.slice(0, 2), '3.');
  const codes = (p: string, method = 'get') => Object.keys(r.body.paths[p][method].responses).sort();
  assert.deepEqual(codes('/api/v1/ingest', 'post'), ['200', '202', '400', '401', '413', '415', '422', '500', '503']);
  assert.deepEqual(codes('/api/v1/hosts'), ['200', '401', '500']);
  assert.deepEqual(codes('/api/v1/host/{id}'), ['200', '400', '401', '404', '500', '503']);
  assert.deepEqual(codes('/api/v1/aggregate'), ['200', '400', '401', '422', '500', '503']);
  for (const p of ['/api/v1/ingest', '/api/v1/hosts', '/api/v1/host/{id}', '/api/v1/aggregate']) {
    const op = r.body.paths[p].get ?? r.body.paths[p].post;
    assert.deepEqual(op.security, [{ bearer: [] }], p);
  }
  const report = r.body.paths['/api/v1/ingest'].post.requestBody.content['application/json'].schema;
  assert.deepEqual(report.required, ['agentId', 'hostname', 'platform', 'ts', 'cpu', 'memory']);
  assert.equal(r.body.paths['/api/v1/openapi.json'], undefined);
});
