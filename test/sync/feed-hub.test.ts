import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { createMemoryPubSub } from '../../src/core/pubsub/memory-pubsub.js';
import type { PubSub } from '../../src/core/pubsub/pubsub.js';
import { businessChannel, type ChangeBatch } from '../../src/sync/feed/change-events.js';
import { createFeedHub, NO_LONGER_AUTHORIZED, SLOW_CONSUMER, type FeedSocket } from '../../src/sync/feed/feed-hub.js';

/** A socket that records what the hub does to it; `bufferedAmount` is set by the test. */
class FakeSocket extends EventEmitter implements FeedSocket {
  bufferedAmount = 0;
  readyState = 1;
  /** Every message, in order. */
  all: string[] = [];
  /** The messages after the `ready` greeting. */
  get sent(): string[] { return this.all.filter((m) => !m.startsWith('{"type":"ready"')); }
  pings = 0;
  closedWith: number | undefined;
  terminated = false;
  send(data: Buffer, options: { binary: false }) {
    assert.equal(options.binary, false, 'feed messages are text frames');
    this.all.push(data.toString());
  }
  ping() { this.pings++; }
  close(code: number) { this.closedWith = code; }
  terminate() {
    this.terminated = true;
    this.readyState = 3;
    this.emit('close');
  }
}

const silent = { warn: () => undefined };
/** Credentials in these tests are plain labels; every one is still valid. */
const allowAll = async (_b: string, credentials: readonly string[]) => credentials.map(() => true);
const allowed = 'valid';
const NO_SPREAD = { heartbeatMs: 3_600_000, maxBufferedBytes: 1024, reauthSpreadMs: 0 };
const BIZ = '11111111-1111-4111-8111-111111111111';
const batch = (n: number): ChangeBatch => ({
  business_id: BIZ,
  events: Array.from({ length: n }, (_, i) => ({ table_name: 't', record_uuid: BIZ, version: i + 1, instance_id: 'd', operation: 'create' as const, record_version: 1, created_at: '2026-01-01T00:00:00.000Z', data: '{}' })),
});

test('a socket that does not answer a ping is dropped at the next heartbeat; one that answers stays', async (t) => {
  const hub = createFeedHub(createMemoryPubSub(), NO_SPREAD, silent, allowAll);
  t.after(() => hub.close());
  const live = new FakeSocket();
  const dead = new FakeSocket();
  await hub.add(BIZ, live, allowed);
  await hub.add(BIZ, dead, allowed);
  await hub.heartbeat();
  assert.deepEqual([live.pings, dead.pings], [1, 1]);
  live.emit('pong');
  await hub.heartbeat();
  assert.equal(dead.terminated, true);
  assert.equal(live.terminated, false);
  assert.equal(live.pings, 2);
  assert.equal(hub.size, 1);
});

test('a heartbeat pings a few hundred sockets per event-loop turn, so thousands of pings never stall other work', async (t) => {
  const hub = createFeedHub(createMemoryPubSub(), NO_SPREAD, silent, allowAll);
  t.after(() => hub.close());
  const sockets = Array.from({ length: 1000 }, () => new FakeSocket());
  for (const s of sockets) await hub.add(BIZ, s, allowed);
  const beat = hub.heartbeat();
  const pinged = () => sockets.filter((s) => s.pings === 1).length;
  const first = pinged();
  assert.ok(first > 0 && first < 1000, `the first turn pinged ${first}`);
  await beat;
  assert.equal(pinged(), 1000, 'every socket once');
  sockets[3]!.emit('close');
  for (const s of sockets) if (s !== sockets[7]) s.emit('pong');
  await hub.heartbeat();
  assert.deepEqual(sockets.filter((s) => s.terminated).map((s) => sockets.indexOf(s)), [7], 'only the socket that missed its ping is dropped');
  assert.equal(hub.size, 998);
});

test('a slow consumer is disconnected with 1013 instead of buffering without bound; others keep receiving', async (t) => {
  const pubsub = createMemoryPubSub();
  const hub = createFeedHub(pubsub, NO_SPREAD, silent, allowAll);
  t.after(() => hub.close());
  const slow = new FakeSocket();
  const fast = new FakeSocket();
  await hub.add(BIZ, slow, allowed);
  await hub.add(BIZ, fast, allowed);
  await pubsub.publish(businessChannel(BIZ), { unexpected: true });
  await pubsub.publish(businessChannel(BIZ), batch(2));
  assert.equal(slow.sent.length, 2, 'a malformed message is dropped, a batch is delivered');
  slow.bufferedAmount = 1025;
  await pubsub.publish(businessChannel(BIZ), batch(3));
  assert.equal(slow.sent.length, 2, 'nothing more is queued for it');
  assert.equal(slow.closedWith, SLOW_CONSUMER);
  assert.equal(slow.terminated, true);
  assert.equal(fast.sent.length, 5);
  assert.deepEqual(JSON.parse(fast.sent[4]!), { type: 'change', ...batch(3).events[2], data: {} }, 'the change with its stored data text written in');
});

