import { Type, type TSchema } from 'typebox';
import { UUID_PATTERN } from '../../core/uuid.js';

/** Shapes shared by the sync routes; they drive validation, the types and the OpenAPI document. */
export const Uuid = Type.String({ pattern: UUID_PATTERN, description: 'UUID' });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });

export const ErrorBody = Type.Object({
  error: Type.String({ description: 'Error code (docs/sync-api.md, "Error codes")' }),
  details: Type.Optional(Type.String()),
  retry_after: Type.Optional(Type.Integer({ description: 'Seconds to wait (429 and load-shedding 503)' })),
});

const ERROR_MEANING: Record<number, string> = {
  400: 'Invalid request (validation failed); `details` names the field',
  401: 'Missing, invalid, expired or revoked credentials',
  403: 'Authenticated but not allowed (not a member, not an owner, wrong token kind)',
  404: 'No such resource',
  409: 'Conflicts with the current state',
  413: 'Body too large',
  415: 'Body is not JSON',
  429: 'Rate limit exceeded or login locked; `retry_after` and the Retry-After header say when to retry',
  503: 'Shedding load (too many push/pull in progress for this user or instance, or a stalled event loop) or shutting down; `retry_after` and Retry-After say when to retry',
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
