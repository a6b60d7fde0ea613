import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { BACKENDS } from '../helpers/backends.js';
import { addMember, newBusiness, newUser, startSync } from '../helpers/sync.js';
import { call } from '../helpers/http.js';
import { createMemoryStore, type FeedSocket, type FeedSocketConstructor, type SyncState } from '../../src/client/index.js';
import { device, Network, oneBusiness, ownerAndMember, refusingStore, until } from './client-fixtures.js';

/**
 * The `ws` WebSocket with the messages `drop` picks left out, as a message lost between the service and the device;
 * `socket` numbers the sockets made, from 1. The codes the client closes them with go to `closes`.
 */
function lossyWebSocket(drop: (message: { type: string; version?: number }, socket: number) => boolean, closes: number[] = []): FeedSocketConstructor {
  let made = 0;
  return class {
    private readonly inner: WebSocket;
    onopen: FeedSocket['onopen'] = null;
    onmessage: FeedSocket['onmessage'] = null;
    onclose: FeedSocket['onclose'] = null;
    onerror: FeedSocket['onerror'] = null;
    constructor(url: string) {
      const n = ++made;
      this.inner = new WebSocket(url);
      this.inner.onopen = (ev) => this.onopen?.(ev);
      this.inner.onclose = (ev) => this.onclose?.(ev);
      this.inner.onerror = (ev) => this.onerror?.(ev);
      this.inner.onmessage = (ev) => { if (!drop(JSON.parse(String(ev.data)) as { type: string; version?: number }, n)) this.onmessage?.(ev); };
    }
    close(code?: number): void {
      closes.push(code ?? 1000);
      this.inner.close(code);
    }
  };
}

/**
 * Waits for a started device's first two pulls: its first round's, and the one on the feed's `ready` (a change made
 * before the subscription was in place is not missed), which the one-round-a-second bound puts a second later.
 */
async function settled(net: Network): Promise<void> {
  const end = Date.now() + 5_000;
  while (net.count('/api/sync/pull') < 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 100));
}