test('one pub/sub subscription per business, dropped with its last socket', async (t) => {
  const inner = createMemoryPubSub();
  let active = 0;
  const counting: PubSub = {
    publish: (c, m) => inner.publish(c, m),
    async subscribe(c, fn) {
      active++;
      const off = await inner.subscribe(c, fn);
      return async () => { active--; await off(); };
    },
    close: () => inner.close(),
  };
  const hub = createFeedHub(counting, NO_SPREAD, silent, allowAll);
  t.after(() => hub.close());
  const a = new FakeSocket();
  const b = new FakeSocket();
  await hub.add(BIZ, a, allowed);
  await hub.add(BIZ, b, allowed);
  assert.equal(active, 1);
  a.emit('close');
  assert.equal(active, 1);
  b.emit('close');
  await new Promise((r) => setImmediate(r));
  assert.equal(active, 0);
  assert.equal(hub.size, 0);
});

const BIZ2 = '22222222-2222-4222-8222-222222222222';
const BIZ3 = '33333333-3333-4333-8333-333333333333';

test('at each heartbeat a socket whose credentials no longer grant the feed is closed with 1008; a failed check keeps the business\'s sockets', async (t) => {
  const warnings: unknown[] = [];
  const revoked = new Set<string>();
  let databaseAway = false;
  const hub = createFeedHub(createMemoryPubSub(), NO_SPREAD, { warn: (o) => warnings.push(o) }, async (businessId, credentials: readonly string[]) => {
    if (businessId === BIZ2 && databaseAway) throw new Error('database away');
    return credentials.map((c) => !revoked.has(c));
  });
  t.after(() => hub.close());
  const stays = new FakeSocket();
  const removed = new FakeSocket();
  const flaky = new FakeSocket();
  await hub.add(BIZ, stays, 'stays');
  await hub.add(BIZ, removed, 'removed');
  await hub.add(BIZ2, flaky, 'flaky');
  databaseAway = true;
  await hub.heartbeat();
  assert.equal(removed.closedWith, undefined);
  revoked.add('removed');
  revoked.add('flaky');
  for (const s of [stays, removed, flaky]) s.emit('pong');
  await hub.heartbeat();
  assert.equal(removed.closedWith, NO_LONGER_AUTHORIZED);
  assert.equal(stays.closedWith, undefined);
  assert.equal(flaky.closedWith, undefined);
  assert.equal(warnings.length, 2);
});

test('re-authorisation is one batched check per business per heartbeat, not one per socket', async (t) => {
  const calls: Array<[string, readonly string[]]> = [];
  const hub = createFeedHub(createMemoryPubSub(), NO_SPREAD, silent, async (businessId, credentials: readonly string[]) => {
    calls.push([businessId, credentials]);
    return credentials.map(() => true);
  });
  t.after(() => hub.close());
  for (let i = 0; i < 30; i++) await hub.add(i % 2 ? BIZ : BIZ2, new FakeSocket(), `socket-${i}`);
  assert.equal(calls.length, 30, 'each add checked its own socket');
  calls.length = 0;
  await hub.heartbeat();
  assert.equal(calls.length, 2);
  assert.deepEqual(new Set(calls.map(([b]) => b)), new Set([BIZ, BIZ2]));
  assert.equal(calls.reduce((n, [, c]) => n + c.length, 0), 30);
});

