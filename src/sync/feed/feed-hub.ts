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
/** Close code when the token expired or was revoked, or the user left the business: 1008 "policy violation". */
export const NO_LONGER_AUTHORIZED = 1008;

/** Says whether a connection's credentials still grant the feed (token valid, user still a member). */
export type Reauthorize = () => Promise<boolean>;
const OPEN = 1;

export interface FeedHub {
  /**
   * Delivers the business's change events to `socket` until it closes.
   * `reauthorize` runs at every heartbeat; a false answer closes the socket.
   */
  add(businessId: string, socket: FeedSocket, reauthorize: Reauthorize): Promise<void>;
  /**
   * One heartbeat round: drop sockets that missed the last ping, ping the rest,
   * and close those whose credentials no longer grant the feed. Resolves when
   * the checks are done.
   */
  heartbeat(): Promise<void>;
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
  const reauthorizers = new Map<FeedSocket, Reauthorize>();
  const timer = setInterval(() => void hub.heartbeat(), options.heartbeatMs);
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
    reauthorizers.delete(socket);
    const sub = subscriptions.get(businessId);
    if (!sub || !sub.sockets.delete(socket) || sub.sockets.size) return;
    subscriptions.delete(businessId);
    void sub.unsubscribe.then((off) => off()).catch((e: unknown) => log.warn({ err: e }, 'feed unsubscribe failed'));
  };

  const hub: FeedHub = {
    async add(businessId, socket, reauthorize) {
      let sub = subscriptions.get(businessId);
      if (!sub) {
        const sockets = new Set<FeedSocket>();
        sub = { sockets, unsubscribe: pubsub.subscribe(businessChannel(businessId), (m) => deliver(sockets, m)) };
        subscriptions.set(businessId, sub);
      }
      sub.sockets.add(socket);
      alive.set(socket, true);
      reauthorizers.set(socket, reauthorize);
      socket.on('pong', () => { if (alive.has(socket)) alive.set(socket, true); });
      socket.on('close', () => remove(businessId, socket));
      try {
        await sub.unsubscribe;
      } catch (e: unknown) {
        remove(businessId, socket);
        throw e;
      }
    },
    async heartbeat() {
      const checks: Promise<void>[] = [];
      for (const [socket, answered] of alive) {
        if (!answered) {
          socket.terminate();
          continue;
        }
        alive.set(socket, false);
        socket.ping();
        const reauthorize = reauthorizers.get(socket);
        if (reauthorize) checks.push(reauthorize().then((allowed) => {
          if (!allowed && socket.readyState === OPEN) socket.close(NO_LONGER_AUTHORIZED, 'token expired or revoked, or no longer a member');
        }, (e: unknown) => {
          // A failed check (database briefly away) keeps the connection: the next heartbeat asks again.
          log.warn({ err: e }, 'feed re-authorisation failed');
        }));
      }
      await Promise.all(checks);
    },
    get size() {
      return alive.size;
    },
    async close() {
      clearInterval(timer);
      const subs = [...subscriptions.values()];
      subscriptions.clear();
      alive.clear();
      reauthorizers.clear();
      await Promise.allSettled(subs.map(async (s) => (await s.unsubscribe)()));
    },
  };
  return hub;
}