describe('sync client: live feed', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    test(`on ${backend}: steady editing costs about one push a second and no pulls; another device applies the changes from the feed without asking`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const netA = new Network();
      const netB = new Network();
      const a = await open({ fetch: netA.fetch });
      const b = await open({ fetch: netB.fetch });
      const heard: unknown[] = [];
      b.on('change', (c) => heard.push(c.data));
      a.start();
      b.start();
      await until(() => a.syncState === 'up-to-date' && b.syncState === 'up-to-date', 10_000, 'both to connect');
      await Promise.all([settled(netA), settled(netB)]);
      const [callsA, callsB] = [netA.calls.length, netB.calls.length];
      const id = randomUUID();
      const t0 = Date.now();
      // 20 edits of one note over 4 s, as typing with autosave: before, 80 requests of A's (a pull, a push, a pull
      // after it and one more round for the feed's echo of its own push) and 20 pulls of B's, against a rate limit of 100 a minute.
      for (let i = 0; i < 20; i++) {
        await a.put('notes', id, { text: `draft ${i}` });
        await new Promise((r) => setTimeout(r, 200));
      }
      const seconds = (Date.now() - t0) / 1000;
      await until(async () => a.pendingChanges === 0 && JSON.stringify(await b.get('notes', id)) === JSON.stringify({ text: 'draft 19' }), 10_000, 'B to have the last edit');
      await until(() => b.pulledVersion === a.pulledVersion, 5_000, 'B at A\'s version');
      const sentA = netA.calls.slice(callsA);
      const sentB = netB.calls.slice(callsB);
      // At most one round a second while editing (the first at once), and the last edit's.
      assert.ok(sentA.length <= Math.ceil(seconds) + 2 && sentA.every((p) => p === '/api/sync/push'), `A sent ${sentA.join(', ')} in ${seconds.toFixed(1)} s`);
      assert.deepEqual(sentB, [], 'B applied every change from the feed');
      assert.deepEqual(heard.at(-1), { text: 'draft 19' });
      assert.ok(heard.length === sentA.length, `B heard each pushed version once: ${heard.length} changes for ${sentA.length} pushes`);
    });

    test(`on ${backend}: a feed message lost on the way: the next one shows the gap, and one pull brings both, each applied once; a change too large to carry is pulled`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const writer = await open();
      const net = new Network();
      let lose = 0;
      const watcher = await open({ fetch: net.fetch, WebSocket: lossyWebSocket((m) => m.version === lose) });
      const applied = new Map<string, number>();
      watcher.on('change', (e) => applied.set(e.uuid, (applied.get(e.uuid) ?? 0) + 1));
      watcher.start();
      await until(() => watcher.syncState === 'up-to-date', 10_000, 'the watcher to connect');
      await settled(net);
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      await writer.put('orders', ids[0]!, { n: 0 });
      await writer.sync();
      await until(() => watcher.pulledVersion === 1, 5_000, 'version 1 from the feed');
      const pullsBefore = net.count('/api/sync/pull');
      lose = 2;
      await writer.put('orders', ids[1]!, { n: 1 });
      await writer.sync();
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(watcher.pulledVersion, 1, 'version 2 never came');
      await writer.put('orders', ids[2]!, { n: 2 });
      await writer.sync();
      await until(() => watcher.pulledVersion === 3, 5_000, 'the gap pulled');
      assert.equal(net.count('/api/sync/pull'), pullsBefore + 1);
      // A change too large for a feed message to carry comes as a hint: one more pull brings it.
      ids.push(randomUUID());
      await writer.put('orders', ids[3]!, { text: 'x'.repeat(9_000) });
      await writer.sync();
      await until(() => watcher.pulledVersion === 4, 5_000, 'the large change pulled');
      assert.equal(net.count('/api/sync/pull'), pullsBefore + 2);
      assert.deepEqual([...applied.entries()].sort(), ids.map((id) => [id, 1]).sort());
    });

    test(`on ${backend}: the last message of a burst lost on the way (no later one shows the gap) is pulled by the safety pull, and nothing is asked before it`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const writer = await open();
      const net = new Network();
      const safetyPullMs = 4_000;
      const watcher = await open({ fetch: net.fetch, WebSocket: lossyWebSocket((m) => m.version === 2), safetyPullMs });
      watcher.start();
      await until(() => watcher.syncState === 'up-to-date', 10_000, 'the watcher to connect');
      await settled(net);
      await writer.put('orders', randomUUID(), { n: 0 });
      await writer.sync();
      await until(() => watcher.pulledVersion === 1, 5_000, 'version 1 from the feed');
      // A pull now: the safety pull is due safetyPullMs after it, not sooner.
      const pulledAt = Date.now();
      await watcher.sync();
      const pullsBefore = net.count('/api/sync/pull');
      const lost = randomUUID();
      await writer.put('orders', lost, { n: 1 });
      await writer.sync();
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(watcher.pulledVersion, 1, 'version 2 never came over the feed');
      // safetyPullMs after the last pull, checked every quarter of it.
      await until(() => watcher.pulledVersion === 2, safetyPullMs + 3_000, 'the safety pull');
      assert.ok(Date.now() - pulledAt >= safetyPullMs, 'not before safetyPullMs');
      assert.deepEqual(await watcher.get('orders', lost), { n: 1 });
      assert.equal(net.count('/api/sync/pull'), pullsBefore + 1, 'one pull brought it');
      assert.deepEqual(net.calls.slice(-1), ['/api/sync/pull'], 'nothing but that pull');
    });

    test(`on ${backend}: a pull the feed made due (a gap) that fails (503) is made again by the retried round, not left to the safety pull`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const writer = await open();
      const net = new Network();
      let unavailable = false;
      const fetchPulls = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        if (unavailable && new URL(String(input)).pathname === '/api/sync/pull') {
          unavailable = false;
          return Promise.resolve(Response.json({ error: 'unavailable', details: 'database fail-over' }, { status: 503 }));
        }
        return net.fetch(input, init);
      };
      const watcher = await open({ fetch: fetchPulls, WebSocket: lossyWebSocket((m) => m.version === 2) });
      const errors: string[] = [];
      watcher.on('error', (e) => errors.push(e.code));
      watcher.start();
      await until(() => watcher.syncState === 'up-to-date', 10_000, 'the watcher to connect');
      await settled(net);
      await writer.put('orders', randomUUID(), { n: 0 });
      await writer.sync();
      await until(() => watcher.pulledVersion === 1, 5_000, 'version 1 from the feed');
      await writer.put('orders', randomUUID(), { n: 1 });
      await writer.sync();
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(watcher.pulledVersion, 1, 'version 2 never came over the feed');
      const pullsBefore = net.count('/api/sync/pull');
      unavailable = true;
      await writer.put('orders', randomUUID(), { n: 2 });
      await writer.sync();
      // Before, the retried round (20-200 ms later) did not pull: the gap waited for the safety pull, 60 s away.
      await until(() => watcher.pulledVersion === 3, 5_000, 'the gap pulled by the retried round');
      assert.deepEqual(errors, ['unavailable']);
      assert.equal(net.count('/api/sync/pull'), pullsBefore + 1, 'one pull after the refused one brought both');
    });

    test(`on ${backend}: a feed message the local store refuses to apply (storage full) is reported and pulled by the retried round, applied once`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const writer = await open();
      const net = new Network();
      let refuse = false;
      const store = refusingStore(createMemoryStore(), (ops) => refuse && ops.some((o) => o.op === 'put' && o.collection === 'records') && !(refuse = false));
      const watcher = await open({ fetch: net.fetch, store });
      const errors: string[] = [];
      const applied: string[] = [];
      watcher.on('error', (e) => errors.push(`${e.code}: ${e.message}`));
      watcher.on('change', (e) => applied.push(e.uuid));
      watcher.start();
      await until(() => watcher.syncState === 'up-to-date', 10_000, 'the watcher to connect');
      await settled(net);
      const pullsBefore = net.count('/api/sync/pull');
      const id = randomUUID();
      refuse = true;
      await writer.put('orders', id, { n: 1 });
      await writer.sync();
      await until(() => watcher.pulledVersion === 1, 5_000, 'the change, pulled after the refusal');
      assert.equal(refuse, false, 'the store refused the feed message\'s write');
      assert.deepEqual(errors, ['local_store: the local store failed: QuotaExceededError: the quota has been exceeded']);
      assert.deepEqual(await watcher.get('orders', id), { n: 1 });
      assert.deepEqual(applied, [id], 'applied once');
      assert.equal(net.count('/api/sync/pull'), pullsBefore + 1);
    });

    test(`on ${backend}: the feed drops and reconnects during a burst of pushes, and every change is applied exactly once`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const writer = await open();
      // Rounds at once after each reconnect (not one a second), so every drop is seen as a state change.
      const watcher = await open({ minRoundIntervalMs: 0 });

      const applied = new Map<string, number>();
      watcher.on('change', (e) => applied.set(e.uuid, (applied.get(e.uuid) ?? 0) + 1));
      const states: SyncState[] = [];
      watcher.on('state', (st) => states.push(st));
      watcher.start();
      await until(() => watcher.syncState === 'up-to-date', 10_000, 'the watcher to connect');

      const ids: string[] = [];
      for (let push = 0; push < 30; push++) {
        for (let i = 0; i < 10; i++) {
          const id = randomUUID();
          ids.push(id);
          await writer.put('orders', id, { push, i });
        }
        await writer.sync();
        // Drop the socket every few pushes, while changes keep coming.
        if (push % 7 === 3) watcher.dropFeed();
      }
      const { server_version } = await writer.status();
      assert.equal(server_version, 300);
      await until(() => watcher.pulledVersion === server_version && watcher.syncState === 'up-to-date', 15_000, 'the watcher to catch up');

      assert.equal(applied.size, 300);
      assert.ok([...applied.values()].every((n) => n === 1), 'no change applied twice');
      assert.deepEqual((await watcher.list('orders')).map((r) => r.uuid).sort(), ids.sort());
      assert.ok(states.filter((st) => st === 'offline').length >= 4, `went offline at each drop: ${states.join(',')}`);
    });

    test(`on ${backend}: a started client pushes local writes by itself and hears other devices within moments`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      const a = await open();
      const c = await open();
      a.start();
      c.start();
      const rec = randomUUID();
      await a.put('customers', rec, { name: 'Live' });
      await until(async () => (await c.get('customers', rec)) !== null, 10_000, 'the record to reach the other device');
      assert.deepEqual(await c.get('customers', rec), { name: 'Live' });
      await until(() => a.pendingChanges === 0, 5000, 'the outbox to drain');
    });

    test(`on ${backend}: a background push refused with 429 past the client's own waits is tried again after its retry_after, not left for the next write`, async (t) => {
      const { open } = await oneBusiness(t, backend);
      let refusedAt = 0;
      let retriedAt = 0;
      let pushes = 0;
      // The server's first answer to a push is a 429 asking for 1 s; the client makes no wait of its own (no retries).
      const limited = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
        const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
        if (url.pathname === '/api/sync/push' && pushes++ === 0) {
          refusedAt = Date.now();
          return new Response(JSON.stringify({ error: 'rate_limited', details: 'too many requests', retry_after: 1 }), { status: 429, headers: { 'content-type': 'application/json', 'retry-after': '1' } });
        }
        if (url.pathname === '/api/sync/push' && !retriedAt) retriedAt = Date.now();
        return fetch(input, init);
      };
      const a = await open({ fetch: limited, maxRateLimitRetries: 0, safetyPullMs: 3_600_000 });
      const errors: string[] = [];
      a.on('error', (e) => errors.push(e.code));
      a.start();
      // Connected and idle first: the feed's own catch-up round is not what makes the push again.
      await until(() => a.syncState === 'up-to-date', 10_000, 'the feed to connect');
      await a.put('customers', randomUUID(), { name: 'Later' });
      await until(() => a.pendingChanges === 0, 10_000, 'the refused push to be made again');
      assert.deepEqual(errors, ['rate_limited']);
      assert.equal(pushes, 2);
      assert.ok(retriedAt - refusedAt >= 1000, `made again ${retriedAt - refusedAt} ms later: not before the retry_after`);
    });

    test(`on ${backend}: a feed closed for an expired token (1008) reconnects with fresh tokens and keeps delivering`, async (t) => {
      const s = await startSync(backend, { feedHeartbeatMs: 100 });
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      const net = new Network();
      const watcher = await device(s.url, u, b.id, { fetch: net.fetch });
      const writer = await device(s.url, u, b.id);
      t.after(() => Promise.all([watcher.close(), writer.close()]));
      const states: SyncState[] = [];
      watcher.on('state', (st) => states.push(st));
      watcher.start();
      await until(() => watcher.syncState === 'up-to-date', 10_000, 'the watcher to connect');
      states.length = 0;
      s.clock.advance(16 * 60_000);
      await until(() => states.includes('offline') && watcher.syncState === 'up-to-date', 10_000, 'the feed to be closed and reconnected');
      assert.equal(net.count('/api/auth/refresh'), 1);
      const rec = randomUUID();
      await writer.put('customers', rec, { name: 'after the reconnect' });
      await writer.sync();
      await until(async () => (await watcher.get('customers', rec)) !== null, 10_000, 'the change to arrive over the new socket');
    });

    test(`on ${backend}: a feed connection gone silent (heartbeats stop, no close) is given up after 2.5 heartbeats and replaced; changes flow again without a sync()`, async (t) => {
      // 500 ms: the 1.25 s the client waits before giving a socket up outlasts a loaded machine's stalls, so a live socket is not given up too.
      const s = await startSync(backend, { feedHeartbeatMs: 500 });
      t.after(() => s.close());
      const u = await newUser(s);
      const b = await newBusiness(s, u);
      // The first socket hears its ready, then nothing more, and never closes: a NAT that forgot the connection.
      let made = 0;
      const closes: number[] = [];
      const ZombieFirst = lossyWebSocket((m, socket) => {
        made = Math.max(made, socket);
        return socket === 1 && m.type !== 'ready';
      }, closes);
      const watcher = await device(s.url, u, b.id, { WebSocket: ZombieFirst });
      const writer = await device(s.url, u, b.id);
      t.after(() => Promise.all([watcher.close(), writer.close()]));
      watcher.start();
      await until(() => made === 2 && watcher.syncState === 'up-to-date', 10_000, 'the silent socket to be replaced');
      assert.deepEqual(closes, [4001]);
      const rec = randomUUID();
      await writer.put('customers', rec, { name: 'after the silence' });
      await writer.sync();
      await until(async () => (await watcher.get('customers', rec)) !== null, 10_000, 'the change to arrive over the new socket');
      assert.equal(made, 2, 'one replacement, no churn while heartbeats come');
    });

    test(`on ${backend}: a member removed while syncing in the background: the device stops (no refused retries every 30 s), says accessLost once, keeps its data; start() after being added again syncs`, async (t) => {
      const { s, owner, member, b } = await ownerAndMember(t, backend);
      const network = new Network();
      const d = await device(s.url, member, b.id, { fetch: network.fetch });
      t.after(() => d.close());
      const lost: string[] = [];
      d.on('accessLost', (e) => lost.push(e.code));
      const id = randomUUID();
      await d.put('orders', id, { n: 1 });
      d.start();
      await until(() => d.syncState === 'up-to-date' && d.pendingChanges === 0, 10_000, 'the device to sync');

      const removed = await call(s.url, 'DELETE', `/api/business/${b.id}/members/${member.id}`, { token: owner.token });
      assert.equal(removed.status, 204);
      // The server closes the feed (1008); the round that follows is refused.
      await until(() => lost.length > 0, 10_000, 'accessLost');
      assert.deepEqual(lost, ['forbidden']);
      assert.equal(d.syncState, 'offline');
      const calls = network.calls.length;
      await new Promise((r) => setTimeout(r, 1_500));
      assert.equal(network.calls.length, calls, 'no request after the refusal (the feed reconnects in 20-200 ms here)');
      assert.deepEqual(await d.get('orders', id), { n: 1 });

      await addMember(s, owner, b.id, member);
      const other = randomUUID();
      await call(s.url, 'POST', '/api/sync/push', { token: owner.token, headers: { 'x-business-id': b.id }, json: { business_id: b.id, instance_id: 'owner-1', changes: [{ table_name: 'orders', record_uuid: other, version: 1, operation: 'create', data: { n: 2 } }] } });
      d.start();
      await until(async () => (await d.get('orders', other)) !== null, 10_000, 'the device to sync again');
      assert.deepEqual(lost, ['forbidden']);
    });
  }
});