test('the checks of one heartbeat are spread over the spread time, one business after another', async (t) => {
  const started: number[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const hub = createFeedHub(createMemoryPubSub(), { ...NO_SPREAD, reauthSpreadMs: 300 }, silent, async (_b, credentials: readonly string[]) => {
    started.push(Date.now());
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    await new Promise((r) => setTimeout(r, 5));
    inFlight--;
    return credentials.map(() => true);
  });
  t.after(() => hub.close());
  for (const b of [BIZ, BIZ2, BIZ3]) await hub.add(b, new FakeSocket(), allowed);
  started.length = 0;
  await hub.heartbeat();
  assert.equal(started.length, 3);
  assert.equal(maxInFlight, 1, 'never two businesses at once');
  // Three businesses over 300 ms: each check starts at least ~100 ms after the previous one.
  for (let i = 1; i < 3; i++) assert.ok(started[i]! - started[i - 1]! >= 90, `gap ${started[i]! - started[i - 1]!} ms`);
});

test('a heartbeat never overlaps the previous one\'s checks: while they run, it pings but checks nothing', async (t) => {
  let calls = 0;
  let release!: () => void;
  const stuck = new Promise<void>((r) => { release = r; });
  let gate: Promise<void> = Promise.resolve();
  const hub = createFeedHub(createMemoryPubSub(), NO_SPREAD, silent, async (_b, credentials: readonly string[]) => {
    calls++;
    await gate;
    return credentials.map(() => true);
  });
  t.after(() => hub.close());
  const socket = new FakeSocket();
  await hub.add(BIZ, socket, allowed);
  // The heartbeats' checks get stuck, not the add's.
  gate = stuck;
  calls = 0;
  const first = hub.heartbeat();
  await new Promise((r) => setImmediate(r));
  socket.emit('pong');
  const second = hub.heartbeat();
  socket.emit('pong');
  const third = hub.heartbeat();
  await new Promise((r) => setImmediate(r));
  assert.equal(calls, 1, 'the later heartbeats did not start a second round of checks');
  assert.equal(socket.pings, 3, 'but they still pinged');
  release();
  await Promise.all([first, second, third]);
  socket.emit('pong');
  await hub.heartbeat();
  assert.equal(calls, 2, 'the next heartbeat after the round checks again');
});

test('an access change re-checks the business at once; batches that come meanwhile wait for it, and none reaches a socket it closed', async (t) => {
  const pubsub = createMemoryPubSub();
  let release!: () => void;
  const stuck = new Promise<void>((resolve) => { release = resolve; });
  let gate: Promise<void> = Promise.resolve();
  const revoked = new Set<string>();
  const checked: string[][] = [];
  // Once both sockets are in, 'removed' loses access and the check takes until the test releases it.
  const reauthorize = async (_b: string, credentials: readonly string[]) => {
    checked.push([...credentials]);
    await gate;
    return credentials.map((c) => !revoked.has(c));
  };
  const hub = createFeedHub(pubsub, NO_SPREAD, silent, reauthorize);
  t.after(() => hub.close());
  const stays = new FakeSocket();
  const goes = new FakeSocket();
  goes.close = (code: number) => { goes.closedWith = code; goes.readyState = 2; };
  await hub.add(BIZ, stays, allowed);
  await hub.add(BIZ, goes, 'removed');
  revoked.add('removed');
  gate = stuck;
  checked.length = 0;
  await pubsub.publish(businessChannel(BIZ), { business_id: BIZ, recheck: true });
  await pubsub.publish(businessChannel(BIZ), batch(2));
  await pubsub.publish(businessChannel(BIZ), { business_id: BIZ, recheck: true });
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(checked, [['valid', 'removed']], 'checked at once, not at a heartbeat; the second change waits for the first check');
  assert.deepEqual([stays.sent.length, goes.sent.length], [0, 0], 'the batch waits for the check');
  release();
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(checked.length, 2, 'the access change that came during the check was checked too');
  assert.equal(goes.closedWith, NO_LONGER_AUTHORIZED);
  assert.equal(goes.sent.length, 0, 'nothing reached the socket that lost access');
  assert.deepEqual(stays.sent.map((m) => JSON.parse(m).version), [1, 2], 'the held batch, in order, once checked');
  await pubsub.publish(businessChannel(BIZ), batch(1));
  assert.equal(stays.sent.length, 3, 'later batches go straight out again');
});

test('a new socket gets nothing until its own check, made once it is subscribed, has passed; a refused one is closed with 1008', async (t) => {
  const pubsub = createMemoryPubSub();
  const gates: Array<() => void> = [];
  const hub = createFeedHub(pubsub, NO_SPREAD, silent, async (_b, credentials: readonly string[]) => {
    await new Promise<void>((resolve) => gates.push(resolve));
    return credentials.map((c) => c !== 'removed');
  });
  t.after(() => hub.close());
  const stays = new FakeSocket();
  const goes = new FakeSocket();
  const adding = Promise.all([hub.add(BIZ, stays, allowed), hub.add(BIZ, goes, 'removed')]);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(gates.length, 2, 'both checks run with the subscription in place');
  await pubsub.publish(businessChannel(BIZ), batch(2));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual([stays.sent.length, goes.sent.length], [0, 0], 'the batch waits for the checks');
  gates.splice(0).forEach((pass) => pass());
  await adding;
  assert.equal(goes.closedWith, NO_LONGER_AUTHORIZED);
  assert.equal(goes.sent.length, 0, 'nothing reached the refused socket');
  assert.deepEqual(stays.sent.map((m) => JSON.parse(m).version), [1, 2], 'the held batch, in order, once checked');
  assert.deepEqual(stays.all.map((m) => JSON.parse(m).type), ['ready', 'change', 'change'], 'ready first, then what came meanwhile');
  assert.equal(JSON.parse(stays.all[0]!).heartbeat_ms, NO_SPREAD.heartbeatMs);
  assert.deepEqual(goes.all, [], 'the refused socket is never greeted');
});

test('a new socket whose first check fails is removed and the add rejects', async (t) => {
  const hub = createFeedHub(createMemoryPubSub(), NO_SPREAD, silent, async () => { throw new Error('database away'); });
  t.after(() => hub.close());
  await assert.rejects(hub.add(BIZ, new FakeSocket(), allowed), /database away/);
  assert.equal(hub.size, 0);
});

test('a heartbeat pings every socket and sends {"type":"heartbeat"} to those greeted, never to one still waiting for its first check', async (t) => {
  let gated = true;
  const gates: Array<() => void> = [];
  const hub = createFeedHub(createMemoryPubSub(), NO_SPREAD, silent, async (_b, credentials: readonly string[]) => {
    if (gated) await new Promise<void>((resolve) => gates.push(resolve));
    return credentials.map(() => true);
  });
  t.after(() => hub.close());
  const waiting = new FakeSocket();
  const adding = hub.add(BIZ, waiting, allowed);
  await new Promise((resolve) => setImmediate(resolve));
  const beat = hub.heartbeat();
  assert.equal(waiting.pings, 1);
  assert.deepEqual(waiting.all, [], 'nothing before ready');
  gated = false;
  gates.splice(0).forEach((pass) => pass());
  await adding;
  await beat;
  waiting.emit('pong');
  await hub.heartbeat();
  assert.deepEqual(waiting.all.map((m) => JSON.parse(m).type), ['ready', 'heartbeat']);
  assert.equal(waiting.pings, 2);
});

test('a hold (announced before an access change commits) holds the business\'s batches until its release has been checked; with two, until both are', async (t) => {
  const pubsub = createMemoryPubSub();
  const revoked = new Set<string>();
  let checks = 0;
  const hub = createFeedHub(pubsub, NO_SPREAD, silent, async (_b: string, credentials: readonly string[]) => { checks++; return credentials.map((c) => !revoked.has(c)); });
  t.after(() => hub.close());
  const stays = new FakeSocket();
  const goes = new FakeSocket();
  goes.close = (code: number) => { goes.closedWith = code; goes.readyState = 2; };
  await hub.add(BIZ, stays, allowed);
  await hub.add(BIZ, goes, 'removed');
  const settle = () => new Promise((resolve) => setTimeout(resolve, 10));
  checks = 0;
  await pubsub.publish(businessChannel(BIZ), { business_id: BIZ, hold: 'h1' });
  await pubsub.publish(businessChannel(BIZ), { business_id: BIZ, hold: 'h2' });
  await pubsub.publish(businessChannel(BIZ), batch(1));
  await settle();
  assert.deepEqual([stays.sent.length, goes.sent.length, checks], [0, 0, 0], 'held, and nothing checked before a release');
  revoked.add('removed');
  await pubsub.publish(businessChannel(BIZ), { business_id: BIZ, recheck: true, release: 'h1' });
  await settle();
  assert.equal(goes.closedWith, NO_LONGER_AUTHORIZED, 'the release re-checks at once');
  assert.equal(stays.sent.length, 0, 'still held: the other hold is not released');
  await pubsub.publish(businessChannel(BIZ), { business_id: BIZ, recheck: true, release: 'h2' });
  await settle();
  assert.equal(checks, 2);
  assert.equal(stays.sent.length, 1, 'sent once both are released and checked');
  assert.equal(goes.sent.length, 0, 'nothing reached the socket that lost access');
  await pubsub.publish(businessChannel(BIZ), batch(1));
  assert.equal(stays.sent.length, 2, 'later batches go straight out again');
});

test('a hold whose release never comes (its instance died) is given up after holdMaxMs: the business is checked and what was held is sent', async (t) => {
  const pubsub = createMemoryPubSub();
  let checks = 0;
  const hub = createFeedHub(pubsub, { ...NO_SPREAD, holdMaxMs: 200 }, silent, async (_b: string, credentials: readonly string[]) => { checks++; return credentials.map(() => true); });
  t.after(() => hub.close());
  const socket = new FakeSocket();
  await hub.add(BIZ, socket, allowed);
  checks = 0;
  const held = Date.now();
  await pubsub.publish(businessChannel(BIZ), { business_id: BIZ, hold: 'lost' });
  await pubsub.publish(businessChannel(BIZ), batch(2));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual([socket.sent.length, checks], [0, 0]);
  while (!socket.sent.length) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(Date.now() - held >= 200, 'not before holdMaxMs');
  assert.equal(checks, 1);
  assert.deepEqual(socket.sent.map((m) => JSON.parse(m).version), [1, 2]);
});
