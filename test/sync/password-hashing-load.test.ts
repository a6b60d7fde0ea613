import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { ConfigError } from '../../src/core/config.js';
import { loadSyncConfig } from '../../src/sync/config.js';

// The production scrypt cost (32 MiB per hash), so hashes take long enough to pile up.
const COST = 15;

for (const backend of BACKENDS) {
  describe(`sync password hashing under load on ${backend}`, () => {
    let s: SyncUnderTest;
    let dir: string;
    before(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'fs-hashload-'));
      // Local-disk attachments on both backends: file I/O is what shares libuv's thread pool with scrypt.
      s = await startSync(backend, { scryptLog2N: COST, passwordHashQueue: 64, attachmentDir: dir });
    });
    after(async () => {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('an attachment download does not wait behind a queue of logins', async (t) => {
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const form = new FormData();
      form.set('record_type', 'invoice');
      form.set('record_uuid', randomUUID());
      form.set('file', new Blob([randomBytes(1024 * 1024)]), 'scan.pdf');
      const up = await call(s.url, 'POST', '/api/sync/attachment', { token: u.token, body: form, headers: { 'x-business-id': b.id } });
      assert.equal(up.status, 201, up.text);

      const LOGINS = 16;
      let received = 0;
      const count = (req: { url?: string }) => { if (req.url === '/api/auth/login') received++; };
      s.app.server.on('request', count);
      t.after(() => s.app.server.off('request', count));
      const finished: string[] = [];
      // Credential stuffing: many addresses, each login a full scrypt verification (unknown addresses verify against a dummy hash).
      const logins = Array.from({ length: LOGINS }, (_, i) => call(s.url, 'POST', '/api/auth/login', { json: { email: `stuffed-${i}-${randomUUID()}@example.com`, password: 'not the password' } })
        .then((r) => { finished.push('login'); return r.status; }));
      // Every login has reached the server when the download starts.
      for (let i = 0; i < 1000 && received < LOGINS; i++) await sleep(5);
      const doneAtStart = finished.length;
      assert.ok(LOGINS - doneAtStart >= 6, `${LOGINS - doneAtStart} logins pending when the download started`);
      const download = fetch(`${s.url}/api/sync/attachment/${up.body.uuid}`, { headers: { authorization: `Bearer ${u.token}` } })
        .then(async (r) => { const bytes = (await r.arrayBuffer()).byteLength; finished.push('download'); return [r.status, bytes]; });
      const [statuses, got] = await Promise.all([Promise.all(logins), download]);
      assert.deepEqual(got, [200, 1024 * 1024]);
      assert.ok(statuses.every((st) => st === 401), statuses.join(','));
      // Unbounded, every pending hash sits in libuv's queue ahead of the file reads, and the download ends after all of them.
      // Bounded, the reads find free threads: at most the hashes already running finish first.
      const between = finished.indexOf('download') - doneAtStart;
      assert.ok(between <= 3, `${between} logins finished while the download ran`);
    });

    test('logins past the hashing queue get 503 unavailable with Retry-After, at once', async (t) => {
      const own = await startSync(backend, { scryptLog2N: COST, passwordHashConcurrency: 1, passwordHashQueue: 2 });
      t.after(() => own.close());
      const u = await newUser(own);
      const replies = await Promise.all(Array.from({ length: 10 }, () => call(own.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } })));
      const shed = replies.filter((r) => r.status === 503);
      const served = replies.filter((r) => r.status === 200);
      assert.equal(shed.length + served.length, 10, replies.map((r) => r.status).join(','));
      assert.ok(served.length >= 3, 'one hashing and two queued are served');
      assert.ok(shed.length >= 1, 'the rest are shed');
      for (const r of shed) {
        assert.equal(r.body.error, 'unavailable');
        assert.equal(r.headers.get('retry-after'), String(r.body.retry_after));
      }
      // Shed attempts were never counted against the lockout: the address is not locked.
      assert.equal((await call(own.url, 'POST', '/api/auth/login', { json: { email: u.email, password: u.password } })).status, 200);
      // Registrations hash a password too, in the same queue.
      const registrations = await Promise.all(Array.from({ length: 10 }, (_, i) => call(own.url, 'POST', '/api/auth/register', {
        json: { email: `queued-${i}-${u.email}`, name: 'Queued', password: 'a long enough passphrase 42' },
      })));
      const shedRegistrations = registrations.filter((r) => r.status === 503);
      assert.equal(shedRegistrations.length + registrations.filter((r) => r.status === 201).length, 10, registrations.map((r) => r.status).join(','));
      assert.ok(shedRegistrations.length >= 1, 'registrations past the queue are shed');
      for (const r of shedRegistrations) assert.deepEqual([r.body.error, r.headers.get('retry-after')], ['unavailable', String(r.body.retry_after)]);
    });
  });
}

describe('sync password hashing configuration', () => {
  test('hash concurrency must leave libuv threads for file I/O', () => {
    assert.throws(() => loadSyncConfig({ argv: ['--password-hash-concurrency', '4'] }), (e: unknown) => e instanceof ConfigError && /UV_THREADPOOL_SIZE=4/.test(e.message));
    assert.throws(() => loadSyncConfig({ argv: [], env: { UV_THREADPOOL_SIZE: '2', SYNC_PASSWORD_HASH_CONCURRENCY: '2' } }), ConfigError);
    assert.equal(loadSyncConfig({ argv: ['--password-hash-concurrency', '12'], env: { UV_THREADPOOL_SIZE: '16' } }).passwordHashConcurrency, 12);
    // Read as libuv reads it (atoi, 0 taken as 1): these all start 1 or 2 threads, too few for 2 hashes and file I/O.
    for (const size of ['2.5', '2x', ' 2', '0', '', 'four']) {
      assert.throws(() => loadSyncConfig({ env: { UV_THREADPOOL_SIZE: size } }), (e: unknown) => e instanceof ConfigError && /UV_THREADPOOL_SIZE=[12]\b/.test(e.message), JSON.stringify(size));
    }
    assert.equal(loadSyncConfig({ env: { UV_THREADPOOL_SIZE: '3.9' } }).passwordHashConcurrency, 2, '3 threads: room for 2 hashes');
    assert.equal(loadSyncConfig({ env: { UV_THREADPOOL_SIZE: '-1' } }).passwordHashConcurrency, 2, 'libuv reads a negative size as its largest pool');
  });
});
