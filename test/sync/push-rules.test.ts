import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { planPush, recordKey, attemptKey, type PushState, type RecordState } from '../../src/sync/changes/push-plan.js';
import { validatePushItems, type PushItem } from '../../src/sync/changes/push-validation.js';
import { canonicalJson } from '../../src/sync/changes/canonical-json.js';
import { PUSH_LIMITS } from '../../src/sync/changes/change-limits.js';
import type { Conflict } from '../../src/sync/changes/change-schemas.js';

const R = randomUUID();

function item(version: number, data: Record<string, unknown> | null = { v: version }, over: Partial<PushItem> = {}): PushItem {
  return { kind: 'change', index: 0, tableName: 'customers', recordUuid: R, version, operation: data === null ? 'delete' : version === 1 ? 'create' : 'update', data: data === null ? null : canonicalJson(data), ...over };
}

function state(over: Partial<PushState> = {}, record?: Partial<RecordState>): PushState {
  const records = new Map<string, RecordState>();
  if (record) records.set(recordKey('customers', R), { tableName: 'customers', recordUuid: R, recordVersion: 1, serverVersion: 7, instanceId: 'other', data: '{"v":1}', ...record });
  return { serverVersion: 7, records, ownChanges: new Map(), ownConflicts: new Map(), ...over };
}

describe('version rule (planPush)', () => {
  test('a change to an unknown record is applied with the next server version', () => {
    const plan = planPush(state(), 'me', [item(1)]);
    assert.equal(plan.accepted, 1);
    assert.equal(plan.serverVersion, 8);
    assert.deepEqual(plan.changes.map((c) => [c.serverVersion, c.recordVersion]), [[8, 1]]);
    assert.equal(plan.records[0]?.instanceId, 'me');
  });

  test('a greater version than the server\'s is applied whoever wrote the server\'s version', () => {
    const plan = planPush(state({}, { recordVersion: 3 }), 'me', [item(4)]);
    assert.equal(plan.accepted, 1);
    assert.equal(plan.conflicts.length, 0);
  });

  test('a version not greater than the server\'s, written by another instance, is a conflict and not applied', () => {
    for (const v of [2, 3]) {
      const plan = planPush(state({}, { recordVersion: 3, data: '{"server":true}' }), 'me', [item(v, { mine: true })]);
      assert.equal(plan.changes.length, 0);
      assert.equal(plan.accepted, 0);
      assert.equal(plan.serverVersion, 7, 'no server version is used');
      assert.equal(plan.conflicts.length, 1);
      const slot = plan.conflicts[0]!;
      assert.ok('remote' in slot);
      assert.equal(slot.remote.data, '{"server":true}');
      assert.equal(slot.item.data, '{"mine":true}');
    }
  });

  test('an item repeating a conflicted item of the same push is answered with that conflict, also after a later item of the record applied (never rejected as stale)', () => {
    const plan = planPush(state({}, { recordVersion: 2, data: '{"b":2}' }), 'me', [item(2, { a: 2 }), item(3, { a: 3 }), item(2, { a: 2 })]);
    assert.equal(plan.conflicts.length, 1, 'one conflict for the item and its repeat');
    assert.deepEqual(plan.rejections, []);
    assert.equal(plan.accepted, 1, 'the later item is applied');
  });

  test('an older version from the same instance that is not a retry is rejected as stale', () => {
    const plan = planPush(state({}, { recordVersion: 3, instanceId: 'me' }), 'me', [item(2, { different: 1 })]);
    assert.equal(plan.rejections.length, 1);
    assert.match(plan.rejections[0]!.reason, /stale version/);
    assert.equal(plan.changes.length, 0);
  });

  test('a retry of an applied change is accepted once and writes nothing', () => {
    const ownChanges = new Map([[attemptKey('customers', R, 2), { operation: 'update' as const, data: '{"v":2}' }]]);
    // The record moved on since (another device wrote version 3): still a retry, not a conflict.
    const plan = planPush(state({ ownChanges }, { recordVersion: 3 }), 'me', [item(2)]);
    assert.equal(plan.accepted, 1);
    assert.equal(plan.changes.length, 0);
    assert.equal(plan.conflicts.length, 0);
    assert.equal(plan.serverVersion, 7);
  });

  test('the same version with different content from the same instance is rejected, not applied twice', () => {
    const ownChanges = new Map([[attemptKey('customers', R, 2), { operation: 'update' as const, data: '{"v":2}' }]]);
    const plan = planPush(state({ ownChanges }, { recordVersion: 2, instanceId: 'me' }), 'me', [item(2, { v: 'other' })]);
    assert.equal(plan.accepted, 0);
    assert.match(plan.rejections[0]!.reason, /already pushed by this instance with different content/);
  });

  test('the same item twice in one push is applied once', () => {
    const plan = planPush(state(), 'me', [item(1), item(1)]);
    assert.equal(plan.accepted, 2);
    assert.equal(plan.changes.length, 1);
  });

  test('items see earlier items of the same push: create then update gives two consecutive versions', () => {
    const plan = planPush(state(), 'me', [item(1), item(2), item(3, null, { kind: 'tombstone' })]);
    assert.deepEqual(plan.changes.map((c) => [c.serverVersion, c.operation]), [[8, 'create'], [9, 'update'], [10, 'delete']]);
    assert.equal(plan.records.length, 1);
    assert.equal(plan.records[0]!.data, null, 'the record ends deleted');
  });

  test('a retried push that conflicted returns the stored conflict instead of a new one', () => {
    const existing = { id: 5, operation: 'update', local_data: '{"mine":true}' } as Conflict;
    const ownConflicts = new Map([[attemptKey('customers', R, 1), [existing]]]);
    const plan = planPush(state({ ownConflicts }, { recordVersion: 1 }), 'me', [item(1, { mine: true }, { operation: 'update' })]);
    assert.deepEqual(plan.conflicts, [{ existing }]);
  });

  test('a retried push that conflicted returns its conflict even once this instance wrote the record since (not stale)', () => {
    const existing = { id: 5, operation: 'update', local_data: '{"mine":true}' } as Conflict;
    const ownConflicts = new Map([[attemptKey('customers', R, 2), [existing]]]);
    const plan = planPush(state({ ownConflicts }, { recordVersion: 3, instanceId: 'me' }), 'me', [item(2, { mine: true }, { operation: 'update' })]);
    assert.deepEqual(plan.rejections, []);
    assert.deepEqual(plan.conflicts, [{ existing }]);
  });

  test('of several conflicts one version had, a retry returns the one with its content', () => {
    const x = { id: 5, operation: 'update', local_data: '{"name":"X"}' } as Conflict;
    const y = { id: 6, operation: 'update', local_data: '{"name":"Y"}' } as Conflict;
    const ownConflicts = new Map([[attemptKey('customers', R, 2), [x, y]]]);
    const plan = planPush(state({ ownConflicts }, { recordVersion: 2 }), 'me', [item(2, { name: 'X' }, { operation: 'update' })]);
    assert.deepEqual(plan.conflicts, [{ existing: x }]);
  });

  test('an older version from this instance with content it never pushed is still stale', () => {
    const existing = { id: 5, operation: 'update', local_data: '{"mine":true}' } as Conflict;
    const ownConflicts = new Map([[attemptKey('customers', R, 2), [existing]]]);
    const plan = planPush(state({ ownConflicts }, { recordVersion: 3, instanceId: 'me' }), 'me', [item(2, { other: true }, { operation: 'update' })]);
    assert.equal(plan.conflicts.length, 0);
    assert.match(plan.rejections[0]!.reason, /stale version/);
  });

  test('a conflicting tombstone keeps null as its local data', () => {
    const plan = planPush(state({}, { recordVersion: 2 }), 'me', [item(2, null, { kind: 'tombstone' })]);
    const slot = plan.conflicts[0]!;
    assert.ok('item' in slot && slot.item.data === null && slot.item.operation === 'delete');
  });
});

