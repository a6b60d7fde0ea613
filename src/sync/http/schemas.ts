import { Type, type TSchema } from 'typebox';
import { UUID_PATTERN } from '../../core/uuid.js';

/** Shapes shared by the sync routes; they drive validation, the types and the OpenAPI document. */
export const Uuid = Type.String({ pattern: UUID_PATTERN, description: 'UUID' });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });

export const ErrorBody = Type.Object({
  error: Type.String({ description: 'Error code (docs/sync-api.md, "Error codes")' }),
  details: Type.Optional(Type.String()),
  retry_after: Type.Optional(Type.Integer({ description: 'Seconds to wait (429, and 503 when known)' })),
});

const ERROR_MEANING: Record<number, string> = {
  400: 'Invalid request (validation failed); `details` names the field',
  401: 'Missing, invalid, expired or revoked credentials',
  403: 'Authenticated but not allowed (not a member, not an owner, wrong token kind)',
  404: 'No such resource',
  408: 'The body did not arrive in time (an upload: nothing arrived for 30 s); the connection is closed',
  409: 'Conflicts with the current state',
  413: 'Body too large',
  415: 'Body is not JSON',
  429: 'Rate limit exceeded or login locked; `retry_after` and the Retry-After header say when to retry',
  503: 'Overloaded (password-hashing queue full; push/pull past the load-shedding bounds) or a dependency unreachable, or shutting down; `retry_after` when known',
};

/** Error responses for a route's schema; 413/415/429 are always possible on the sync service. */
export function errors(...statuses: number[]): Record<number, TSchema> {
  const all = [...new Set([...statuses, 429])].sort();
  return Object.fromEntries(all.map((s) => [s, { ...ErrorBody, description: ERROR_MEANING[s] ?? 'Error' }]));
}

export const UserBody = Type.Object({
  id: Uuid,
  email: Type.String(),
  name: Type.String(),
});

export const BearerSecurity = [{ bearer: [] }];

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
