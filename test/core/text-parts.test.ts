import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Type } from 'typebox';
import { createHttpApp } from '../../src/core/http/create-app.js';

function build() {
  const app = createHttpApp({ name: 'test', logLevel: 'silent', bodyLimit: 1024, trustProxy: [] });
  app.get('/q', {
    schema: {
      querystring: Type.Object({
        from: Type.Optional(Type.Integer()),
        ratio: Type.Optional(Type.Number()),
        ids: Type.Optional(Type.Array(Type.Integer())),
        either: Type.Optional(Type.Union([Type.Integer(), Type.String()])),
        flag: Type.Optional(Type.Boolean()),
      }),
    },
  }, async (req) => req.query);
  app.get('/p/:id', { schema: { params: Type.Object({ id: Type.Integer({ minimum: 1 }) }) } }, async (req) => req.params);
  return app;
}

test('numbers in query strings and paths are read only from decimal text', async (t) => {
  const app = build();
  t.after(() => app.close());
  for (const bad of ['0x10', '%201', '1%20', '1e3', '0b1', '0o7', 'Infinity', '-Infinity', '+1', '1.0', '', '%09', '1_000', '١٢']) {
    const r = await app.inject({ url: `/q?from=${bad}` });
    assert.equal(r.statusCode, 400, `from=${bad}`);
    assert.deepEqual(r.json(), { error: 'invalid_request', details: 'querystring from: must be a decimal integer' }, `from=${bad}`);
  }
  for (const bad of ['0x10', '1e3', 'Infinity', ' 1', '.5', '1.']) {
    const r = await app.inject({ url: `/q?ratio=${encodeURIComponent(bad)}` });
    assert.equal(r.statusCode, 400, `ratio=${bad}`);
  }
  for (const bad of ['0x10', '1e1', '%201']) {
    const r = await app.inject({ url: `/p/${bad}` });
    assert.equal(r.statusCode, 400, `/p/${bad}`);
  }
  assert.equal((await app.inject({ url: '/q?ids=1&ids=0x2' })).statusCode, 400, 'every value of a repeated parameter');
});

test('decimal text is still coerced: integers, decimals, repeated parameters, text unions, booleans', async (t) => {
  const app = build();
  t.after(() => app.close());
  assert.deepEqual((await app.inject({ url: '/q?from=1700000000000&ratio=-0.25&ids=1&ids=2' })).json(), { from: 1700000000000, ratio: -0.25, ids: [1, 2] });
  assert.deepEqual((await app.inject({ url: '/q?from=-5&ratio=3' })).json(), { from: -5, ratio: 3 });
  assert.deepEqual((await app.inject({ url: '/q?either=abc' })).json(), { either: 'abc' }, 'a union that admits text is left to Ajv');
  assert.deepEqual((await app.inject({ url: '/q?flag=true' })).json(), { flag: true });
  assert.deepEqual((await app.inject({ url: '/p/42' })).json(), { id: 42 });
  assert.equal((await app.inject({ url: '/p/0' })).statusCode, 400, 'the schema still applies after the decimal check');
});
