import type { FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.js';
import type { App } from '../../core/http/create-app.js';
import { toErrorResponse } from '../../core/http/error-handler.js';
import { describeValidationError, validatorCompiler } from '../../core/http/validation.js';
import type { BulkItem } from '../domain/ingest.js';
import { ReportSchema, type Report } from '../domain/report-schema.js';
import { decodeBody } from './decode-body.js';
import { checkSignature } from './signed-json-parser.js';

/** Most reports one bulk body may carry; more is 413 (the agent sends at most this many per batch). */
export const MAX_BULK_REPORTS = 10_000;

export interface NdjsonLimits {
  /** Largest body, compressed as sent and decompressed (`--bulk-body-limit`). */
  bulkBodyLimit: number;
  /** Largest single line: the single-ingest body limit (`--body-limit`), so a line is refused exactly when a POST of it would be. */
  lineLimit: number;
}

/**
 * Registers the `application/x-ndjson` parser of the bulk scope (its only
 * parser, so any other Content-Type is 415): signature first (on the bytes as
 * sent), then bounded decompression and the body's lines. Returns what reads
 * a parsed request's items, one per non-blank line: the report when the line
 * is JSON that passes ReportSchema with the same validator as single ingest,
 * else the error single ingest would have given.
 */
export function useNdjsonReportParser(scope: App, secret: string | undefined, limits: NdjsonLimits): (request: FastifyRequest) => Iterable<BulkItem> {
  const parseJson = scope.getDefaultJsonParser('error', 'error');
  const compile = validatorCompiler();
  const validate = compile({ schema: ReportSchema, httpPart: 'body', method: 'POST', url: '/api/v1/ingest/bulk' }) as
    ((v: unknown) => boolean) & { errors?: Parameters<typeof describeValidationError>[1] | null };
  const parseLine = (request: FastifyRequest, text: string): unknown => {
    let out: unknown;
    let failure: Error | undefined;
    // Fastify's default JSON parser answers synchronously; used so a line refuses `__proto__` exactly as a single POST does.
    void parseJson(request, text, (err, value) => { failure = err ?? undefined; out = value; });
    if (failure) throw failure;
    return out;
  };

  /**
   * The lines' items, each parsed and checked only when the iteration reaches it: the consumer keeps what it needs
   * of a report and drops the rest, so a thousand parsed reports never live at once (they would outlive the young
   * generation and make every collection copy them).
   */
  function* items(request: FastifyRequest): Generator<BulkItem> {
    const lines = request.body as string[];
    let jsonLines = 0;
    for (const [i, rawLine] of lines.entries()) {
      const text = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
      if (text.trim() === '') continue;
      const line = i + 1;
      if (Buffer.byteLength(text) > limits.lineLimit) {
        yield { line, error: new AppError('payload_too_large', `line is larger than the single-report body limit of ${limits.lineLimit} bytes`) };
        continue;
      }
      let value: unknown;
      try {
        value = parseLine(request, text);
        jsonLines++;
      } catch (e: unknown) {
        const { body: b } = toErrorResponse(e);
        yield { line, error: new AppError(b.error, b.details) };
        continue;
      }
      if (validate(value)) yield { line, report: value as Report };
      else yield { line, error: new AppError('invalid_request', describeValidationError('body', validate.errors ?? [])) };
    }
    if (!jsonLines) throw new AppError('invalid_request', 'body is not NDJSON: no line is JSON');
  }

  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('application/x-ndjson', { parseAs: 'buffer', bodyLimit: limits.bulkBodyLimit }, (request, body, done) => {
    const raw = body as Buffer;
    try {
      checkSignature(secret, request.headers, raw);
    } catch (e: unknown) {
      return done(e as Error, undefined);
    }
    decodeBody(request, raw, limits.bulkBodyLimit).then((decoded) => {
      const lines = decoded.toString('utf8').split('\n');
      let reports = 0;
      for (const line of lines) if (line.trim() !== '' && ++reports > MAX_BULK_REPORTS) throw new AppError('payload_too_large', `more than ${MAX_BULK_REPORTS} reports in one bulk body`);
      if (!reports) throw new AppError('invalid_request', 'body holds no report: send one JSON report per line (application/x-ndjson)');
      done(null, lines);
    }).catch((e: unknown) => done(e as Error, undefined));
  });
  return items;
}
