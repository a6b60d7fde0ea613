import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { jsonValueProblem, MAX_JSON_DEPTH } from '../../src/sync/http/json-body.js';

for (const backend of BACKENDS) {
  describe(`sync hostile input on ${backend}`, () => {
    let s: SyncUnderTest;
    let dir: string;
    before(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'fs-hostile-'));
      s = await startSync(backend, { attachmentDir: dir });
    });
    after(async () => {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    });

    async function member() {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      return { u, b, headers: { 'x-business-id': b.id } };
    }
    const status = async (token: string, businessId: string) => (await call(s.url, 'GET', '/api/sync/status', { token, headers: { 'x-business-id': businessId } })).body.server_version;
    const rawPush = (token: string, businessId: string, data: string) => call(s.url, 'POST', '/api/sync/push', {
      token, headers: { 'x-business-id': businessId, 'content-type': 'application/json' },
      body: `{"business_id":"${businessId}","instance_id":"dev-1","changes":[{"table_name":"t","record_uuid":"${randomUUID()}","version":1,"operation":"create","data":${data}}]}`,
    });

    test('push data nested 3000 levels deep is a 400, not a stack overflow, and stores nothing', async () => {
      const { u, b } = await member();
      const r = await rawPush(u.token, b.id, `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`);
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.error, 'invalid_request');
      assert.match(r.body.details, /nest at most 64 levels/);
      assert.equal(await status(u.token, b.id), 0);
      // The same through arrays, and a body just inside the bound is fine.
      assert.equal((await rawPush(u.token, b.id, `{"a":${'['.repeat(3000)}${']'.repeat(3000)}}`)).status, 400);
      const ok = await rawPush(u.token, b.id, `${'{"a":'.repeat(MAX_JSON_DEPTH - 5)}1${'}'.repeat(MAX_JSON_DEPTH - 5)}`);
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.body.accepted, 1);
    });

    test('a lone UTF-16 surrogate in pushed data or a key is refused with 400, never stored as U+FFFD', async () => {
      const { u, b } = await member();
      for (const data of ['{"note":"a\\ud800b"}', '{"\\udc00":1}']) {
        const r = await rawPush(u.token, b.id, data);
        assert.equal(r.status, 400, `${data}: ${r.text}`);
        assert.match(r.body.details, /surrogate/);
      }
      assert.equal(await status(u.token, b.id), 0);
      assert.equal((await rawPush(u.token, b.id, '{"note":"\\ud83d\\ude00"}')).status, 200, 'a proper surrogate pair is one character');
    });

    test('a body that is not UTF-8 is refused with 400, never stored with U+FFFD (two such keys would have become one)', async () => {
      const { u, b } = await member();
      const body = (data: Buffer) => Buffer.concat([
        Buffer.from(`{"business_id":"${b.id}","instance_id":"dev-1","changes":[{"table_name":"t","record_uuid":"${randomUUID()}","version":1,"operation":"create","data":`), data, Buffer.from('}]}')]);
      for (const data of [
        Buffer.concat([Buffer.from('{"note":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('A"}')]), // an encoded surrogate
        Buffer.concat([Buffer.from('{"'), Buffer.from([0xff]), Buffer.from('":"first","'), Buffer.from([0xfe]), Buffer.from('":"second"}')]),
      ]) {
        const r = await call(s.url, 'POST', '/api/sync/push', { token: u.token, body: body(data), headers: { 'content-type': 'application/json', 'x-business-id': b.id } });
        assert.equal(r.status, 400, r.text);
        assert.deepEqual(r.body, { error: 'invalid_request', details: 'body: not valid UTF-8' });
      }
      assert.equal(await status(u.token, b.id), 0);
    });

    test('a number out of the double range (1e999) is refused with 400, never stored as null', async () => {
      const { u, b } = await member();
      for (const n of ['1e999', '-1e999', '123456789e400']) {
        const r = await rawPush(u.token, b.id, `{"amount":${n}}`);
        assert.equal(r.status, 400, `${n}: ${r.text}`);
        assert.match(r.body.details, /out of range/);
      }
      assert.equal(await status(u.token, b.id), 0);
      assert.equal((await rawPush(u.token, b.id, '{"amount":1.7976931348623157e308,"tiny":5e-324}')).status, 200, 'the largest and smallest doubles are fine');
    });

    describe('malformed multipart uploads are 400, not 500', () => {
      const good = (boundary: string, nl = '\r\n') => [
        `--${boundary}`, 'Content-Disposition: form-data; name="record_type"', '', 'invoice',
        `--${boundary}`, 'Content-Disposition: form-data; name="record_uuid"', '', randomUUID(),
        `--${boundary}`, 'Content-Disposition: form-data; name="file"; filename="a.txt"', 'Content-Type: text/plain', '', 'hello',
        `--${boundary}--`, '',
      ].join(nl);
      const cases: [string, string, string][] = [
        ['no boundary parameter', 'multipart/form-data', good('xyz')],
        ['a truncated body', 'multipart/form-data; boundary=xyz', good('xyz').slice(0, -20)],
        ['LF-only line ends', 'multipart/form-data; boundary=xyz', good('xyz', '\n')],
        ['a boundary the body does not use', 'multipart/form-data; boundary=other', good('xyz')],
        ['an empty body', 'multipart/form-data; boundary=xyz', ''],
      ];
      for (const [what, contentType, body] of cases) {
        test(what, async () => {
          const { u, headers } = await member();
          const r = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body, headers: { ...headers, 'content-type': contentType } });
          assert.equal(r.status, 400, r.text);
          assert.equal(r.body.error, 'invalid_request');
        });
      }
      test('a well-formed body of the same shape is stored (the cases above differ only in what they break)', async () => {
        const { u, headers } = await member();
        const r = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body: good('xyz'), headers: { ...headers, 'content-type': 'multipart/form-data; boundary=xyz' } });
        assert.equal(r.status, 201, r.text);
      });
    });
  });
}

describe('jsonValueProblem', () => {
  test('walks iteratively: a million levels deep answers, it does not overflow', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    assert.match(jsonValueProblem(deep) ?? '', /nest at most/);
    assert.equal(jsonValueProblem({ a: [1, 'x', null, true, { b: 2 }] }), undefined);
    assert.match(jsonValueProblem({ a: [Number.NaN] }) ?? '', /out of range/);
  });
});
