import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { SECURITY_HEADERS } from './security-headers.js';
import { errorHandler, notFoundHandler, toErrorResponse } from './error-handler.js';
import { validatorCompiler } from './validation.js';
import { redactUrl } from './redact.js';
import { onCheckExpectation, onClientError } from './client-error.js';
import { registerLoadShedding, type LoadSheddingOptions } from './load-shedding.js';
import { RequestLogController } from './request-log.js';
import { createUnstartedSockets } from './unstarted-sockets.js';
import { AppError, shuttingDown } from '../errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * What the service does with a request the router refused before any hook ran (a malformed `%` escape, a path
     * segment too long to be an id): its onRequest and onResponse hooks never see it. `limit` counts it as the service
     * counts unknown routes, and throws (a 429) to answer that instead; `observe` is told of the answer sent.
     */
    refusedRequests: {
      limit: ((req: FastifyRequest) => Promise<void>) | undefined;
      observe: ((req: FastifyRequest, status: number, elapsedMs: number) => void) | undefined;
    };
  }
}

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

export interface HttpAppOptions {
  /** Service name, added to every log line. */
  name: string;
  logLevel: string;
  /** Largest JSON body in bytes. */
  bodyLimit: number;
  /** Proxies whose X-Forwarded-For is believed; empty = trust no one. */
  trustProxy: string[];
  /** Log destination for tests; defaults to stdout. */
  logStream?: NodeJS.WritableStream;
  /** Overrides of `HTTP_TIMEOUTS` (tests shorten them to watch them fire). */
  timeouts?: Partial<HttpTimeouts>;
  /** Bounds on routes marked `config: { expensive: true }`; without it they are not bounded. */
  loadShedding?: LoadSheddingOptions;
}

/** Slow or stalled clients cannot hold a connection: every phase has an explicit bound. */
export const HTTP_TIMEOUTS = {
  /** Whole request (headers and body) must arrive within this. */
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  /** Idle socket with no request in progress. */
  connectionTimeoutMs: 60_000,
  /**
   * How often Node checks the header and request deadlines. Its default (30 s)
   * would let a stalled client hold a socket up to 30 s past either bound.
   */
  checkIntervalMs: 1_000,
};

export type HttpTimeouts = typeof HTTP_TIMEOUTS;

/**
 * Longest path parameter the router hands to a route: the longest id either service takes in a path (a host id,
 * 128 characters) even with every character percent-encoded as 4 UTF-8 bytes of `%XX`. So the route, not the router,
 * judges any id of 128 characters. Fastify's default (100) refused valid host ids.
 */
export const MAX_PARAM_LENGTH = 128 * 4 * 3;

// A path segment longer than any id either service holds names nothing: the 404 of an unknown id, not a 400.
function paramTooLong(): AppError {
  return new AppError('not_found', 'a path segment too long to be any id');
}

/**
 * Builds a Fastify instance with the behaviour both services share: JSON
 * errors through one handler, JSON 404s, the security headers on every reply,
 * strict body validation, request ids, redacted logs and explicit timeouts.
 */
export function createHttpApp(opts: HttpAppOptions): App {
  const t = { ...HTTP_TIMEOUTS, ...opts.timeouts };
  const unstarted = createUnstartedSockets();
  const app = Fastify({
    logger: {
      level: opts.logLevel,
      base: { service: opts.name },
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-collector-signature"]', 'res.headers["set-cookie"]'],
        censor: '[REDACTED]',
      },
      serializers: {
        req: (req: { method: string; url: string; ip?: string; id?: string }) => ({ method: req.method, url: redactUrl(req.url), ip: req.ip, reqId: req.id }),
      },
      // ISO 8601, as the host agent logs: one time format across the three programs.
      timestamp: () => `,"time":"${new Date().toISOString()}"`,
      ...(opts.logStream ? { stream: opts.logStream } : {}),
    },
    logController: new RequestLogController(),
    genReqId: () => randomUUID(),
    bodyLimit: opts.bodyLimit,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    trustProxy: opts.trustProxy.length ? opts.trustProxy : false,
    connectionTimeout: t.connectionTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    requestTimeout: t.requestTimeoutMs,
    // requireHostHeader off: Node's own 400 for a missing Host has no security headers and no body; the onRequest hook answers it instead.
    http: { headersTimeout: t.headersTimeoutMs, requestTimeout: t.requestTimeoutMs, connectionsCheckingInterval: t.checkIntervalMs, requireHostHeader: false },
    // Fastify's own closing 503 has another body shape and no security headers; the onRequest hook below answers instead.
    return503OnClosing: false,
    // Node-level rejections (malformed request 400, slow client 408, huge headers 431) in the same shape as the rest.
    clientErrorHandler: onClientError,
    frameworkErrors: (err, req, reply) => {
      unstarted.started(req.raw.socket);
      const answer = (e: unknown) => {
        const { status, body, headers } = toErrorResponse(e);
        // As the error handler logs a refusal: this reply goes around it.
        req.log.warn({ status, error: body.error, details: body.details }, 'request rejected');
        void (reply as FastifyReply).headers({ ...SECURITY_HEADERS, ...headers, 'x-request-id': req.id }).code(status).send(body);
        app.refusedRequests.observe?.(req as FastifyRequest, status, (reply as FastifyReply).elapsedTime);
      };
      const refused = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? paramTooLong() : err;
      const { limit } = app.refusedRequests;
      if (!limit) return answer(refused);
      limit(req as FastifyRequest).then(() => answer(refused), answer);
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.decorate('refusedRequests', { limit: undefined, observe: undefined });

  // JSON only: a text/plain body is a 415, not a string that fails validation later.
  app.server.on('checkExpectation', onCheckExpectation);
  app.removeContentTypeParser('text/plain');
  app.setValidatorCompiler(validatorCompiler());
  // While closing, requests still arriving on open connections (keep-alive, pipelined) get a JSON 503
  // before any work: a load balancer retries them on another instance, and /readyz fails so it drains this one.
  let closing = false;
  app.server.on('connection', unstarted.connected);
  app.addHook('preClose', async () => {
    closing = true;
    unstarted.destroyAll();
    // A socket whose response finishes from now on closes then, instead of waiting out the keep-alive timeout for a
    // next request that would only get the 503 (Node reads this bound as each response finishes).
    app.server.keepAliveTimeout = 1;
  });
  app.addHook('onRequest', async (req, reply) => {
    unstarted.started(req.raw.socket);
    reply.headers(SECURITY_HEADERS);
    reply.header('x-request-id', req.id);
    if (closing) throw shuttingDown();
    if (req.raw.httpVersionMajor === 1 && req.raw.httpVersionMinor >= 1 && req.headers.host === undefined) {
      reply.header('connection', 'close');
      throw new AppError('invalid_request', 'an HTTP/1.1 request needs a Host header');
    }
  });
  // Fastify answers HEAD from the GET route and reads a stream payload to its end before dropping it (an
  // attachment's whole file, a streamed page's every query): on HEAD routes only (no cost to any other request), the
  // stream is closed unread, ahead of Fastify's own handler, and the route's headers go out.
  app.addHook('onRoute', (route) => {
    if (route.method !== 'HEAD') return;
    const onSend = route.onSend === undefined ? [] : Array.isArray(route.onSend) ? route.onSend : [route.onSend];
    route.onSend = [closeStreamUnread, ...onSend];
  });
  if (opts.loadShedding) registerLoadShedding(app, opts.loadShedding);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  return app;
}

function closeStreamUnread(_req: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void {
  if (!(payload instanceof Readable)) return done(null, payload);
  payload.destroy();
  done(null, Readable.from([]));
}
