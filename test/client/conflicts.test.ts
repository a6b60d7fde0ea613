import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { createMemoryStore, fieldMerge, lastWriterWins, SyncClientError, type ConflictView, type LocalStore, type RecordData, type SyncClient, type SyncClientOptions, type SyncState } from '../../src/client/index.js';
import { runExpiryCleanup } from '../../src/core/storage/expiry-cleanup.js';
import { syncExpiryRules } from '../../src/sync/storage/expiry-rules.js';
import { device, Network, oneBusiness, ownerAndMember, refusingStore } from './client-fixtures.js';

/** `a` and `other` start from v1 of a note; `a` syncs an edit, then `other` pushes its own: `other` holds the conflict. */
async function conflicted(a: SyncClient, other: SyncClient): Promise<{ rec: string; conflict: ConflictView }> {
  const rec = randomUUID();
  await a.put('notes', rec, { text: 'v1' });
  await a.sync();
  await other.sync();
  await a.put('notes', rec, { text: 'from a' });
  await a.sync();
  await other.put('notes', rec, { text: 'from c' });
  await other.sync();
  const [conflict] = await other.conflicts();
  assert.ok(conflict);
  return { rec, conflict };
}

/**
 * Device `c` (opened with `options`) resolves a conflict with `a` as `local`, with an edit made since held, and the
 * resolution's pull does not come back (offline): the client must still number and push that edit later.
 */
