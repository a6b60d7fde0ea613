import type { PubSub } from '../../core/pubsub/pubsub.js';
import { businessChannel, type ChangeBatch, type WarnLogger } from './change-events.js';

/** The part of a `ws` WebSocket the hub uses (so the policy can be tested without a network). */
export interface FeedSocket {
  readonly bufferedAmount: number;
  readonly readyState: number;
  send(data: string): void;
  ping(): void;
  close(code: number, reason: string): void;
  terminate(): void;
  on(event: 'pong' | 'close', listener: () => void): unknown;
}

export interface FeedOptions {
  /** Every interval each socket is pinged; one that has not answered the previous ping is dropped. */
  heartbeatMs: number;
  /** A subscriber with more than this many bytes queued (`bufferedAmount`) is a slow consumer and is disconnected. */
  maxBufferedBytes: number;
}

/**
 * Documented feed defaults: a dead connection goes within two heartbeats
 * (30-60 s); 1 MiB is several thousand queued events, far more than a
 * healthy client ever lags, and bounds the memory one client can hold.
 */
export const FEED_DEFAULTS: FeedOptions = { heartbeatMs: 30_000, maxBufferedBytes: 1024 * 1024 };

/** Close code for a slow consumer: 1013 "try again later"; the client reconnects and pulls what it missed. */
export const SLOW_CONSUMER = 1013;
const OPEN = 1;

export interface FeedHub {
  /** Delivers the business's change events to `socket` until it closes. */
  add(businessId: string, socket: FeedSocket): Promise<void>;
  /** One heartbeat round: drop sockets that missed the last ping, ping the rest. */
  heartbeat(): void;
  readonly size: number;
  /** Stops the heartbeat and unsubscribes from every channel. */
  close(): Promise<void>;
}

interface Subscription {
  sockets: Set<FeedSocket>;
  unsubscribe: Promise<() => Promise<void>>;
}

/**
 * Fans change batches from PubSub out to this instance's sockets. One PubSub
 * subscription per business with local subscribers, dropped with its last socket.
 */
export function createFeedHub(pubsub: PubSub, options: FeedOptions, log: WarnLogger): FeedHub {
  const subscriptions = new Map<string, Subscription>();
  const alive = new Map<FeedSocket, boolean>();
  const timer = setInterval(() => hub.heartbeat(), options.heartbeatMs);
  timer.unref();

  const deliver = (sockets: Set<FeedSocket>, message: unknown) => {
    // Messages may cross a network (Redis); anything not shaped like a batch is dropped.
    const events = (message as Partial<ChangeBatch> | null)?.events;
    if (!Array.isArray(events)) return;
    const frames = events.map((e) => JSON.stringify(e));
    for (const socket of sockets) {
      if (socket.readyState !== OPEN) continue;
      for (const frame of frames) {
        if (socket.bufferedAmount > options.maxBufferedBytes) {
          log.warn({ bufferedAmount: socket.bufferedAmount }, 'feed subscriber too slow, disconnecting');
          socket.close(SLOW_CONSUMER, 'slow consumer');
          // A client that reads nothing never takes the close frame either.
          socket.terminate();
          break;
        }
        socket.send(frame);
      }
    }
  };

  const remove = (businessId: string, socket: FeedSocket) => {
    alive.delete(socket);
    const sub = subscriptions.get(businessId);
    if (!sub || !sub.sockets.delete(socket) || sub.sockets.size) return;
    subscriptions.delete(businessId);
    void sub.unsubscribe.then((off) => off()).catch((e: unknown) => log.warn({ err: e }, 'feed unsubscribe failed'));
  };

  const hub: FeedHub = {
    async add(businessId, socket) {
      let sub = subscriptions.get(businessId);
      if (!sub) {
        const sockets = new Set<FeedSocket>();
        sub = { sockets, unsubscribe: pubsub.subscribe(businessChannel(businessId), (m) => deliver(sockets, m)) };
        subscriptions.set(businessId, sub);
      }
      sub.sockets.add(socket);
      alive.set(socket, true);
      socket.on('pong', () => { if (alive.has(socket)) alive.set(socket, true); });
      socket.on('close', () => remove(businessId, socket));
      try {
        await sub.unsubscribe;
      } catch (e: unknown) {
        remove(businessId, socket);
        throw e;
      }
    },
    heartbeat() {
      for (const [socket, answered] of alive) {
        if (!answered) {
          socket.terminate();
          continue;
        }
        alive.set(socket, false);
        socket.ping();
      }
    },
    get size() {
      return alive.size;
    },
    async close() {
      clearInterval(timer);
      const subs = [...subscriptions.values()];
      subscriptions.clear();
      alive.clear();
      await Promise.allSettled(subs.map(async (s) => (await s.unsubscribe)()));
    },
  };
  return hub;
}
