import { Type, type Static } from 'typebox';
import { Uuid } from '../http/schemas.js';
import { CONFLICT_PAGE, PUSH_LIMITS } from './change-limits.js';

/**
 * Wire shapes of the change endpoints. Domain types are inferred from these,
 * so the OpenAPI document, request validation and the code agree.
 */


export const OperationSchema = Type.Union([Type.Literal('create'), Type.Literal('update'), Type.Literal('delete')]);
export type Operation = Static<typeof OperationSchema>;

export const ResolutionSchema = Type.Union([Type.Literal('local'), Type.Literal('remote'), Type.Literal('skip')]);
export type Resolution = Static<typeof ResolutionSchema>;

/** A change as returned by pull. `version` is the business-wide server version; `record_version` the device numbering. */
export const ChangeSchema = Type.Object({
  id: Type.Integer({ description: 'Row id; increases with version but is not per business.' }),
  business_id: Uuid,
  version: Type.Integer({ description: 'Server version of this change: strictly increasing per business, no gaps, no reuse.' }),
  table_name: Type.String(),
  record_uuid: Uuid,
  operation: OperationSchema,
  data: Type.Record(Type.String(), Type.Unknown(), { description: 'Record fields; `{}` for a delete.' }),
  record_version: Type.Integer({ description: 'The record version as devices number it (create = 1, each update +1); a device continues from it.' }),
  instance_id: Type.String({ description: 'Originating device.' }),
  created_at: Type.String({ description: 'ISO 8601 UTC timestamp.' }),
});
export type Change = Static<typeof ChangeSchema>;

export const ConflictSchema = Type.Object({
  id: Type.Integer(),
  business_id: Uuid,
  branch_name: Type.String(),
  table_name: Type.String(),
  record_uuid: Uuid,
  local_data: Type.String({ description: 'JSON text of the pushed data; the text `null` for a pushed delete.' }),
  remote_data: Type.String({ description: 'JSON text of the server data when the conflict arose; the text `null` if the record was deleted.' }),
  resolution: Type.Union([Type.Literal('pending'), ResolutionSchema]),
  created_at: Type.String(),
  operation: OperationSchema,
  version: Type.Integer({ description: 'The record version the device pushed.' }),
  instance_id: Type.String({ description: 'Device that pushed the conflicting change.' }),
  resolved_at: Type.Union([Type.String(), Type.Null()]),
  applied_version: Type.Union([Type.Integer(), Type.Null()], { description: 'Server version of the change a `local` resolution applied; null otherwise.' }),
});
export type Conflict = Static<typeof ConflictSchema>;

export const PushBodySchema = Type.Object({
  business_id: Uuid,
  instance_id: Type.String({ pattern: PUSH_LIMITS.instanceIdPattern.source, description: 'Device id: 1-128 of A-Z a-z 0-9 . _ : -' }),
  branch: Type.Optional(Type.String({ minLength: 1, maxLength: PUSH_LIMITS.maxBranchLength, description: 'Recorded on conflicts as branch_name; default `main`.' })),
  // Items are checked one by one in the domain so a bad item is rejected with a reason instead of failing the push.
  changes: Type.Optional(Type.Array(Type.Unknown(), { maxItems: PUSH_LIMITS.maxItems, description: 'Change items: {table_name, record_uuid, version, operation, data}.' })),
  tombstones: Type.Optional(Type.Array(Type.Unknown(), { maxItems: PUSH_LIMITS.maxItems, description: 'Tombstone items: {table_name, record_uuid, version}.' })),
}, { additionalProperties: false });
export type PushBody = Static<typeof PushBodySchema>;

export const RejectionSchema = Type.Object({
  kind: Type.Union([Type.Literal('change'), Type.Literal('tombstone')]),
  index: Type.Integer({ description: 'Position in the pushed `changes` or `tombstones` array.' }),
  table_name: Type.Optional(Type.String()),
  record_uuid: Type.Optional(Type.String()),
  reason: Type.String(),
});
export type Rejection = Static<typeof RejectionSchema>;

export const PushResultSchema = Type.Object({
  accepted: Type.Integer({ description: 'Items applied now, plus retries of items already applied (applied once, never twice).' }),
  rejected: Type.Integer({ description: 'Invalid or stale items; each has an entry in `rejections`.' }),
  server_version: Type.Integer({ description: 'The business server version after this push.' }),
  conflicts: Type.Array(ConflictSchema, { description: 'Items not applied because another device changed the record; stored as pending conflicts.' }),
  rejections: Type.Array(RejectionSchema),
});
export type PushResult = Static<typeof PushResultSchema>;

export const PullBodySchema = Type.Object({
  since_version: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  limit: Type.Optional(Type.Integer({ minimum: 1, description: 'Page size; default --pull-page-size (500), a larger value is reduced to --pull-page-max (1000).' })),
  business_id: Type.Optional(Uuid),
}, { additionalProperties: false });

export const PullResultSchema = Type.Object({
  changes: Type.Array(ChangeSchema),
  version: Type.Integer({ description: 'The version reached: the last change of the page when has_more, else the current server version.' }),
  has_more: Type.Boolean(),
});
export type PullResult = Static<typeof PullResultSchema>;

export const StatusSchema = Type.Object({
  business_id: Uuid,
  server_version: Type.Integer(),
  pending_conflicts: Type.Integer(),
});
export type SyncStatus = Static<typeof StatusSchema>;

export const ConflictFilterSchema = Type.Union([Type.Literal('pending'), Type.Literal('resolved'), Type.Literal('all')]);
export type ConflictFilter = Static<typeof ConflictFilterSchema>;

export const ConflictListQuerySchema = Type.Object({
  status: Type.Optional(ConflictFilterSchema),
  after_id: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Return conflicts with a larger id (paging).' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, description: `Default ${CONFLICT_PAGE.default}; a larger value than ${CONFLICT_PAGE.max} is reduced to it.` })),
});

/** The optional X-Business-ID header of every business-scoped endpoint (the rules are in resolveBusiness). */
export const BusinessHeaderSchema = Type.Object({ 'x-business-id': Type.Optional(Type.String({ description: 'Business UUID; required with a user token, optional with a business-scoped token (must then agree with it).' })) });

export const ResolveBodySchema = Type.Object({ resolution: ResolutionSchema }, { additionalProperties: false });