async function localResolutionWithoutItsPull(open: (o?: Partial<SyncClientOptions> & { store?: LocalStore }) => Promise<SyncClient>, options: { store?: LocalStore } = {}) {
  let pullsFail = false;
  const fetchPulls = async (input: string | URL | Request, init?: RequestInit) => {
    if (pullsFail && new URL(String(input)).pathname === '/api/sync/pull') throw new TypeError('fetch failed (offline)');
    return fetch(input, init);
  };
  const a = await open();
  const c = await open({ ...options, fetch: fetchPulls });
  const { rec, conflict } = await conflicted(a, c);
  await c.put('notes', rec, { text: 'from c, later' });
  pullsFail = true;
  await assert.rejects(c.resolveConflict(conflict.id, 'local'), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
  return { a, c, rec, pullsBack: () => { pullsFail = false; } };
}

/** A customer both devices had, whose phone `a` has since changed on the server and whose name `c` changes locally. */
async function divergedCustomer(a: SyncClient, c: SyncClient): Promise<string> {
  const rec = randomUUID();
  await a.put('customers', rec, { name: 'Ann', phone: '111', email: 'ann@x' });
  await a.sync();
  await c.sync();
  await a.put('customers', rec, { name: 'Ann', phone: '222', email: 'ann@x' });
  await a.sync();
  await c.put('customers', rec, { name: 'Bob', phone: '111', email: 'ann@x' });
  return rec;
}

/**
 * Both devices start from `first` of one record; `a` changes it to `fromA` and pushes, then `c` changes its copy to
 * `fromC` and pushes: `c` gets the conflict.
 */
async function conflictOn(a: SyncClient, c: SyncClient, rec: string, first: RecordData, fromA: RecordData, fromC: RecordData): Promise<void> {
  await a.put('customers', rec, first);
  await a.sync();
  await c.sync();
  await a.put('customers', rec, fromA);
  await a.sync();
  await c.put('customers', rec, fromC);
  await c.sync();
}

describe('sync client: conflicts', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: two devices edit one record offline; the later one gets the conflict with both sides, resolves it, and both converge`, async (t) => {
      const { s, owner, member: other, b } = await ownerAndMember(t, backend);
      const netA = new Network();
      const netB = new Network();
      const a = await device(s.url, owner, b.id, { fetch: netA.fetch });
      const c = await device(s.url, other, b.id, { fetch: netB.fetch });
      t.after(() => Promise.all([a.close(), c.close()]));

      const rec = randomUUID();
      await a.put('customers', rec, { name: 'Ann', phone: '1' });
      await a.sync();
      await c.sync();

      netA.offline = true;
      netB.offline = true;
      const statesA: SyncState[] = [];
      a.on('state', (st) => statesA.push(st));
      await a.put('customers', rec, { name: 'Ann', phone: '2' });
      await c.put('customers', rec, { name: 'Anne', phone: '1' });
      await assert.rejects(a.sync(), (e: unknown) => e instanceof SyncClientError && e.code === 'network');
      assert.deepEqual(statesA, ['syncing', 'offline']);
      assert.equal(a.pendingChanges, 1, 'the offline edit waits in the outbox');

      netA.offline = false;
      netB.offline = false;
      await a.sync();
      const seen: ConflictView[] = [];
      c.on('conflict', (v) => seen.push(v));
      await c.sync();

      assert.equal(seen.length, 1);
      const [conflict] = await c.conflicts();
      assert.ok(conflict);
      assert.deepEqual(conflict.local, { name: 'Anne', phone: '1' });
      assert.deepEqual(conflict.remote, { name: 'Ann', phone: '2' });
      assert.deepEqual(conflict.base, { name: 'Ann', phone: '1' });
      assert.equal(conflict.conflict.resolution, 'pending');
      assert.deepEqual(await c.get('customers', rec), { name: 'Anne', phone: '1' }, 'the device keeps showing its edit until resolved');
      assert.equal((await c.status()).pending_conflicts, 1);

      await c.resolveConflict(conflict.id, 'local');
      assert.deepEqual(await c.conflicts(), []);
      await a.sync();
      assert.deepEqual(await a.get('customers', rec), { name: 'Anne', phone: '1' });
      assert.deepEqual(await c.get('customers', rec), { name: 'Anne', phone: '1' });
      assert.deepEqual(await a.list('customers'), await c.list('customers'));
      assert.equal((await c.status()).pending_conflicts, 0);

      // Both devices continue the same numbering: a new edit on either applies without conflict.
      await a.put('customers', rec, { name: 'Anne', phone: '3' });
      await a.sync();
      await c.sync();
      assert.deepEqual(await c.get('customers', rec), { name: 'Anne', phone: '3' });
      assert.deepEqual(await c.conflicts(), []);
    });

    test(`on ${backend}: resolving remote drops the local side, edits made while conflicted included; both converge on the server's record`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const a = await open();
      const c = await open();
      const rec = randomUUID();
      await a.put('notes', rec, { text: 'v1' });
      await a.sync();
      await c.sync();
      await a.put('notes', rec, { text: 'from a' });
      await c.put('notes', rec, { text: 'from c' });
      await a.sync();
      await c.sync();
      const [conflict] = await c.conflicts();
      assert.ok(conflict);
      await c.put('notes', rec, { text: 'from c, edited again while conflicted' });
      await c.sync();
      assert.equal(c.pendingChanges, 1, 'an edit of a conflicted record is held until the conflict is resolved');

      const reverts: unknown[] = [];
      c.on('change', (e) => { if (e.origin === 'revert') reverts.push(e.data); });
      await c.resolveConflict(conflict.id, 'remote');
      assert.deepEqual(reverts, [{ text: 'from a' }], 'the app hears that the record went back to the server side');
      await c.sync();
      await a.sync();
      assert.deepEqual(await c.get('notes', rec), { text: 'from a' });
      assert.deepEqual(await a.get('notes', rec), { text: 'from a' });
      assert.equal(c.pendingChanges, 0);
    });

    test(`on ${backend}: a conflict the server no longer has (resolved elsewhere, then removed by its cleanup) is settled by the choice on this device`, async (t) => {
      const { s, u, b, open } = await oneBusiness(t, backend);
      const a = await open();
      const c = await open();
      const kept = await conflicted(a, c);
      const { rec } = await conflicted(a, c);
      const dropped = { rec, conflict: (await c.conflicts()).find((v) => v.uuid === rec)! };
      for (const { conflict } of [kept, dropped]) {
        const r = await call(s.url, 'POST', `/api/sync/conflicts/${conflict.id}/resolve`, { token: u.token, headers: { 'x-business-id': b.id }, json: { resolution: 'remote' } });
        assert.equal(r.status, 200);
      }
      const rules = syncExpiryRules(s.deps.config).filter((r) => r.name === 'resolved_conflicts');
      assert.deepEqual(await runExpiryCleanup(s.deps.database, rules, Date.now() + 31 * 86_400_000), { resolved_conflicts: 2 });
      await c.put('notes', kept.rec, { text: 'from c, later' });

      await c.resolveConflict(kept.conflict.id, 'local');
      await c.resolveConflict(dropped.conflict.id, 'remote');
      assert.deepEqual(await c.conflicts(), []);
      await c.sync();
      await a.sync();
      assert.deepEqual(await a.get('notes', kept.rec), { text: 'from c, later' }, 'local: the device\'s side is pushed again');
      assert.deepEqual(await c.get('notes', kept.rec), { text: 'from c, later' });
      assert.deepEqual(await c.get('notes', dropped.rec), { text: 'from a' }, 'remote: the device shows the server\'s side');
      assert.deepEqual(await a.get('notes', dropped.rec), { text: 'from a' });
      assert.equal(c.pendingChanges, 0);
    });

    test(`on ${backend}: an edit made while conflicted is renumbered and pushed after a local resolution`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const a = await open();
      const c = await open();
      const rec = randomUUID();
      await a.put('notes', rec, { text: 'v1' });
      await a.sync();
      await c.sync();
      await a.put('notes', rec, { text: 'from a' });
      await c.put('notes', rec, { text: 'from c' });
      await a.sync();
      await c.sync();
      const [conflict] = await c.conflicts();
      assert.ok(conflict);
      await c.put('notes', rec, { text: 'from c, later' });
      await c.resolveConflict(conflict.id, 'local');
      await c.sync();
      await a.sync();
      assert.deepEqual(await a.get('notes', rec), { text: 'from c, later' });
      assert.deepEqual(await c.get('notes', rec), { text: 'from c, later' });
      assert.equal(c.pendingChanges, 0);
      assert.deepEqual(await c.conflicts(), []);
    });

    test(`on ${backend}: a sync round running while a local resolution waits for its pull does not push the held edit with its old number`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      let slowPulls = false;
      // An ordinary slow network: each pull takes 150 ms while the resolution runs.
      const slow = async (input: string | URL | Request, init?: RequestInit) => {
        if (slowPulls && String(input).endsWith('/api/sync/pull')) await new Promise((r) => setTimeout(r, 150));
        return fetch(input, init);
      };
      const a = await open();
      const c = await open({ fetch: slow });
      const errors: string[] = [];
      c.on('error', (e) => errors.push(`${e.code}: ${e.message}`));
      const { rec, conflict } = await conflicted(a, c);
      await c.put('notes', rec, { text: 'from c, later' });
      slowPulls = true;
      // A background round (a feed message, a kick) starts, then the app resolves while its pull is slow.
      const round = c.sync();
      await c.resolveConflict(conflict.id, 'local');
      await round;
      slowPulls = false;
      await c.sync();
      await a.sync();
      assert.deepEqual(errors, [], 'no push of the held edit was refused');
      assert.deepEqual(await a.get('notes', rec), { text: 'from c, later' }, 'the edit made while conflicted reached the server');
      assert.deepEqual(await c.get('notes', rec), { text: 'from c, later' });
      assert.equal(c.pendingChanges, 0);
    });

    test(`on ${backend}: an edit made while conflicted keeps the conflict's base, so a field merge keeps the other device's change`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const a = await open();
      const c = await open();
      const rec = randomUUID();
      await conflictOn(a, c, rec, { name: 'Ann', phone: '111' }, { name: 'Ann', phone: '222' }, { name: 'Bob', phone: '111' });
      const [before] = await c.conflicts();
      assert.deepEqual(fieldMerge(before!), { merged: { name: 'Bob', phone: '222' } });
      await c.put('customers', rec, { name: 'Bob', phone: '111', note: 'x' });
      const [after] = await c.conflicts();
      assert.deepEqual(after!.base, { name: 'Ann', phone: '111' }, 'the base is still what this device started from');
      assert.deepEqual(after!.local, { name: 'Bob', phone: '111', note: 'x' }, 'the local side is the latest edit');
      assert.deepEqual(fieldMerge(after!), { merged: { name: 'Bob', phone: '222', note: 'x' } }, 'the other device\'s phone is kept, and so is the later edit');
    });

    test(`on ${backend}: every conflict of a push is announced, and one whose automatic resolution failed is offered again next round`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      let resolvesFail = true;
      const flaky = async (input: string | URL | Request, init?: RequestInit) => {
        if (resolvesFail && /\/api\/sync\/conflicts\/\d+\/resolve$/.test(new URL(String(input)).pathname)) throw new TypeError('fetch failed (offline)');
        return fetch(input, init);
      };
      const a = await open();
      const offered: number[] = [];
      const c = await open({ fetch: flaky, resolver: (v) => { offered.push(v.id); return 'remote'; } });
      const events: number[] = [];
      const errors: string[] = [];
      c.on('conflict', (v) => events.push(v.id));
      c.on('error', (e) => errors.push(e.code));
      const [r1, r2] = [randomUUID(), randomUUID()];
      for (const r of [r1, r2]) await a.put('notes', r, { text: 'v1' });
      await a.sync();
      await c.sync();
      for (const r of [r1, r2]) await a.put('notes', r, { text: 'from a' });
      await a.sync();
      for (const r of [r1, r2]) await c.put('notes', r, { text: 'from c' });
      await c.sync();
      assert.equal(events.length, 2, 'both conflicts announced, though resolving the first failed');
      assert.deepEqual(offered, events, 'and both offered to the resolver');
      assert.deepEqual(errors, ['network', 'network']);
      assert.deepEqual((await c.conflicts()).map((v) => v.id), events, 'still pending');
      resolvesFail = false;
      await c.sync();
      assert.deepEqual(await c.conflicts(), [], 'offered again and resolved in the next round');
      assert.deepEqual(offered, [...events, ...events]);
      for (const r of [r1, r2]) assert.deepEqual(await c.get('notes', r), { text: 'from a' });
    });

    test(`on ${backend}: a local resolution whose pull fails keeps the held edit, renumbered and pushed by the next round`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const { a, c, rec, pullsBack } = await localResolutionWithoutItsPull(open);
      assert.deepEqual(await c.conflicts(), [], 'the server resolved it');
      assert.equal(c.pendingChanges, 1, 'the edit made while conflicted is still queued');
      pullsBack();
      await c.sync();
      await a.sync();
      assert.equal(c.pendingChanges, 0);
      assert.deepEqual(await a.get('notes', rec), { text: 'from c, later' }, 'pushed above the resolution\'s version, not refused');
      assert.deepEqual(await c.get('notes', rec), { text: 'from c, later' });
      assert.deepEqual(await c.conflicts(), []);
    });

    test(`on ${backend}: a held edit numbered after a local resolution meets another device's later edit as a conflict, not overwriting it`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const { a, c, rec, pullsBack } = await localResolutionWithoutItsPull(open);
      await a.sync();
      assert.deepEqual(await a.get('notes', rec), { text: 'from c' });
      await a.put('notes', rec, { text: 'a, after seeing c win' });
      await a.sync();
      pullsBack();
      await c.sync();
      const [again] = await c.conflicts();
      assert.ok(again, 'the held edit conflicts with the edit a made on top of the resolution');
      assert.deepEqual(again.remote, { text: 'a, after seeing c win' });
      assert.deepEqual(again.local, { text: 'from c, later' });
    });

    test(`on ${backend}: an edit held by a local resolution is renumbered by the next run when this one stopped before its pull`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const store = createMemoryStore();
      const { a, c: first, rec } = await localResolutionWithoutItsPull(open, { store });
      await first.close();

      const next = await open({ store });
      const errors: string[] = [];
      next.on('error', (e) => errors.push(`${e.code}: ${e.message}`));
      await next.sync();
      await a.sync();
      assert.deepEqual(errors, []);
      assert.deepEqual(await next.conflicts(), [], 'no new conflict against its own resolution');
      assert.equal(next.pendingChanges, 0);
      assert.deepEqual(await a.get('notes', rec), { text: 'from c, later' });
    });

    test(`on ${backend}: a conflict left pending by an earlier run is offered to the resolver of the next run in its first round`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const store = createMemoryStore();
      const a = await open();
      const first = await open({ store });
      const { rec, conflict } = await conflicted(a, first);
      await first.close();

      const offered: number[] = [];
      const next = await open({ store, resolver: (v) => { offered.push(v.id); return 'remote'; } });
      assert.deepEqual((await next.conflicts()).map((v) => v.id), [conflict.id], 'the conflict survived the restart');
      await next.sync();
      assert.deepEqual(offered, [conflict.id]);
      assert.deepEqual(await next.conflicts(), []);
      assert.deepEqual(await next.get('notes', rec), { text: 'from a' });
    });

    test(`on ${backend}: close() while the resolver waits for its user returns at once; the round rejects with closed and the conflict is offered again to the next run`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const store = createMemoryStore();
      const a = await open();
      let offered!: () => void;
      const wasOffered = new Promise<void>((r) => { offered = r; });
      let decide!: (c: 'local' | undefined) => void;
      // The user answers only after close() would have waited 5 s for them.
      const c = await open({ store, resolver: () => { offered(); return new Promise((r) => { decide = r; }); } });
      const rec = randomUUID();
      await a.put('notes', rec, { text: 'v1' });
      await a.sync();
      await c.sync();
      await a.put('notes', rec, { text: 'from a' });
      await a.sync();
      await c.put('notes', rec, { text: 'from c' });
      const round = c.sync().then(() => 'resolved', (e: unknown) => e);
      await wasOffered;
      const timer = setTimeout(() => decide('local'), 5_000);
      t.after(() => clearTimeout(timer));
      const started = Date.now();
      await c.close();
      assert.ok(Date.now() - started < 2_000, `close() took ${Date.now() - started} ms: it waited for the resolver`);
      const r = await round;
      assert.ok(r instanceof SyncClientError && r.code === 'closed', String(r));
      decide('local');
      const again: number[] = [];
      const next = await open({ store, resolver: (v) => { again.push(v.id); return 'remote'; } });
      await next.sync();
      assert.equal(again.length, 1, 'the conflict was offered again');
      assert.deepEqual(await next.get('notes', rec), { text: 'from a' });
    });

    test(`on ${backend}: an edit made while the conflicting push is out is shown to the resolver and kept (field merge, last writer wins)`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      for (const resolver of [fieldMerge, lastWriterWins]) {
        // The push waits at a gate, so the user's edit lands while it is out, as on a slow network.
        let gate: Promise<void> | null = null;
        let pushOut = () => {};
        const gated = async (input: string | URL | Request, init?: RequestInit) => {
          if (gate && new URL(String(input)).pathname === '/api/sync/push') { pushOut(); await gate; }
          return fetch(input, init);
        };
        const a = await open();
        const c = await open({ resolver, fetch: gated });
        const offered: ConflictView[] = [];
        c.on('conflict', (v) => offered.push(v));
        const rec = await divergedCustomer(a, c);
        let release = () => {};
        gate = new Promise((r) => { release = r; });
        const out = new Promise<void>((r) => { pushOut = r; });
        const round = c.sync();
        await out;
        await c.put('customers', rec, { name: 'Bob', phone: '111', email: 'bob@x' });
        gate = null;
        release();
        await round;
        await c.sync();
        await a.sync();
        assert.deepEqual(offered[0]?.local, { name: 'Bob', phone: '111', email: 'bob@x' }, 'the resolver sees the latest local state');
        const expected = resolver === fieldMerge ? { name: 'Bob', phone: '222', email: 'bob@x' } : { name: 'Bob', phone: '111', email: 'bob@x' };
        assert.deepEqual(await c.get('customers', rec), expected);
        assert.deepEqual(await a.get('customers', rec), expected);
        assert.equal(c.pendingChanges, 0);
      }
    });

    test(`on ${backend}: an edit made while a conflict waits for a failed automatic resolution is merged, not dropped`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      let resolvesFail = true;
      const flaky = async (input: string | URL | Request, init?: RequestInit) => {
        if (resolvesFail && /\/resolve$/.test(new URL(String(input)).pathname)) throw new TypeError('fetch failed (offline)');
        return fetch(input, init);
      };
      const a = await open();
      const c = await open({ resolver: fieldMerge, fetch: flaky });
      const rec = await divergedCustomer(a, c);
      await c.sync();
      assert.equal((await c.conflicts()).length, 1);
      await c.put('customers', rec, { name: 'Bob', phone: '111', email: 'bob@x' });
      resolvesFail = false;
      await c.sync();
      await a.sync();
      assert.deepEqual(await c.get('customers', rec), { name: 'Bob', phone: '222', email: 'bob@x' });
      assert.deepEqual(await a.get('customers', rec), { name: 'Bob', phone: '222', email: 'bob@x' });
      assert.equal(c.pendingChanges, 0);
    });

    test(`on ${backend}: a resolver callback settles conflicts automatically (field merge, last writer wins)`, async (t) => {
      const { s, u, b, open } = await oneBusiness(t, backend);
      const a = await open();
      const merger = await open({ resolver: fieldMerge });
      const lww = await open({ resolver: lastWriterWins });
      const r1 = randomUUID();
      const r2 = randomUUID();
      await a.put('customers', r1, { name: 'Ann', phone: '1', city: 'Perth' });
      await a.put('customers', r2, { name: 'Bob' });
      await a.sync();
      await merger.sync();
      await lww.sync();

      // Field merge: a changes the phone, the merger changes the name; both changes survive.
      await merger.put('customers', r1, { name: 'Anne', phone: '1', city: 'Perth' });
      await a.put('customers', r1, { name: 'Ann', phone: '2', city: 'Perth' });
      await a.sync();
      await merger.sync();
      await a.sync();
      assert.deepEqual(await merger.get('customers', r1), { name: 'Anne', phone: '2', city: 'Perth' });
      assert.deepEqual(await a.get('customers', r1), { name: 'Anne', phone: '2', city: 'Perth' });
      assert.deepEqual(await merger.conflicts(), []);

      // Last writer wins: lww edits first, a edits later and syncs first; the remote (later) edit wins.
      await lww.put('customers', r2, { name: 'Bobby (earlier)' });
      await new Promise((r) => setTimeout(r, 20));
      await a.put('customers', r2, { name: 'Robert (later)' });
      await a.sync();
      await lww.sync();
      await a.sync();
      assert.deepEqual(await lww.get('customers', r2), { name: 'Robert (later)' });
      assert.deepEqual(await a.get('customers', r2), { name: 'Robert (later)' });
      assert.equal((await a.status()).pending_conflicts, 0);
      const resolved = await call(s.url, 'GET', '/api/sync/conflicts?status=resolved', { token: u.token, headers: { 'x-business-id': b.id } });
      assert.deepEqual(resolved.body.map((c: { record_uuid: string; resolution: string }) => [c.record_uuid, c.resolution]), [[r1, 'remote'], [r2, 'remote']],
        'the merge keeps the server side and pushes the merged record on top; last writer wins kept the later remote edit');
    });
  }
});

