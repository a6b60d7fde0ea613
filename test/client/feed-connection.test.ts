// The feed's socket life cycle without a server: a stop while the socket is still opening closes it; a socket gone
// silent is given up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FeedConnection, SILENT, type FeedSocket } from '../../src/client/feed.js';

const sockets: TestSocket[] = [];
/** How long a new socket takes to open. */
let openDelayMs = 50;

/** Opens `openDelayMs` after it is made, unless closed first (as a browser's or `ws`'s socket does); `say` speaks for the server. */
class TestSocket implements FeedSocket {
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  closedWith: number | undefined;
  constructor(readonly url: string) {
    sockets.push(this);
    setTimeout(() => { if (this.closedWith === undefined) this.onopen?.({}); }, openDelayMs);
  }
  say(message: object) { this.onmessage?.({ data: JSON.stringify(message) }); }
  close(code?: number) { this.closedWith = code ?? 1000; }
}

const handlers = (closes: number[] = []) => ({ url: async () => 'ws://feed.invalid/ws/sync', onReady: () => undefined, onMessage: () => undefined, onClose: (code: number) => { closes.push(code); }, onRetry: () => undefined });

test('stop() while the socket is still opening closes it: it never opens into a stopped feed (it stayed open for good)', async () => {
  openDelayMs = 50;
  const feed = new FeedConnection(TestSocket, handlers());
  feed.start();
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(sockets.length, 1, 'the socket is being opened');
  feed.stop();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(sockets[0]!.closedWith, 1000);
  assert.equal(feed.connected, false);
  assert.equal(sockets.length, 1, 'and no other was opened');
});

test('a socket that goes silent for 2.5 of the heartbeats its ready named is given up (4001) and another is opened; one that hears heartbeats is kept', async (t) => {
  openDelayMs = 0;
  const closes: number[] = [];
  const before = sockets.length;
  const feed = new FeedConnection(TestSocket, handlers(closes), { baseMs: 1, maxMs: 1 });
  t.after(() => feed.stop());
  feed.start();
  while (sockets.length < before + 1 || !feed.connected) await new Promise((r) => setTimeout(r, 2));
  const first = sockets[before]!;
  first.say({ type: 'ready', heartbeat_ms: 40 });
  // Heartbeats for 300 ms: kept.
  for (let i = 0; i < 10; i++) {
    await new Promise((r) => setTimeout(r, 30));
    first.say({ type: 'heartbeat' });
  }
  assert.equal(first.closedWith, undefined);
  assert.equal(sockets.length, before + 1);
  // Then nothing: given up after 100 ms of silence (checked every 20 ms), and a new socket is opened.
  const silentFrom = Date.now();
  while (first.closedWith === undefined && Date.now() - silentFrom < 2_000) await new Promise((r) => setTimeout(r, 5));
  assert.equal(first.closedWith, SILENT);
  assert.ok(Date.now() - silentFrom >= 100, 'not before 2.5 heartbeats');
  assert.deepEqual(closes, [SILENT]);
  while (sockets.length < before + 2 || !feed.connected) await new Promise((r) => setTimeout(r, 2));
  // A server that names no heartbeat is not watched.
  const second = sockets[before + 1]!;
  second.say({ type: 'ready' });
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(second.closedWith, undefined);
  assert.equal(sockets.length, before + 2);
});
