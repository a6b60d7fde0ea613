import swagger from '@fastify/swagger';
import { Type, type TSchema } from 'typebox';
import { ERROR_STATUS, type ErrorCode } from '../errors.js';
import type { App } from './create-app.js';

/**
 * The OpenAPI pieces both services share, so their documents agree: one
 * setup, one bearer security scheme (`bearer`), one error body and one way to
 * list a route's error responses.
 */

/** The one error body, `{"error": code, "details": text}`; some codes add fields (documented per route). */
export const ErrorSchema = Type.Object({
  error: Type.String({ description: 'Machine-readable code from the catalogue (src/core/errors.ts).' }),
  details: Type.Optional(Type.String({ description: 'Human-readable explanation naming the offending field.' })),
  retry_after: Type.Optional(Type.Integer({ description: 'Seconds to wait (429 only; also the Retry-After header).' })),
}, { additionalProperties: true });

/** Response schemas of the given error codes, keyed by their status, each with its meaning for this route as description. */
export function errorResponses(codes: Partial<Record<ErrorCode, string>>): Record<number, TSchema> {
  const out: Record<number, TSchema> = {};
  for (const [code, description] of Object.entries(codes) as [ErrorCode, string][]) {
    out[ERROR_STATUS[code]] = { ...ErrorSchema, description };
  }
  return out;
}

/** `security` of a route that takes `Authorization: Bearer <token>`. */
export const BEARER_SECURITY = [{ bearer: [] }];

export interface OpenApiOptions {
  title: string;
  version: string;
  description: string;
  /** What the bearer token of this service is and where it comes from. */
  bearerDescription: string;
  /** Where the document is served (public: it describes the interface and holds no data). */
  path: string;
}

/** Generates the OpenAPI 3 document from the route schemas and serves it at `path`. Register before the routes. */
export async function registerOpenApi(app: App, opts: OpenApiOptions): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: opts.title, version: opts.version, description: opts.description },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: opts.bearerDescription } } },
    },
  });
  app.get(opts.path, { schema: { hide: true } }, async () => app.swagger());
}