test('a resolution the local store refuses to record (the device\'s storage full) leaves the conflict pending on the device; resolving again follows the server and converges', async (t) => {
  const { open } = await oneBusiness(t, 'sqlite');
  const inner = createMemoryStore();
  let refuse = false;
  // The write that records a resolution is the one that takes the conflict out of the store.
  const store = refusingStore(inner, (ops) => refuse && ops.some((o) => o.op === 'delete' && o.collection === 'conflicts') && !(refuse = false));
  const a = await open();
  const c = await open({ store });
  const rec = randomUUID();
  await conflictOn(a, c, rec, { name: 'Ann', phone: '1' }, { name: 'Ann', phone: '2' }, { name: 'Anne', phone: '1' });
  const [conflict] = await c.conflicts();
  assert.ok(conflict, 'the later push got the conflict');

  refuse = true;
  await assert.rejects(c.resolveConflict(conflict.id, 'local'), (e: unknown) => e instanceof SyncClientError && e.code === 'local_store');
  assert.deepEqual((await c.conflicts()).map((v) => v.id), [conflict.id], 'still pending here, as the store has it');
  assert.equal(c.pendingChanges, 0, 'nothing queued by the refused resolution');

  await c.resolveConflict(conflict.id, 'local');
  assert.deepEqual(await c.conflicts(), []);
  await c.sync();
  await a.sync();
  assert.deepEqual(await a.get('customers', rec), { name: 'Anne', phone: '1' });
  assert.deepEqual(await c.get('customers', rec), { name: 'Anne', phone: '1' });
  // The same store opened again agrees with memory: no conflict, nothing queued.
  await c.close();
  const again = await open({ store: inner });
  assert.deepEqual(await again.conflicts(), []);
  assert.equal(again.pendingChanges, 0);
});