describe('push item validation', () => {
  const ok = { table_name: 'customers', record_uuid: R, version: 1, operation: 'create', data: { a: 1 } };

  test('valid items come back normalised: lower-case uuid, canonical data, tombstones as deletes', () => {
    const { items, rejections } = validatePushItems(
      [{ ...ok, record_uuid: R.toUpperCase(), data: { b: 1, a: { d: 1, c: 2 } } }],
      [{ table_name: 'customers', record_uuid: R, version: 2 }],
    );
    assert.deepEqual(rejections, []);
    assert.equal(items[0]!.recordUuid, R);
    assert.equal(items[0]!.data, '{"a":{"c":2,"d":1},"b":1}');
    assert.deepEqual({ ...items[1]! }, { kind: 'tombstone', index: 0, tableName: 'customers', recordUuid: R, version: 2, operation: 'delete', data: null });
  });

  test('each invalid item is rejected with its index and a reason; valid ones still pass', () => {
    const bad: [unknown, RegExp][] = [
      [42, /must be an object/],
      [{ ...ok, table_name: 'drop table;' }, /table_name must be an identifier/],
      [{ ...ok, table_name: '1abc' }, /table_name/],
      [{ ...ok, table_name: 'a'.repeat(64) }, /table_name/],
      [{ ...ok, record_uuid: 'not-a-uuid' }, /record_uuid must be a UUID/],
      [{ ...ok, version: 0 }, /version must be an integer/],
      [{ ...ok, version: 1.5 }, /version/],
      [{ ...ok, version: '2' }, /version/],
      [{ ...ok, version: Number.MAX_SAFE_INTEGER + 2 }, /version/],
      [{ ...ok, operation: 'upsert' }, /operation must be one of create, update, delete/],
      [{ ...ok, data: [1, 2] }, /data must be an object/],
      [{ ...ok, data: null }, /data must be an object/],
      [{ ...ok, data: 'text' }, /data must be an object/],
      [{ ...ok, data: { big: 'x'.repeat(PUSH_LIMITS.maxDataBytes) } }, /data is larger than/],
      [{ ...ok, extra: 1 }, /unknown field "extra"/],
    ];
    const { items, rejections } = validatePushItems([ok, ...bad.map(([raw]) => raw)], []);
    assert.equal(items.length, 1);
    assert.equal(rejections.length, bad.length);
    bad.forEach(([, reason], i) => {
      assert.equal(rejections[i]!.index, i + 1);
      assert.match(rejections[i]!.reason, reason);
    });
  });

  test('a delete change needs no data; a tombstone takes only its three fields', () => {
    const { items, rejections } = validatePushItems([{ table_name: 't', record_uuid: R, version: 3, operation: 'delete' }], [{ table_name: 't', record_uuid: R, version: 4, data: {} }]);
    assert.equal(items.length, 1);
    assert.equal(items[0]!.data, null);
    assert.equal(rejections[0]!.kind, 'tombstone');
    assert.match(rejections[0]!.reason, /unknown field "data"/);
  });
});
