import { Type, type TSchema } from 'typebox';
import { UUID_PATTERN } from '../../core/uuid.js';
import type { ErrorCode } from '../../core/errors.js';
import { BEARER_SECURITY, errorResponses } from '../../core/http/openapi.js';

/** Shapes shared by the sync routes; they drive validation, the types and the OpenAPI document. */
export const Uuid = Type.String({ pattern: UUID_PATTERN, description: 'UUID' });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });

/** What each error status means on the sync service, for the OpenAPI document. */
const ERROR_MEANING: Record<number, [ErrorCode, string]> = {
  400: ['invalid_request', 'Invalid request (validation failed); `details` names the field'],
  401: ['unauthorized', 'Missing, invalid, expired or revoked credentials'],
  403: ['forbidden', 'Authenticated but not allowed (not a member, not an owner, wrong token kind)'],
  404: ['not_found', 'No such resource'],
  408: ['request_timeout', 'The body did not arrive in time (an upload: nothing arrived for 30 s); the connection is closed'],
  409: ['conflict', 'Conflicts with the current state'],
  413: ['payload_too_large', 'Body too large'],
  415: ['unsupported_media_type', 'Body is not in the endpoint\'s media type (JSON, unless the endpoint says otherwise)'],
  422: ['limit_exceeded', 'A documented bound was reached (unfinished uploads per user)'],
  416: ['range_not_satisfiable', 'The Range selects no byte of the file; Content-Range: bytes */size gives its size'],
  429: ['rate_limited', 'Rate limit exceeded or login locked; `retry_after` and the Retry-After header say when to retry'],
  503: ['unavailable', 'Overloaded (password-hashing queue full; push/pull past the load-shedding bounds) or a dependency unreachable, or shutting down; `retry_after` when known'],
};

/** Error responses for a route's schema, by status (through the core's one helper); 429 is always possible on the sync service. */
export function errors(...statuses: number[]): Record<number, TSchema> {
  const all = [...new Set([...statuses, 429])];
  return errorResponses(Object.fromEntries(all.map((s) => {
    const meaning = ERROR_MEANING[s];
    if (!meaning) throw new Error(`no documented meaning for status ${s}`);
    return meaning;
  })));
}

export const UserBody = Type.Object({
  id: Uuid,
  email: Type.String(),
  name: Type.String(),
});

export const BearerSecurity = BEARER_SECURITY;

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
