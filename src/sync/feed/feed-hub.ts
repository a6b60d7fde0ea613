import type { PubSub } from '../../core/pubsub/pubsub.js';
import { businessChannel, feedMessage, isAccessChange, isAccessHold, type ChangeBatch, type WarnLogger } from './change-events.js';

/** The part of a `ws` WebSocket the hub uses (so the policy can be tested without a network). */
export interface FeedSocket {
  readonly bufferedAmount: number;
  readonly readyState: number;
  /** Sends `data` as one text message. */
  send(data: Buffer, options: { binary: false }): void;
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
  /**
   * The re-authorisation checks of one heartbeat are spread over this time,
   * one business after another, instead of all at the same instant. Default:
   * half the heartbeat.
   */
  reauthSpreadMs?: number;
  /** How long batches are held for an access change announced but never released. Default: HOLD_MAX_MS. */
  holdMaxMs?: number;
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

/**
 * Re-checks the credentials of every socket of one business at once (token
 * valid, user still a member): one answer per credential, in order. One call
 * per business per heartbeat, so the cost grows with businesses, not sockets.
 */
export type ReauthorizeBusiness<C> = (businessId: string, credentials: readonly C[]) => Promise<boolean[]>;
const OPEN = 1;
const TEXT = { binary: false } as const;
const PING_CHUNK = 256;
/**
 * Sent with every ping. A ping is answered by the client's WebSocket layer, out of the application's sight (a browser
 * never shows it); this message is what a client sees, so one that hears nothing for a few heartbeats knows its
 * connection went silent (a NAT that dropped it, a network switch) and reconnects instead of waiting for changes
 * that will never come.
 */
const HEARTBEAT_MESSAGE = Buffer.from('{"type":"heartbeat"}');

/**
 * Longest a business's batches are held for an access change announced but not yet released (its instance died
 * between the two, or the release was lost): then the business is re-checked and what was held is sent.
 */
export const HOLD_MAX_MS = 5_000;

/**
 * A socket's first message, once its subscription is in place and its credential checked: every change committed
 * after it reaches the socket, so a client that pulls on it misses nothing (on `open` it could: the upgrade completes
 * before the subscription). It says how often heartbeats come, so a client can tell a connection gone silent from a
 * quiet business.
 */
function readyMessage(heartbeatMs: number): string {
  return JSON.stringify({ type: 'ready', heartbeat_ms: heartbeatMs });
}

export interface FeedHub<C> {
  /**
   * Delivers the business's change events to `socket` until it closes.
   * `credential` (what the connection authenticated with) is checked once the
   * subscription is in place, before anything is delivered: then the socket
   * gets `readyMessage` first, and what came meanwhile after it. It is checked
   * again at every heartbeat; a refused one closes the socket. Rejects, the
   * socket removed, when the subscription or that first check fails.
   */
  add(businessId: string, socket: FeedSocket, credential: C): Promise<void>;
  /**
   * One heartbeat: drop sockets that missed the last ping, ping the rest and
   * send them HEARTBEAT_MESSAGE (a few hundred per event-loop turn), and
   * re-authorise every business's sockets, one business after another, spread
   * over `reauthSpreadMs`. Resolves when the checks are done. A heartbeat that
   * comes while the previous one's checks still run pings but checks nothing
   * (rounds never overlap, so a slow database does not pile them up).
   */
  heartbeat(): Promise<void>;
  readonly size: number;
  /** Stops the heartbeat and unsubscribes from every channel. */
  close(): Promise<void>;
}

interface Subscription<C> {
  sockets: Map<FeedSocket, C>;
  unsubscribe: Promise<() => Promise<void>>;
  /** Batches that came while an access change was pending or re-checked: sent, in order, once it is checked. */
  held?: unknown[];
  /** A re-check of the business's sockets is running. */
  checking?: boolean;
  /** Another access change came during the re-check: check once more before sending what is held. */
  again?: boolean;
  /** Access changes announced (AccessHold) and not yet released, with the timer that gives up waiting for each. */
  holds?: Map<string, NodeJS.Timeout>;
}

/**
 * Fans change batches from PubSub out to this instance's sockets. One PubSub
 * subscription per business with local subscribers, dropped with its last socket.
 */
export function createFeedHub<C>(pubsub: PubSub, options: FeedOptions, log: WarnLogger, reauthorize: ReauthorizeBusiness<C>): FeedHub<C> {
  const subscriptions = new Map<string, Subscription<C>>();
  const alive = new Map<FeedSocket, boolean>();
  /** New sockets until their first check has passed, with the batches that came meanwhile. */
  const pending = new Map<FeedSocket, unknown[]>();
  const spreadMs = options.reauthSpreadMs ?? options.heartbeatMs / 2;
  const holdMaxMs = options.holdMaxMs ?? HOLD_MAX_MS;
  const ready = Buffer.from(readyMessage(options.heartbeatMs));
  let checking: Promise<void> | undefined;
  let closed = false;
  let pause: { timer: NodeJS.Timeout; wake: () => void } | undefined;
  /** A wait between two businesses' checks that `close` cuts short. */
  const sleep = (ms: number) => new Promise<void>((resolve) => {
    pause = { timer: setTimeout(resolve, ms), wake: resolve };
  }).finally(() => { pause = undefined; });
  const timer = setInterval(() => void hub.heartbeat(), options.heartbeatMs);
  timer.unref();

  const deliver = (sockets: Iterable<FeedSocket>, message: unknown) => {
    // Messages may cross a network (Redis); anything not shaped like a batch is dropped.
    const events = (message as Partial<ChangeBatch> | null)?.events;
    if (!Array.isArray(events)) return;
    // Encoded once for every socket: with thousands of subscribers the per-socket work is the send alone.
    const frames = events.map((e) => Buffer.from(feedMessage(e)));
    for (const socket of sockets) {
      const held = pending.get(socket);
      if (held) { held.push(message); continue; }
      if (socket.readyState !== OPEN) continue;
      for (const frame of frames) {
        if (socket.bufferedAmount > options.maxBufferedBytes) {
          log.warn({ bufferedAmount: socket.bufferedAmount }, 'feed subscriber too slow, disconnecting');
          socket.close(SLOW_CONSUMER, 'slow consumer');
          // A client that reads nothing never takes the close frame either.
          socket.terminate();
          break;
        }
        socket.send(frame, TEXT);
      }
    }
  };

  /**
   * A message of the business's channel. An access change (a member removed) re-checks its sockets at once; the
   * batches that come meanwhile wait for the check, so a connection that lost access gets none of the changes made
   * after the loss, even those published before the check's queries return. A hold, announced before such a change
   * is committed, starts the waiting earlier: batches committed between the change and its announcement wait too.
   */
  const receive = (businessId: string, sub: Subscription<C>, message: unknown) => {
    if (isAccessHold(message)) {
      sub.held ??= [];
      sub.holds ??= new Map();
      clearTimeout(sub.holds.get(message.hold));
      const timer = setTimeout(() => { sub.holds?.delete(message.hold); recheck(businessId, sub); }, holdMaxMs);
      timer.unref();
      sub.holds.set(message.hold, timer);
      return;
    }
    if (isAccessChange(message)) {
      if (message.release !== undefined) {
        clearTimeout(sub.holds?.get(message.release));
        sub.holds?.delete(message.release);
      }
      recheck(businessId, sub);
      return;
    }
    if (sub.held) sub.held.push(message);
    else deliver(sub.sockets.keys(), message);
  };

  /** Re-checks the business's sockets, holding its batches meanwhile; sends them once no hold is pending. */
  const recheck = (businessId: string, sub: Subscription<C>) => {
    sub.held ??= [];
    if (sub.checking) { sub.again = true; return; }
    sub.checking = true;
    void (async () => {
      do {
        sub.again = false;
        await checkBusiness(businessId);
      } while (sub.again && !closed);
      sub.checking = false;
      // Another change is still announced: its release (or HOLD_MAX_MS) checks again, then sends.
      if (sub.holds?.size) return;
      const held = sub.held ?? [];
      sub.held = undefined;
      for (const m of held) deliver(sub.sockets.keys(), m);
    })();
  };

  /** A subscription to the business's channel, its messages for its own sockets only (a later one has its own). */
  const subscribe = (businessId: string): Subscription<C> => {
    // The callback runs only once a message is published, after `sub` is set.
    const sub: Subscription<C> = { sockets: new Map<FeedSocket, C>(), unsubscribe: pubsub.subscribe(businessChannel(businessId), (m) => receive(businessId, sub, m)) };
    return sub;
  };

  const remove = (businessId: string, socket: FeedSocket) => {
    alive.delete(socket);
    pending.delete(socket);
    const sub = subscriptions.get(businessId);
    if (!sub || !sub.sockets.delete(socket) || sub.sockets.size) return;
    subscriptions.delete(businessId);
    for (const timer of sub.holds?.values() ?? []) clearTimeout(timer);
    void sub.unsubscribe.then((off) => off()).catch((e: unknown) => log.warn({ err: e }, 'feed unsubscribe failed'));
  };

  const checkBusiness = async (businessId: string) => {
    const sockets = [...(subscriptions.get(businessId)?.sockets ?? [])].filter(([socket]) => socket.readyState === OPEN);
    if (!sockets.length) return;
    try {
      const answers = await reauthorize(businessId, sockets.map(([, credential]) => credential));
      sockets.forEach(([socket], i) => {
        if (answers[i] !== true && socket.readyState === OPEN) socket.close(NO_LONGER_AUTHORIZED, 'token expired or revoked, or no longer a member');
      });
    } catch (e: unknown) {
      // A failed check (database briefly away) keeps the connections: the next heartbeat asks again.
      log.warn({ err: e, businessId }, 'feed re-authorisation failed');
    }
  };

  const checkAll = async () => {
    const businesses = [...subscriptions.keys()];
    const gap = businesses.length > 1 ? spreadMs / businesses.length : 0;
    for (const [i, businessId] of businesses.entries()) {
      if (closed) return;
      if (i > 0 && gap > 0) await sleep(gap);
      await checkBusiness(businessId);
    }
  };

  // A ping is a socket write like a message: thousands at once would stall the event loop for tens of milliseconds,
  // so they go out in chunks with other work (fan-outs, requests) between them.
  const pingAll = async () => {
    let n = 0;
    for (const socket of [...alive.keys()]) {
      if (++n % PING_CHUNK === 0) await new Promise((resolve) => setImmediate(resolve));
      const answered = alive.get(socket);
      if (answered === undefined) continue;
      if (!answered) {
        socket.terminate();
        continue;
      }
      alive.set(socket, false);
      socket.ping();
      // Not before `ready`: that is the first message a socket gets.
      if (!pending.has(socket) && socket.readyState === OPEN) socket.send(HEARTBEAT_MESSAGE, TEXT);
    }
  };

  const hub: FeedHub<C> = {
    async add(businessId, socket, credential) {
      let sub = subscriptions.get(businessId);
      if (!sub) {
        sub = subscribe(businessId);
        subscriptions.set(businessId, sub);
      }
      sub.sockets.set(socket, credential);
      pending.set(socket, []);
      alive.set(socket, true);
      socket.on('pong', () => { if (alive.has(socket)) alive.set(socket, true); });
      socket.on('close', () => remove(businessId, socket));
      try {
        await sub.unsubscribe;
        // Access lost between the caller's checks and the subscription was announced before this socket could hear it.
        const [granted] = await reauthorize(businessId, [credential]);
        const held = pending.get(socket) ?? [];
        pending.delete(socket);
        if (granted !== true) {
          if (socket.readyState === OPEN) socket.close(NO_LONGER_AUTHORIZED, 'token expired or revoked, or no longer a member');
          return;
        }
        if (socket.readyState === OPEN) socket.send(ready, TEXT);
        for (const m of held) deliver([socket], m);
      } catch (e: unknown) {
        remove(businessId, socket);
        throw e;
      }
    },
    heartbeat() {
      const pinging = pingAll();
      checking ??= checkAll().finally(() => { checking = undefined; });
      return Promise.all([pinging, checking]).then(() => undefined);
    },
    get size() {
      return alive.size;
    },
    async close() {
      closed = true;
      clearInterval(timer);
      if (pause) { clearTimeout(pause.timer); pause.wake(); }
      const subs = [...subscriptions.values()];
      for (const s of subs) for (const timer of s.holds?.values() ?? []) clearTimeout(timer);
      subscriptions.clear();
      alive.clear();
      pending.clear();
      await Promise.allSettled(subs.map(async (s) => (await s.unsubscribe)()));
    },
  };
  return hub;
}
