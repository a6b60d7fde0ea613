import type { FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.js';
import type { App } from '../../core/http/create-app.js';
import { toErrorResponse } from '../../core/http/error-handler.js';
import { describeValidationError } from '../../core/http/validation.js';
import type { BulkItem, IngestDeps } from '../domain/ingest.js';
import type { Report } from '../domain/report-schema.js';
import type { BulkLinePool } from './bulk-line-pool.js';
import { bulkItems, reportValidator } from './bulk-lines.js';
import { decodeBody } from './decode-body.js';
import { checkSignature } from './signed-json-parser.js';

export interface NdjsonLimits {
  /** Largest body, compressed as sent and decompressed (`--bulk-body-limit`). */
  bulkBodyLimit: number;
  /** Largest single line: the single-ingest body limit (`--body-limit`), so a line is refused exactly when a POST of it would be. */
  lineLimit: number;
}

/**
 * Registers the `application/x-ndjson` parser of the bulk scope (its only
 * parser, so any other Content-Type is 415): signature first (on the bytes as
 * sent), then bounded decompression. Returns what reads a parsed request's
 * items, one per non-blank line, for the tenant: its lines are read by a
 * parse thread (bulk-lines.ts); a line that thread leaves raw is parsed here
 * with Fastify's own JSON parser and the same validator as single ingest, so
 * every line gets exactly the answer a single POST of it would.
 */
export function useNdjsonReportParser(
  scope: App,
  secret: string | undefined,
  limits: NdjsonLimits,
  pool: BulkLinePool,
  clock: Pick<IngestDeps, 'now' | 'maxFutureMs' | 'retentionMs'>,
): (request: FastifyRequest, tenantId: string) => Promise<Iterable<BulkItem>> {
  const parseJson = scope.getDefaultJsonParser('error', 'error');
  const parseLine = (request: FastifyRequest, text: string): unknown => {
    let out: unknown;
    let failure: Error | undefined;
    // Fastify's default JSON parser answers synchronously; used so a line refuses `__proto__` exactly as a single POST does.
    void parseJson(request, text, (err, value) => { failure = err ?? undefined; out = value; });
    if (failure) throw failure;
    return out;
  };
  const parseRaw = (request: FastifyRequest, line: number, text: string): { item: BulkItem; json: boolean } => {
    let value: unknown;
    try {
      value = parseLine(request, text);
    } catch (e: unknown) {
      const { body: b } = toErrorResponse(e);
      return { item: { line, error: new AppError(b.error, b.details) }, json: false };
    }
    const validate = reportValidator();
    if (validate(value)) return { item: { line, report: value as Report }, json: true };
    return { item: { line, error: new AppError('invalid_request', describeValidationError('body', validate.errors ?? [])) }, json: true };
  };

  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('application/x-ndjson', { parseAs: 'buffer', bodyLimit: limits.bulkBodyLimit }, (request, body, done) => {
    const raw = body as Buffer;
    try {
      checkSignature(secret, request.headers, raw);
    } catch (e: unknown) {
      return done(e as Error, undefined);
    }
    decodeBody(request, raw, limits.bulkBodyLimit).then((decoded) => done(null, decoded), (e: unknown) => done(e as Error, undefined));
  });

  return async (request, tenantId) => {
    const lines = await pool.read(request.body as Buffer, {
      lineLimit: limits.lineLimit, now: clock.now(), maxFutureMs: clock.maxFutureMs, retentionMs: clock.retentionMs,
    });
    return bulkItems(lines, tenantId, (line, text) => parseRaw(request, line, text));
  };
}
