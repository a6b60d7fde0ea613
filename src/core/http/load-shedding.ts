import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { AppError } from '../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `true` marks a route whose work grows with the data it reads or writes
     * (series, aggregates, push, pull): it runs only within the load-shedding
     * bounds and is refused with 503 past them. Probes are never expensive.
     */
    expensive?: boolean;
  }
  interface FastifyInstance {
    /**
     * A slot of the same bounds for work a handler starts on its own, once it knows its caller (a dashboard page
     * that authenticates inside its handler and streams a read of whole ranges): throws `unavailable` past them,
     * returns the release. Absent when the app has no load shedding.
     */
    shedExpensive?: (principal: string | undefined) => () => void;
  }
}

export interface LoadSheddingOptions {
  /** Expensive requests in progress at once on this instance; the next one gets 503. */
  maxInFlight: number;
  /** Expensive requests one principal (tenant, user) may have in progress at once on this instance. */
  maxInFlightPerPrincipal: number;
  /** Longest event-loop stall (ms) of the last two sample windows, or in progress, past which expensive requests get 503; 0 turns the check off. */
  maxEventLoopDelayMs: number;
  /** Who is asking, once the route's authentication ran; `undefined` counts against the instance bound only. */
  principal: (req: FastifyRequest) => string | undefined;
  /** Seconds a refused client is told to wait (`Retry-After`). */
  retryAfterSeconds?: number;
  /** Length of one event-loop delay sample window. */
  sampleIntervalMs?: number;
}

export interface LoadShedder {
  /** Takes a slot for `principal`, or throws `unavailable` (503 with Retry-After) past a bound. Returns the release. */
  acquire(principal: string | undefined): () => void;
  /** Worst event-loop stall of the last two sample windows, or the one in progress, in ms. */
  eventLoopDelayMs(): number;
  stop(): void;
}

/**
 * Bounds expensive work, as @fastify/under-pressure does for a whole
 * instance, but per route and per principal: one tenant's burst of
 * aggregates cannot take every slot, and a stalled event loop stops taking
 * new heavy work. Refusals are immediate 503s with Retry-After (a balancer
 * or client retries elsewhere or later) instead of queued requests that end
 * in timeouts; cheap routes and the probes are never refused, so /healthz
 * keeps answering while heavy work is shed.
 */
export function createLoadShedder(opts: Omit<LoadSheddingOptions, 'principal'>): LoadShedder {
  const retryAfter = opts.retryAfterSeconds ?? 1;
  const perPrincipal = new Map<string, number>();
  let total = 0;
  const stall = opts.maxEventLoopDelayMs > 0 ? watchEventLoop(opts.sampleIntervalMs ?? 500) : undefined;
  const refuse = (why: string): never => {
    throw new AppError('unavailable', `the server is busy (${why}); retry after ${retryAfter} s`, { retry_after: retryAfter });
  };
  return {
    acquire(principal) {
      if (stall && stall.delayMs() > opts.maxEventLoopDelayMs) refuse('event loop delayed');
      if (total >= opts.maxInFlight) refuse('too many expensive requests in progress');
      const mine = principal === undefined ? 0 : perPrincipal.get(principal) ?? 0;
      if (principal !== undefined && mine >= opts.maxInFlightPerPrincipal) refuse('too many of your expensive requests in progress');
      total++;
      if (principal !== undefined) perPrincipal.set(principal, mine + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total--;
        if (principal === undefined) return;
        const left = (perPrincipal.get(principal) ?? 1) - 1;
        if (left > 0) perPrincipal.set(principal, left);
        else perPrincipal.delete(principal);
      };
    },
    eventLoopDelayMs: () => stall?.delayMs() ?? 0,
    stop() { stall?.stop(); },
  };
}

const TICK_MS = 10;

/**
 * Event-loop delay from a 10 ms timer's lateness: the worst stall of the
 * current and the previous sample window, or the stall in progress right now
 * (the time since the timer last ran), whichever is larger. The last one
 * matters when a burst of requests is read in one loop turn: the first
 * requests' work delays the later ones' admission, which then see it.
 */
function watchEventLoop(windowMs: number): { delayMs(): number; stop(): void } {
  let lastTick = performance.now();
  let current = 0;
  let previous = 0;
  let windowStart = lastTick;
  const timer = setInterval(() => {
    const now = performance.now();
    current = Math.max(current, now - lastTick - TICK_MS);
    lastTick = now;
    if (now - windowStart >= windowMs) {
      previous = current;
      current = 0;
      windowStart = now;
    }
  }, TICK_MS);
  timer.unref();
  return {
    delayMs: () => Math.max(current, previous, performance.now() - lastTick - TICK_MS),
    stop: () => clearInterval(timer),
  };
}

/**
 * Runs every route registered later whose config says `expensive: true`
 * inside a shedder slot. The slot is taken just before the handler, after the
 * route's own hooks authenticated the caller (so the principal is known, and
 * an unauthenticated request is answered 401 without touching the bounds),
 * and released when the handler settles. The handler starts on the next loop
 * turn, so with a synchronous database (SQLite) the bounds still see every
 * request of a burst as in flight instead of running them one after another
 * while everything else waits.
 */
export function registerLoadShedding(app: FastifyInstance, opts: LoadSheddingOptions): void {
  // Created once the app is ready: loading modules and registering routes stall the loop, and that
  // start-up stall must not shed the first requests.
  let shedder: LoadShedder | undefined;
  app.addHook('onReady', async () => { shedder = createLoadShedder(opts); });
  app.addHook('onClose', async () => shedder?.stop());
  app.decorate('shedExpensive', (principal: string | undefined) => shedder!.acquire(principal));
  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.expensive !== true) return;
    const handler = route.handler;
    route.handler = async function shedWhenBusy(this: FastifyInstance, req, reply) {
      // Requests are only served once the app is ready, so the shedder exists by now.
      const release = shedder!.acquire(opts.principal(req));
      try {
        // One loop turn before the work: requests read in the same turn (a probe, cheap reads, more heavy
        // requests that must count as in flight, or be refused) are handled before this one's work begins.
        await nextTurn();
        return await handler.call(this, req, reply);
      } finally {
        release();
      }
    };
  });
}
