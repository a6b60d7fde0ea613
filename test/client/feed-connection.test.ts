// The feed's socket life cycle without a server: a stop while the socket is still opening closes it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FeedConnection, type FeedSocket } from '../../src/client/feed.js';

const sockets: SlowSocket[] = [];

/** Opens 50 ms after it is made, unless closed first (as a browser's or `ws`'s socket does). */
class SlowSocket implements FeedSocket {
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  closedWith: number | undefined;
  constructor(readonly url: string) {
    sockets.push(this);
    setTimeout(() => { if (this.closedWith === undefined) this.onopen?.({}); }, 50);
  }
  close(code?: number) { this.closedWith = code ?? 1000; }
}

test('stop() while the socket is still opening closes it: it never opens into a stopped feed (it stayed open for good)', async () => {
  const feed = new FeedConnection(SlowSocket, { url: async () => 'ws://feed.invalid/ws/sync', onReady: () => undefined, onMessage: () => undefined, onClose: () => undefined, onRetry: () => undefined });
  feed.start();
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(sockets.length, 1, 'the socket is being opened');
  feed.stop();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(sockets[0]!.closedWith, 1000);
  assert.equal(feed.connected, false);
  assert.equal(sockets.length, 1, 'and no other was opened');
});
