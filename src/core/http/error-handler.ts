import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_STATUS, isAppError, type ErrorCode } from '../errors.js';
import { databaseFailure, isStorageFull, storageFullError } from '../storage/unavailable.js';
import { redactUrl } from './redact.js';
import { createLogThrottle, withHeld } from '../log-throttle.js';
import { describeValidationError } from './validation.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `true` marks a write the service recognises when it comes twice (ingest's duplicates, a push's per-instance
     * idempotency, a pull that only reads): a database connection lost under it is a 503 to retry, as under a read.
     * The same routes HAProxy may send again (deploy/haproxy.cfg).
     */
    repeatable?: boolean;
  }
}

/** `Retry-After` of the 503 a request gets while the database is unreachable: a restart or fail-over, retried soon. */
export const DATABASE_RETRY_AFTER_S = 2;

const CODE_BY_STATUS = new Map<number, ErrorCode>(
  (Object.entries(ERROR_STATUS) as [ErrorCode, number][]).map(([code, status]) => [status, code]),
);

export interface ErrorBody {
  error: ErrorCode;
  details?: string;
  [extra: string]: unknown;
}

/**
 * Maps any thrown value to a status and the JSON error body. A 500's details never leave the process, an `internal`
 * AppError's included: its message is for the log (which row, which file is missing). A 503 `unavailable` keeps its
 * details, written for the client (shutting down, retry). A database that cannot be reached is a 503 too, with
 * Retry-After: nothing of the request happened, and the same one may succeed on a retry. So is one whose connection
 * broke under a read or a repeatable write (`safe`); under another write the outcome is unknown (its commit may have
 * landed), which is the 500 it always was, not an invitation to send it again.
 */
export function toErrorResponse(err: unknown, safe = false): { status: number; body: ErrorBody; headers?: Record<string, string> } {
  if (isAppError(err) && err.code !== 'internal') {
    const body: ErrorBody = { error: err.code, ...(err.details ? { details: err.details } : {}), ...err.extra };
    const headers = { ...err.headers, ...(typeof err.extra?.['retry_after'] === 'number' ? { 'retry-after': String(err.extra['retry_after']) } : {}) };
    return { status: err.status, body, ...(Object.keys(headers).length ? { headers } : {}) };
  }
  const fe = err as Partial<FastifyError> & { validation?: unknown[]; validationContext?: string };
  if (Array.isArray(fe.validation)) {
    return { status: 400, body: { error: 'invalid_request', details: describeValidationError(fe.validationContext, fe.validation as never) } };
  }
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    const code = CODE_BY_STATUS.get(status) ?? 'invalid_request';
    return { status: CODE_BY_STATUS.has(status) ? status : 400, body: { error: code, details: clientMessage(fe) } };
  }
  if (isStorageFull(err)) return toErrorResponse(storageFullError());
  const failure = databaseFailure(err);
  if (failure === 'unreachable' || (failure === 'lost' && safe)) {
    return {
      status: 503,
      body: { error: 'unavailable', details: 'the database is unreachable; retry', retry_after: DATABASE_RETRY_AFTER_S },
      headers: { 'retry-after': String(DATABASE_RETRY_AFTER_S) },
    };
  }
  return { status: 500, body: { error: 'internal', details: 'an unexpected error occurred; it has been logged' } };
}

// Fastify's own 4xx messages are safe to show; strip the "FST_..." prefixes and body echoes. A URL that does not
// decode is quoted whole: its query's secrets (a feed's ?token=) are redacted, as in the request log.
function clientMessage(fe: Partial<FastifyError>): string {
  const msg = (fe.message ?? 'invalid request').replace(/^FST_\w+:\s*/, '')
    .replace(/^'(.*)' is not a valid url component$/s, (_, url: string) => `'${redactUrl(url)}' is not a valid url component`);
  return msg.length > 300 ? `${msg.slice(0, 300)}...` : msg;
}

const storageFullLog = createLogThrottle(60_000);

export function errorHandler(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  const { status, body, headers } = toErrorResponse(err, req.method === 'GET' || req.method === 'HEAD' || req.routeOptions.config?.repeatable === true);
  // A 503 the service chose (shutting down, shedding load, a queue full) is an answer, not a failure: one warn line as a
  // 4xx, or a rolling restart would fill the log with stacks. Its causes, when they are faults, are logged where they happen.
  if (isStorageFull(err)) {
    // The operator's cue, once a minute however many writes it refuses; each refusal is its warn line as any 503.
    const line = storageFullLog((err as { code: string }).code);
    if (line) req.log.error({ code: (err as { code: string }).code, err: (err as Error).message }, withHeld('the storage is full: writes are refused (503) until space is freed', line.held));
    req.log.warn({ status, error: body.error, details: body.details }, 'request rejected');
  } else if (status >= 500 && !(isAppError(err) && err.code === 'unavailable')) req.log.error({ err }, 'request failed');
  else req.log.warn({ status, error: body.error, details: body.details }, 'request rejected');
  if (headers) reply.headers(headers);
  void reply.code(status).type('application/json; charset=utf-8').send(body);
}

export function notFoundHandler(req: FastifyRequest, reply: FastifyReply): void {
  void reply.code(404).send({ error: 'not_found', details: `no route for ${req.method} ${req.url.split('?')[0]}` });
}
