import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call } from '../helpers/http.js';
import { startMetrics } from '../helpers/metrics.js';
import { startSync } from '../helpers/sync.js';

interface Operation { security?: Array<Record<string, unknown>>; responses: Record<string, { content?: Record<string, { schema: { properties?: Record<string, unknown> } }> }> }

test('both services publish OpenAPI documents with one bearer scheme and one error body', async (t) => {
  const m = await startMetrics('sqlite');
  t.after(() => m.close());
  const s = await startSync('sqlite');
  t.after(() => s.close());
  const docs = {
    metrics: (await call(m.url, 'GET', '/api/v1/openapi.json')).body,
    sync: (await call(s.url, 'GET', '/api/openapi.json')).body,
  };
  for (const [name, doc] of Object.entries(docs)) {
    assert.deepEqual(Object.keys(doc.components.securitySchemes), ['bearer'], name);
    assert.equal(doc.components.securitySchemes.bearer.scheme, 'bearer');
    let secured = 0;
    let errors = 0;
    for (const [p, ops] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const req of op.security ?? []) {
          secured++;
          assert.deepEqual(Object.keys(req), ['bearer'], `${name} ${method} ${p}`);
        }
        for (const [status, r] of Object.entries(op.responses)) {
          if (Number(status) < 400 || !r.content?.['application/json']) continue;
          errors++;
          assert.deepEqual(Object.keys(r.content['application/json'].schema.properties ?? {}), ['error', 'details', 'retry_after'], `${name} ${method} ${p} ${status}`);
        }
      }
    }
    assert.ok(secured > 0 && errors > 0, name);
  }
});

test('the sync upload documents its multipart form (file, record_type, record_uuid) for generated clients', async (t) => {
  const s = await startSync('sqlite');
  t.after(() => s.close());
  const doc = (await call(s.url, 'GET', '/api/openapi.json')).body;
  const form = doc.paths['/api/sync/attachment'].post.requestBody.content['multipart/form-data'].schema;
  assert.deepEqual(Object.keys(form.properties), ['file', 'record_type', 'record_uuid']);
  assert.deepEqual([...form.required].sort(), ['file', 'record_type', 'record_uuid']);
  assert.equal(form.properties.file.format, 'binary');
});
