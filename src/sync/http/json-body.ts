import type { App } from '../../core/http/create-app.js';
import { AppError } from '../../core/errors.js';
import { utf8Text } from '../../core/http/utf8-text.js';
import { jsonValueProblem } from './json-value.js';

export { MAX_JSON_DEPTH, jsonValueProblem } from './json-value.js';

/**
 * Replaces the JSON body parser with one that refuses, with 400 before any
 * route runs, what JSON.parse accepts but the service cannot keep faithfully:
 * nesting deeper than `MAX_JSON_DEPTH`, and numbers outside the double range
 * (`1e999` parses as Infinity, which JSON.stringify would silently store as
 * null), and bytes that are not UTF-8 (utf8-text.ts). Prototype-poisoning keys are refused as by Fastify's own parser,
 * and a body with a Content-Encoding (gzip, say) with 415.
 */
export function useStrictJsonParser(app: App): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    // Bodies are taken as sent: compressed bytes would be read as JSON text (RFC 9110 section 8.4: 415).
    const encoding = req.headers['content-encoding']?.trim().toLowerCase();
    if (encoding && encoding !== 'identity') return done(new AppError('unsupported_media_type', `Content-Encoding ${encoding.slice(0, 40)} is not supported: send the JSON body uncompressed`), undefined);
    let text: string;
    try {
      text = utf8Text(body as Buffer);
    } catch (e: unknown) {
      return done(e as Error, undefined);
    }
    // Fastify types the default parser as possibly async; it answers through the callback.
    void parse(req, text, (err, value) => {
      if (err) return done(err, undefined);
      const problem = jsonValueProblem(value);
      if (problem) return done(new AppError('invalid_request', problem), undefined);
      done(null, value);
    });
  });
}
