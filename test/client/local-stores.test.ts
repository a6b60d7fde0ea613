import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createMemoryStore, type LocalStore } from '../../src/client/index.js';
import { createSqliteStore } from '../../src/client/sqlite.js';
import { outboxKey, recordKey } from '../../src/client/local-store.js';
import { backoffDelay } from '../../src/client/backoff.js';
import { fieldMerge, lastWriterWins, type ConflictView } from '../../src/client/conflict-resolvers.js';

// The IndexedDB store runs the same contract in Chromium (browser.test.ts drives it through the example page).
const STORES: { name: string; open(): { store: LocalStore; reopen?: () => LocalStore; cleanup(): void } }[] = [
  { name: 'memory', open: () => ({ store: createMemoryStore(), cleanup: () => undefined }) },
  {
    name: 'sqlite',
    open: () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'client-store-'));
      const file = path.join(dir, 'store.sqlite');
      return { store: createSqliteStore(file), reopen: () => createSqliteStore(file), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
];

const rec = (table: string, uuid: string, name: string) => ({ table, uuid, data: { name }, version: 1, remote: { data: null, version: 0, instanceId: '', at: '' }, base: null });

describe('client local stores', () => {
  for (const kind of STORES) {
    test(`${kind.name}: writes are atomic and keyed, lists are ordered and filtered by prefix, values are copies`, async () => {
      const { store, reopen, cleanup } = kind.open();
      try {
        await store.write([
          { op: 'put', collection: 'records', key: recordKey('b', 'u2'), value: rec('b', 'u2', 'B2') },
          { op: 'put', collection: 'records', key: recordKey('a', 'u1'), value: rec('a', 'u1', 'A1') },
          { op: 'put', collection: 'records', key: recordKey('ab', 'u3'), value: rec('ab', 'u3', 'AB3') },
          { op: 'put', collection: 'outbox', key: outboxKey(10), value: { seq: 10, table: 'a', uuid: 'u1', version: 1, operation: 'create', data: { name: 'A1' }, sent: false, editedAt: 1 } },
          { op: 'put', collection: 'outbox', key: outboxKey(9), value: { seq: 9, table: 'a', uuid: 'u1', version: 1, operation: 'create', data: null, sent: true, editedAt: 1 } },
          { op: 'put', collection: 'meta', key: 'cursor', value: 42 },
        ]);
        assert.deepEqual((await store.list('records', 'a\u0000')).map((r) => r.uuid), ['u1'], 'prefix a\\0 does not match table ab');
        assert.deepEqual((await store.list('records')).map((r) => r.uuid), ['u1', 'u3', 'u2']);
        assert.deepEqual((await store.list('outbox')).map((e) => e.seq), [9, 10]);
        assert.equal(await store.get('meta', 'cursor'), 42);
        const got = await store.get('records', recordKey('a', 'u1'));
        got!.data = { name: 'changed by reference' };
        assert.deepEqual((await store.get('records', recordKey('a', 'u1')))?.data, { name: 'A1' });
        await store.write([{ op: 'delete', collection: 'outbox', key: outboxKey(9) }, { op: 'put', collection: 'meta', key: 'cursor', value: 43 }]);
        if (reopen) {
          await store.close();
          const again = reopen();
          assert.deepEqual((await again.list('outbox')).map((e) => e.seq), [10], 'the outbox survives closing the store');
          assert.equal(await again.get('meta', 'cursor'), 43);
          await again.close();
        } else {
          await store.close();
        }
      } finally {
        cleanup();
      }
    });
  }

  for (const kind of STORES) {
    test(`${kind.name}: getMany answers in the order asked, absent keys as undefined; a relaxed write is atomic and kept like any other`, async () => {
      const { store, reopen, cleanup } = kind.open();
      try {
        const keys = ['x', 'y', 'z'].map((u) => recordKey('t', u));
        await store.write([{ op: 'put', collection: 'records', key: keys[2]!, value: rec('t', 'z', 'Z') }, { op: 'put', collection: 'records', key: keys[0]!, value: rec('t', 'x', 'X') }], { relaxed: true });
        assert.deepEqual((await store.getMany('records', [keys[2]!, keys[1]!, keys[0]!, keys[2]!])).map((r) => r?.data?.['name']), ['Z', undefined, 'X', 'Z']);
        assert.deepEqual(await store.getMany('records', []), []);
        // A value that cannot be stored fails the whole write, relaxed or not.
        const bad = { ...rec('t', 'y', 'Y'), data: { get n() { throw new Error('unstorable'); } } } as never;
        await assert.rejects(store.write([{ op: 'put', collection: 'records', key: keys[1]!, value: rec('t', 'y', 'Y') }, { op: 'put', collection: 'records', key: keys[2]!, value: bad }], { relaxed: true }));
        assert.equal(await store.get('records', keys[1]!), undefined, 'nothing of the failed write is there');
        await store.write([{ op: 'put', collection: 'meta', key: 'cursor', value: 7 }]);
        if (reopen) {
          await store.close();
          const again = reopen();
          assert.deepEqual((await again.getMany('records', keys)).map((r) => r?.uuid), ['x', undefined, 'z']);
          assert.equal(await again.get('meta', 'cursor'), 7);
          await again.close();
        } else {
          await store.close();
        }
      } finally {
        cleanup();
      }
    });
  }

  test('backoff grows exponentially to its cap, with jitter in the upper half of each step', () => {
    assert.equal(backoffDelay(0, { baseMs: 100, maxMs: 1000 }, () => 0), 50);
    assert.equal(backoffDelay(0, { baseMs: 100, maxMs: 1000 }, () => 1), 100);
    assert.equal(backoffDelay(3, { baseMs: 100, maxMs: 1000 }, () => 1), 800);
    assert.equal(backoffDelay(20, { baseMs: 100, maxMs: 1000 }, () => 0.5), 750);
  });

  test('field merge keeps the fields each side changed; deletes are not merged; last writer wins by time', async () => {
    const view = (local: Record<string, unknown> | null, remote: Record<string, unknown> | null, base: Record<string, unknown> | null, localEditedAt = 0, remoteAt?: number) =>
      ({ id: 1, table: 't', uuid: 'u', local, remote, base, localEditedAt, remoteAt, conflict: {} as ConflictView['conflict'] }) satisfies ConflictView;
    assert.deepEqual(await fieldMerge(view({ a: 2, b: 1, d: 4 }, { a: 1, b: 3, c: 1 }, { a: 1, b: 1, c: 1 })), { merged: { a: 2, b: 3, d: 4 } });
    assert.deepEqual(await fieldMerge(view({ a: 1 }, { a: 1, x: [1, { y: 2 }] }, { a: 1, x: [1, { y: 2 }] })), { merged: { a: 1 } }, 'a field the device removed stays removed');
    assert.equal(await fieldMerge(view({ a: 1 }, null, { a: 0 })), 'remote');
    assert.equal(await fieldMerge(view(null, { a: 1 }, { a: 0 })), 'local');
    assert.equal(await lastWriterWins(view({}, {}, null, 100, 200)), 'remote');
    assert.equal(await lastWriterWins(view({}, {}, null, 300, 200)), 'local');
    assert.equal(await lastWriterWins(view({}, {}, null, 300, undefined)), 'local');
  });
});
