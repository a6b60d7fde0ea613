import { AppError } from '../../core/errors.js';
import type { App } from '../../core/http/create-app.js';
import { utf8Text } from '../../core/http/utf8-text.js';
import { verifySignature } from '../domain/verify-signature.js';
import { decodeBody } from './decode-body.js';

/**
 * An onRequest hook: with a secret, a request without a signature is a 401 before its body is read, as the
 * specification says of an unsigned request, rather than the 413 or 415 its body would otherwise earn first.
 */
export function requireSignatureHeader(secret: string | undefined) {
  return async (request: { headers: Record<string, string | string[] | undefined> }): Promise<void> => {
    if (secret !== undefined && request.headers['x-collector-signature'] === undefined) throw new AppError('unauthorized', 'missing x-collector-signature header (this server requires signed reports)');
  };
}

/**
 * A preValidation hook for a route whose only body parser is the one for `contentType`: a request with neither a
 * body nor a Content-Type reaches no parser at all (Fastify skips them), so it is answered here as one would have
 * been: its signature checked against its (empty) body, then 415, as for a body of any other type.
 */
export function requireParsedBody(secret: string | undefined, contentType: string) {
  return async (request: { headers: Record<string, string | string[] | undefined>; body: unknown }): Promise<void> => {
    if (request.body !== undefined) return;
    checkSignature(secret, request.headers, Buffer.alloc(0));
    throw new AppError('unsupported_media_type', `send the body as ${contentType}`);
  };
}

/**
 * Checks `x-collector-signature` against the body bytes as sent (compressed when gzipped); throws `unauthorized`.
 * A request without the header never gets here: requireSignatureHeader answered it before its body was read.
 */
export function checkSignature(secret: string | undefined, headers: Record<string, string | string[] | undefined>, raw: Buffer): void {
  if (secret === undefined) return;
  const header = headers['x-collector-signature'];
  if (typeof header !== 'string' || !verifySignature(secret, raw, header)) {
    throw new AppError('unauthorized', 'x-collector-signature does not match the body');
  }
}

/**
 * Replaces the JSON body parser of `scope` (an encapsulated plugin) with one
 * that, when a secret is configured, checks `x-collector-signature` against
 * the raw body bytes before any decompression or parsing: an unsigned or
 * forged body is never inflated nor parsed. A gzip body is inflated up to
 * `decodedLimit` bytes, and must be UTF-8 (utf8-text.ts). Parsing itself is Fastify's default, which refuses
 * `__proto__` and `constructor.prototype` keys.
 */
export function useSignedJsonParser(scope: App, secret: string | undefined, decodedLimit: number): void {
  const parseJson = scope.getDefaultJsonParser('error', 'error');
  scope.removeContentTypeParser('application/json');
  scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    try {
      checkSignature(secret, request.headers, raw);
    } catch (e: unknown) {
      return done(e as Error, undefined);
    }
    decodeBody(request, raw, decodedLimit).then((decoded) => utf8Text(decoded)).then(
      (text) => parseJson(request, text, done),
      (e: unknown) => done(e as Error, undefined),
    );
  });
}
