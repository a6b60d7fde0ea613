import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { FUZZ_RUNS, HOSTILE_STRINGS, HOSTILE_VALUES, toJsonText } from './fuzz/arbitraries.js';
import { fuzzBody } from './fuzz/operations.js';
import { syncFuzzWorld, type SyncFuzzWorld } from './fuzz/sync-target.js';

const MP_BOUNDARY = 'XyZboundary';
const part = (name: string, value: string, filename?: string) =>
  `--${MP_BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"${filename === undefined ? '' : `; filename="${filename}"`}\r\n\r\n${value}\r\n`;

/** Multipart bodies that break the format in the ways clients and attackers do. */
function malformedMultipart(record: string): fc.Arbitrary<{ contentType: string; body: string }> {
  const ct = `multipart/form-data; boundary=${MP_BOUNDARY}`;
  const good = part('record_type', 'invoice') + part('record_uuid', record) + part('file', 'hello', 'a.txt') + `--${MP_BOUNDARY}--\r\n`;
  return fc.oneof(
    fc.constant({ contentType: 'multipart/form-data', body: good }),
    fc.constant({ contentType: ct, body: good.slice(0, good.length / 2) }),
    fc.constant({ contentType: ct, body: good.replace(/\r\n/g, '\n') }),
    fc.constant({ contentType: 'multipart/form-data; boundary=other', body: good }),
    fc.constant({ contentType: ct, body: '' }),
    fc.constant({ contentType: ct, body: `--${MP_BOUNDARY}--\r\n` }),
    fc.constant({ contentType: ct, body: part('record_type', 'invoice') + part('record_uuid', record) + `--${MP_BOUNDARY}--\r\n` }),
    fc.constant({ contentType: ct, body: part('file', 'x', 'a.txt') + part('file', 'y', 'b.txt') + `--${MP_BOUNDARY}--\r\n` }),
    // Past busboy's 252 characters, quoted or not.
    fc.constantFrom(200, 253, 1000).chain((n) => fc.constantFrom(`"${'b'.repeat(n)}"`, 'b'.repeat(n))).map((b) => ({ contentType: `multipart/form-data; boundary=${b}`, body: good })),
    fc.tuple(fc.constantFrom(...HOSTILE_STRINGS.filter((s) => s.length < 1000)), fc.constantFrom('record_type', 'record_uuid', 'filename')).map(([evil, where]) => ({
      contentType: ct,
      body: part('record_type', where === 'record_type' ? evil : 'invoice') + part('record_uuid', where === 'record_uuid' ? evil : record)
        + part('file', 'data', where === 'filename' ? evil : 'a.txt') + `--${MP_BOUNDARY}--\r\n`,
    })),
    fc.string({ unit: 'binary', maxLength: 200 }).map((junk) => ({ contentType: ct, body: `--${MP_BOUNDARY}\r\n${junk}` })),
  );
}

// The backends run side by side: the work waits on fsync and the network more than on the CPU.
describe('sync body fuzzing', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`sync body fuzzing on ${backend}`, { concurrency: 1 }, () => {
      let w: SyncFuzzWorld;
      before(async () => { w = await syncFuzzWorld(backend); });
      after(() => w.s.close());

      test('every JSON body: never a 5xx, a 4xx stores nothing', async () => {
        const posts = w.ops.filter((o) => o.body);
        for (const expected of ['/api/sync/push', '/api/sync/pull', '/api/auth/register', '/api/business']) assert.ok(posts.some((o) => o.path === expected), expected);
        for (const op of posts) await fuzzBody(w.target, op);
        assert.equal((await call(w.s.url, 'GET', '/healthz')).status, 200);
      });

      test('hostile values as pushed record data: never a 5xx, a 4xx stores nothing', async () => {
        let known = await w.target.fingerprint();
        for (const value of [...HOSTILE_VALUES, ...HOSTILE_STRINGS]) {
          const text = toJsonText({ business_id: w.business.id, instance_id: 'fuzz', changes: [{ table_name: 'customers', record_uuid: randomUUID(), version: 1, operation: 'create', data: { value } }] });
          const r = await call(w.s.url, 'POST', '/api/sync/push', { body: text, headers: { ...w.target.headers, 'content-type': 'application/json' } });
          assert.ok(r.status < 500, `data ${text.slice(120, 220)}: ${r.status} ${r.text}`);
          if (r.status >= 400) assert.deepEqual(await w.target.fingerprint(), known);
          else known = await w.target.fingerprint();
        }
      });

      test('malformed multipart uploads: never a 5xx, a 4xx stores nothing', async () => {
        let known = await w.target.fingerprint();
        await fc.assert(fc.asyncProperty(malformedMultipart(w.record), async ({ contentType, body }) => {
          const r = await fetch(`${w.s.url}/api/sync/attachment`, { method: 'POST', headers: { ...w.target.headers, 'content-type': contentType }, body });
          const text = await r.text();
          assert.ok(r.status < 500, `${contentType} ${JSON.stringify(body.slice(0, 120))}: ${r.status} ${text}`);
          if (r.status >= 400) assert.deepEqual(await w.target.fingerprint(), known, `a ${r.status} upload changed what is stored`);
          else known = await w.target.fingerprint();
        }), { numRuns: FUZZ_RUNS });
      });
    });
  }
});
