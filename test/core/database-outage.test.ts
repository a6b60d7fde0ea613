// Why: while the database cannot be reached, both services answer 503 with Retry-After (not 500), lose nothing, and recover on their own.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { toErrorResponse } from '../../src/core/http/error-handler.js';
import { databaseFailure } from '../../src/core/storage/unavailable.js';
import { BACKENDS, TEST_DATABASE_URL } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, makeReport, startMetrics } from '../helpers/metrics.js';
import { outageProxy } from '../helpers/outage-proxy.js';
import { newUser, startSync } from '../helpers/sync.js';

test('databaseFailure: unreachable (nothing happened) apart from lost under a query (a write may have committed); never a request\'s own error', () => {
  const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });
  for (const e of [coded('ECONNREFUSED'), coded('ENOTFOUND'), coded('57P03'), coded('53300'), coded('08001'), coded('SQLITE_BUSY'),
    new Error('timeout exceeded when trying to connect'), new Error('Connection terminated due to connection timeout: Connection terminated unexpectedly')]) {
    assert.equal(databaseFailure(e), 'unreachable', String((e as { code?: string }).code ?? e.message));
  }
  for (const e of [coded('ECONNRESET'), coded('57P01'), coded('08006'), new Error('Connection terminated unexpectedly'), new Error('Client has encountered a connection error and is not queryable')]) {
    assert.equal(databaseFailure(e), 'lost', String((e as { code?: string }).code ?? e.message));
  }
  for (const e of [coded('23505'), coded('22P02'), coded('SQLITE_CONSTRAINT'), new TypeError('x is undefined'), new Error('connection string invalid'), 'ECONNREFUSED', null]) {
    assert.equal(databaseFailure(e), undefined, String(e));
  }
});

test('a connection lost under a read or a repeatable write is a 503 to retry; under another write its outcome is unknown: 500', () => {
  const lost = new Error('Connection terminated unexpectedly');
  assert.equal(toErrorResponse(lost, true).status, 503);
  assert.equal(toErrorResponse(lost, true).headers?.['retry-after'], '2');
  assert.equal(toErrorResponse(lost, false).status, 500, 'a retry could apply the write twice');
  assert.equal(toErrorResponse(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }), false).status, 503, 'never reached: nothing happened');
});

describe('PostgreSQL unreachable', { skip: !BACKENDS.includes('postgres') && 'PostgreSQL is not reachable' }, () => {
  test('sync: a request gets 503 unavailable with Retry-After while the database is away, and succeeds once it is back', async (t) => {
    const pgOutage = await outageProxy(TEST_DATABASE_URL, 5432);
    t.after(pgOutage.close);
    const s = await startSync('postgres', { databaseUrl: pgOutage.url });
    t.after(s.close);
    const user = await newUser(s);
    const login = () => call(s.url, 'POST', '/api/auth/login', { json: { email: user.email, password: user.password } });
    await pgOutage.down();
    const refused = await login();
    assert.equal(refused.status, 503);
    assert.deepEqual(refused.body, { error: 'unavailable', details: 'the database is unreachable; retry', retry_after: 2 });
    assert.equal(refused.headers.get('retry-after'), '2');
    assert.equal(refused.headers.get('x-content-type-options'), 'nosniff', 'the security headers as on every answer');
    await pgOutage.up();
    assert.equal((await login()).status, 200, 'the pool opens new connections once the database is back');
  });

  test('metrics: an ingest refused while the database is away stores nothing, loses nothing, and is taken once it is back', async (t) => {
    const pgOutage = await outageProxy(TEST_DATABASE_URL, 5432);
    t.after(pgOutage.close);
    const m = await startMetrics('postgres', { databaseUrl: pgOutage.url });
    t.after(m.close);
    const { token } = await m.newTenant('acme');
    const ts = Date.now() - 60_000;
    assert.equal((await ingest(m.url, token, makeReport({ agentId: 'web-1', ts }))).status, 200);
    await pgOutage.down();
    const refused = await ingest(m.url, token, makeReport({ agentId: 'web-1', ts: ts + 10_000 }));
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error, 'unavailable');
    assert.equal(refused.headers.get('retry-after'), '2');
    const read = await call(m.url, 'GET', `/api/v1/host/web-1?from=0&to=${ts + 60_000}`, { token });
    assert.equal(read.status, 503);
    await pgOutage.up();
    assert.equal((await ingest(m.url, token, makeReport({ agentId: 'web-1', ts: ts + 10_000 }))).status, 200, 'the retry is taken');
    const series = await call(m.url, 'GET', `/api/v1/host/web-1?from=0&to=${ts + 60_000}`, { token });
    assert.equal(series.status, 200);
    assert.deepEqual(series.body.timestamps, [ts, ts + 10_000], 'the report stored before the outage and the retried one, once each');
  });
});
