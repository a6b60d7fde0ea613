import { AppError } from '../../core/errors.js';
import type { App } from '../../core/http/create-app.js';
import { verifySignature } from '../domain/verify-signature.js';

/**
 * Replaces the JSON body parser of `scope` (an encapsulated plugin) with one
 * that, when a secret is configured, checks `x-collector-signature` against
 * the raw body bytes before any parsing: an unsigned or forged body is never
 * parsed. Parsing itself is Fastify's default, which refuses `__proto__` and
 * `constructor.prototype` keys.
 */
export function useSignedJsonParser(scope: App, secret: string | undefined): void {
  const parseJson = scope.getDefaultJsonParser('error', 'error');
  scope.removeContentTypeParser('application/json');
  scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    if (secret !== undefined) {
      const header = request.headers['x-collector-signature'];
      if (header === undefined) return done(new AppError('unauthorized', 'missing x-collector-signature header (this server requires signed reports)'), undefined);
      if (typeof header !== 'string' || !verifySignature(secret, raw, header)) {
        return done(new AppError('unauthorized', 'x-collector-signature does not match the body'), undefined);
      }
    }
    // Fastify's default parser answers through `done`; the type allows a promise, which it never returns here.
    void parseJson(request, raw.toString('utf8'), done);
  });
}
