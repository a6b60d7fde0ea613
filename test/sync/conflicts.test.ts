import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { addMember, businessToken, newBusiness, newUser, startSync, type SyncUnderTest } from '../helpers/sync.js';
import { change, device, tombstone, type Device } from './push-client.js';

for (const backend of BACKENDS) {
  describe(`sync conflicts on ${backend}`, () => {
    let s: SyncUnderTest;
    before(async () => { s = await startSync(backend); });
    after(() => s.close());

    /** Two devices of two members of one business, and a record both know at version 1 (written by `a`). */
    async function twoDevices() {
      const owner = await newUser(s);
      const member = await newUser(s);
      const b = await newBusiness(s, owner);
      await addMember(s, owner, b.id, member);
      const a = device(s.url, owner.token, b.id, 'phone-a');
      const c = device(s.url, member.token, b.id, 'tablet-b');
      const rec = randomUUID();
      await a.push({ changes: [change(rec, 1, { name: 'original' })] });
      return { owner, member, b, a, c, rec };
    }

    const list = (d: Device, query = '') => call(s.url, 'GET', `/api/sync/conflicts${query}`, { token: d.token, headers: { 'x-business-id': d.businessId } });
    const resolve = (d: Device, id: number, resolution: string) => call(s.url, 'POST', `/api/sync/conflicts/${id}/resolve`, { token: d.token, headers: { 'x-business-id': d.businessId }, json: { resolution } });

    test('two devices racing on one record: exactly one update applies, the other becomes a pending conflict', async () => {
      const { a, c, rec } = await twoDevices();
      const [ra, rc] = await Promise.all([a.push({ changes: [change(rec, 2, { name: 'from a' })] }), c.push({ changes: [change(rec, 2, { name: 'from c' })] })]);
      const results = [ra.body, rc.body];
      assert.equal(results.filter((r) => r.accepted === 1).length, 1, 'one winner');
      const loser = results.find((r) => r.conflicts.length === 1);
      assert.ok(loser, 'one conflict');
      const winnerName = loser.conflicts[0].local_data.includes('from a') ? 'from c' : 'from a';
      assert.deepEqual(JSON.parse(loser.conflicts[0].remote_data), { name: winnerName });
      const { changes } = await a.pullAll(0);
      assert.deepEqual(changes.map((x) => [x.version, x.data['name']]), [[1, 'original'], [2, winnerName]]);
      const pending = await list(a);
      assert.equal(pending.body.length, 1);
      assert.equal(pending.body[0].resolution, 'pending');
    });

    test('a tombstone racing with an update from another device conflicts with local data the JSON text null', async () => {
      const { a, c, rec } = await twoDevices();
      await a.push({ changes: [change(rec, 2, { name: 'edited' })] });
      const r = await c.push({ tombstones: [tombstone(rec, 2)] });
      assert.equal(r.body.conflicts[0].operation, 'delete');
      assert.equal(r.body.conflicts[0].local_data, 'null', 'a string, as the specification types it: the JSON text of null');
      const retried = await c.push({ tombstones: [tombstone(rec, 2)] });
      assert.equal(retried.body.conflicts[0].id, r.body.conflicts[0].id, 'retrying the delete returns the same conflict');
      assert.deepEqual(JSON.parse(r.body.conflicts[0].remote_data), { name: 'edited' });
    });

    test('an update racing with a delete from another device conflicts with remote data the JSON text null', async () => {
      const { a, c, rec } = await twoDevices();
      await a.push({ tombstones: [tombstone(rec, 2)] });
      const r = await c.push({ changes: [change(rec, 2, { name: 'edited' })] });
      assert.equal(r.body.conflicts[0].remote_data, 'null');
      assert.deepEqual(JSON.parse(r.body.conflicts[0].local_data), { name: 'edited' });
      const listed = await list(c);
      assert.equal(listed.body[0].remote_data, 'null', 'the list answers the same string');
    });

    test('retrying a push whose first item conflicted and whose second applied answers the same conflict, not a stale rejection', async () => {
      const { a, c, rec } = await twoDevices();
      await a.push({ changes: [change(rec, 2, { name: 'A2' })] });
      const body = { changes: [change(rec, 2, { name: 'C2' }), change(rec, 3, { name: 'C3' })] };
      const first = await c.push(body);
      assert.equal(first.body.accepted, 1);
      assert.equal(first.body.conflicts.length, 1);
      // The answer was lost; the device sends the same push again.
      const retry = await c.push(body);
      assert.equal(retry.status, 200);
      assert.deepEqual(retry.body.rejections, []);
      assert.equal(retry.body.accepted, 1);
      assert.deepEqual(retry.body.conflicts.map((x: { id: number }) => x.id), [first.body.conflicts[0].id]);
      assert.equal((await list(c)).body.length, 1, 'no second conflict stored');
    });

    test('two devices creating one record: the loser\'s create resolved local pulls as a create at record version 2', async () => {
      const owner = await newUser(s);
      const b = await newBusiness(s, owner);
      const a = device(s.url, owner.token, b.id, 'phone-a');
      const c = device(s.url, owner.token, b.id, 'tablet-b');
      const rec = randomUUID();
      await a.push({ changes: [change(rec, 1, { name: 'from a' })] });
      const conflict = (await c.push({ changes: [change(rec, 1, { name: 'from c' })] })).body.conflicts[0];
      assert.equal(conflict.operation, 'create');
      assert.equal((await resolve(c, conflict.id, 'local')).status, 200);
      const { changes } = await a.pullAll(0);
      assert.deepEqual(changes.map((x) => [x.operation, x.record_version, x.instance_id, x.data['name']]), [['create', 1, 'phone-a', 'from a'], ['create', 2, 'tablet-b', 'from c']]);
    });

    test('retrying a conflicted push after its conflict was resolved local answers that conflict', async () => {
      const { a, c, rec } = await twoDevices();
      await a.push({ changes: [change(rec, 2, { name: 'A2' })] });
      const body = { changes: [change(rec, 2, { name: 'C2' })] };
      const id = (await c.push(body)).body.conflicts[0].id;
      assert.equal((await resolve(c, id, 'local')).status, 200);
      const retry = await c.push(body);
      assert.deepEqual(retry.body.rejections, []);
      assert.deepEqual(retry.body.conflicts.map((x: { id: number; resolution: string }) => [x.id, x.resolution]), [[id, 'local']]);
    });

    test('a local resolution is not a push of its device: that device\'s own edit at its version is a conflict, not refused as a retry or as stale', async () => {
      const { a, c, rec } = await twoDevices();
      await a.push({ changes: [change(rec, 2, { name: 'A2' })] });
      const first = (await c.push({ changes: [change(rec, 2, { name: 'C2' })] })).body.conflicts[0];
      // Resolved by the other member; tablet-b, offline, goes on from its own version 2.
      assert.equal((await resolve(a, first.id, 'local')).body.applied_version, 3);
      const edit = { changes: [change(rec, 3, { name: 'C3' })] };
      const r = await c.push(edit);
      assert.deepEqual([r.body.accepted, r.body.rejections], [0, []], r.text);
      assert.equal(r.body.conflicts.length, 1, 'kept as a conflict against the resolution, not lost');
      const second = r.body.conflicts[0];
      assert.deepEqual([JSON.parse(second.local_data), JSON.parse(second.remote_data), second.version], [{ name: 'C3' }, { name: 'C2' }, 3]);
      assert.deepEqual((await c.push(edit)).body.conflicts.map((x: { id: number }) => x.id), [second.id], 'its retry answers the same conflict');
      // Once another device has written above the resolution, the same holds (the audit's case).
      assert.equal((await a.push({ changes: [change(rec, 4, { name: 'A4' })] })).body.accepted, 1);
      const late = await c.push({ changes: [change(rec, 3, { name: 'C3 again' })] });
      assert.deepEqual([late.body.rejections, late.body.conflicts.length], [[], 1]);
      assert.deepEqual((await c.pullAll(0)).changes.map((x) => [x.version, x.record_version, x.instance_id]),
        [[1, 1, 'phone-a'], [2, 2, 'phone-a'], [3, 3, 'tablet-b'], [4, 4, 'phone-a']], 'the resolution still carries its device\'s id');
    });

    test('retrying the earlier of two conflicted pushes of one version answers its own conflict and stores none', async () => {
      const { a, c, rec } = await twoDevices();
      await a.push({ changes: [change(rec, 2, { name: 'A2' })] });
      const x1 = await c.push({ changes: [change(rec, 2, { name: 'X' })] });
      await c.push({ changes: [change(rec, 2, { name: 'Y' })] });
      const x2 = await c.push({ changes: [change(rec, 2, { name: 'X' })] });
      assert.equal(x2.body.conflicts[0].id, x1.body.conflicts[0].id);
      assert.deepEqual((await list(c)).body.map((q: { local_data: string }) => q.local_data).sort(), ['{"name":"X"}', '{"name":"Y"}']);
    });

    test('resolve local of a record at the highest version is 409 and leaves the conflict pending; remote still resolves it', async () => {
      const { a, c } = await twoDevices();
      const top = randomUUID();
      await a.push({ changes: [change(top, Number.MAX_SAFE_INTEGER, { n: 'a' })] });
      const id = (await c.push({ changes: [change(top, Number.MAX_SAFE_INTEGER, { n: 'c' })] })).body.conflicts[0].id;
      const refused = await resolve(c, id, 'local');
      assert.equal(refused.status, 409);
      assert.match(refused.body.details, /highest version/);
      assert.deepEqual((await list(c)).body.map((x: { id: number }) => x.id), [id], 'still pending');
      assert.equal((await resolve(c, id, 'remote')).status, 200);
      assert.deepEqual((await a.pullAll(0)).changes.filter((x: { record_uuid: string }) => x.record_uuid === top).map((x: { record_version: number }) => x.record_version), [Number.MAX_SAFE_INTEGER]);
    });

    test('resolve local applies the local data as a new change with a new server version, above every record version', async () => {
      const { a, c, rec } = await twoDevices();
      await a.push({ changes: [change(rec, 2, { name: 'server' })] });
      const conflict = (await c.push({ changes: [change(rec, 2, { name: 'mine' })] })).body.conflicts[0];
      const r = await resolve(c, conflict.id, 'local');
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.resolution, 'local');
      assert.equal(r.body.applied_version, 3);
      assert.ok(r.body.resolved_at);
      const { changes, version } = await c.pullAll(2);
      assert.equal(version, 3);
      assert.deepEqual(changes.map((x) => [x.version, x.operation, x.record_version, x.instance_id, x.data]), [[3, 'update', 3, 'tablet-b', { name: 'mine' }]]);
      // The winner's device continues from the pulled record version: its next update is not a conflict.
      const next = await a.push({ changes: [change(rec, 4, { name: 'after' })] });
      assert.equal(next.body.accepted, 1);
      const status = await call(s.url, 'GET', '/api/sync/status', { token: a.token, headers: { 'x-business-id': a.businessId } });
      assert.deepEqual(status.body, { business_id: a.businessId, server_version: 4, pending_conflicts: 0 });
    });

    test('resolve local of a conflicting tombstone deletes the record', async () => {
      const { a, c, rec } = await twoDevices();
      const conflict = (await c.push({ tombstones: [tombstone(rec, 1)] })).body.conflicts[0];
      await resolve(c, conflict.id, 'local');
      const { changes } = await c.pullAll(1);
      assert.deepEqual(changes.map((x) => [x.operation, x.data]), [['delete', {}]]);
      assert.ok(a);
    });

    test('resolve remote and skip close the conflict and change no record', async () => {
      const { a, c, rec } = await twoDevices();
      const c1 = (await c.push({ changes: [change(rec, 1, { name: 'x' }, 'update')] })).body.conflicts[0];
      const c2 = (await c.push({ changes: [change(rec, 1, { name: 'y' }, 'update')] })).body.conflicts[0];
      assert.notEqual(c1.id, c2.id);
      assert.equal((await resolve(c, c1.id, 'remote')).body.resolution, 'remote');
      const skipped = await resolve(c, c2.id, 'skip');
      assert.equal(skipped.body.resolution, 'skip');
      assert.equal(skipped.body.applied_version, null);
      const { changes, version } = await a.pullAll(0);
      assert.equal(version, 1);
      assert.equal(changes.length, 1);
    });

    test('lists pending conflicts by default; ?status=resolved and ?status=all; paging with after_id', async () => {
      const { c, rec } = await twoDevices();
      const ids: number[] = [];
      for (const name of ['p', 'q', 'r']) ids.push((await c.push({ changes: [change(rec, 1, { name }, 'update')] })).body.conflicts[0].id);
      await resolve(c, ids[1]!, 'skip');
      const ids_ = (r: { body: { id: number }[] }) => r.body.map((x) => x.id);
      assert.deepEqual(ids_(await list(c)), [ids[0], ids[2]]);
      assert.deepEqual(ids_(await list(c, '?status=pending')), [ids[0], ids[2]]);
      assert.deepEqual(ids_(await list(c, '?status=resolved')), [ids[1]]);
      assert.deepEqual(ids_(await list(c, '?status=all')), ids);
      assert.deepEqual(ids_(await list(c, `?status=all&after_id=${ids[0]}&limit=1`)), [ids[1]]);
      assert.deepEqual(ids_(await list(c, '?status=all&limit=99999999999999999999')), ids, 'a limit past 2^53 is reduced too');
      const bad = await list(c, '?status=open');
      assert.equal(bad.status, 400);
    });

    test('resolving a conflict that is not pending answers 409 and changes nothing', async () => {
      const { c, rec } = await twoDevices();
      const conflict = (await c.push({ changes: [change(rec, 1, { name: 'z' }, 'update')] })).body.conflicts[0];
      assert.equal((await resolve(c, conflict.id, 'local')).status, 200);
      for (const resolution of ['local', 'remote', 'skip']) {
        const r = await resolve(c, conflict.id, resolution);
        assert.equal(r.status, 409);
        assert.equal(r.body.error, 'conflict');
        assert.match(r.body.details, /already resolved \(local\)/);
      }
      assert.equal((await c.pullAll(0)).version, 2, 'the local data was applied once');
    });

    test('concurrent resolutions of one conflict: one wins, the others get 409', async () => {
      const { c, rec } = await twoDevices();
      const conflict = (await c.push({ changes: [change(rec, 1, { name: 'w' }, 'update')] })).body.conflicts[0];
      const results = await Promise.all(['local', 'local', 'remote', 'skip'].map((r) => resolve(c, conflict.id, r)));
      assert.equal(results.filter((r) => r.status === 200).length, 1);
      assert.equal(results.filter((r) => r.status === 409).length, 3);
    });

    test('a member removed (204) while their resolve is past the membership check gets 403: the conflict stays pending, no change is made', async (t) => {
      const { owner, member, a, c, rec } = await twoDevices();
      const conflict = (await c.push({ changes: [change(rec, 1, { name: 'mine' }, 'update')] })).body.conflicts[0];
      const access = s.deps.businesses.access;
      let removal: number | undefined;
      s.deps.businesses.access = async (businessId, userId) => {
        const r = await access(businessId, userId);
        if (removal === undefined && userId === member.id) {
          removal = 0;
          removal = (await call(s.url, 'DELETE', `/api/business/${businessId}/members/${member.id}`, { token: owner.token })).status;
        }
        return r;
      };
      t.after(() => { s.deps.businesses.access = access; });
      const r = await resolve(c, conflict.id, 'local');
      s.deps.businesses.access = access;
      assert.equal(removal, 204);
      assert.equal(r.status, 403, r.text);
      assert.equal((await list(a)).body[0].id, conflict.id, 'still pending');
      assert.equal((await a.pullAll(0)).version, 1, 'no change was made');
    });

    test('resolve with a user token and no X-Business-ID finds the conflict\'s business; membership is still checked', async () => {
      const { c, rec, owner } = await twoDevices();
      const conflict = (await c.push({ changes: [change(rec, 1, { name: 'v' }, 'update')] })).body.conflicts[0];
      const outsider = await newUser(s);
      const refused = await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { token: outsider.token, json: { resolution: 'local' } });
      assert.equal(refused.status, 404, 'an outsider learns nothing: as for an unknown id');
      assert.equal((await call(s.url, 'POST', '/api/sync/conflicts/999999/resolve', { token: owner.token, json: { resolution: 'local' } })).status, 404);
      const r = await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { token: owner.token, json: { resolution: 'skip' } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.resolution, 'skip');
    });

    test('another business\'s conflict is 404 by id, even to its own members through the wrong business; bad input 400', async () => {
      const { c, rec, owner } = await twoDevices();
      const conflict = (await c.push({ changes: [change(rec, 1, { name: 'v' }, 'update')] })).body.conflicts[0];
      const other = await newBusiness(s, owner);
      const viaOther = await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { token: owner.token, headers: { 'x-business-id': other.id }, json: { resolution: 'local' } });
      assert.equal(viaOther.status, 404);
      const tokenOther = await businessToken(s, owner, other.id);
      const viaToken = await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { token: tokenOther, json: { resolution: 'skip' } });
      assert.equal(viaToken.status, 404);
      const listOther = await call(s.url, 'GET', '/api/sync/conflicts', { token: tokenOther });
      assert.deepEqual(listOther.body, []);
      const outsider = await newUser(s);
      const forbidden = await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { token: outsider.token, headers: { 'x-business-id': c.businessId }, json: { resolution: 'local' } });
      assert.equal(forbidden.status, 403);
      const listForbidden = await call(s.url, 'GET', '/api/sync/conflicts', { token: outsider.token, headers: { 'x-business-id': c.businessId } });
      assert.equal(listForbidden.status, 403);
      assert.equal((await resolve(c, 999_999, 'local')).status, 404);
      assert.equal((await resolve(c, conflict.id, 'mine')).status, 400);
      assert.equal((await call(s.url, 'POST', '/api/sync/conflicts/abc/resolve', { token: c.token, headers: { 'x-business-id': c.businessId }, json: { resolution: 'local' } })).status, 400);
      assert.equal((await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { json: { resolution: 'local' } })).status, 401);
      const unknown = await call(s.url, 'GET', '/api/sync/conflicts', { token: c.token, headers: { 'x-business-id': randomUUID() } });
      assert.deepEqual([unknown.status, unknown.body.details], [404, 'no such business'], 'the list of an unknown business');
      for (const q of ['after_id=abc', 'after_id=-1', 'limit=0', 'limit=1.5']) {
        const bad = await list(c, `?${q}`);
        assert.deepEqual([bad.status, bad.body.error], [400, 'invalid_request'], q);
      }
      assert.equal((await list(c)).body[0].resolution, 'pending', 'still pending after every refused attempt');
    });
  });
}
