import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { fuzzQuery } from './fuzz/operations.js';
import { syncFuzzWorld, type SyncFuzzWorld } from './fuzz/sync-target.js';

// The backends run side by side: the work waits on fsync and the network more than on the CPU.
describe('sync query-string fuzzing', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`sync query-string fuzzing on ${backend}`, { concurrency: 1 }, () => {
      let w: SyncFuzzWorld;
      before(async () => { w = await syncFuzzWorld(backend); });
      after(() => w.s.close());

      test('every query string: never a 5xx, a 4xx stores nothing', async () => {
        const gets = w.ops.filter((o) => o.method === 'GET');
        assert.ok(gets.some((o) => o.path === '/api/sync/conflicts') && gets.some((o) => o.path === '/api/sync/attachments'));
        for (const op of gets) await fuzzQuery(w.target, op);
        assert.equal((await call(w.s.url, 'GET', '/healthz')).status, 200);
      });
    });
  }
});
