import { Type } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import { AppError } from '../../core/errors.js';
import type { SyncDeps } from '../deps.js';
import { createBusiness, getBusiness, listBusinesses, type BusinessView } from './businesses.js';
import { addMember, listMembers, removeMember } from './members.js';
import type { Member } from './business-store.js';
import { ROLES } from './role.js';
import { requireUser } from '../http/auth-guard.js';
import { withAccessChange } from '../feed/change-events.js';
import { BearerSecurity, errors, isoTime, Timestamp, Uuid } from '../http/schemas.js';
import { normalizeUuid } from '../../core/uuid.js';

const Role = Type.Union([Type.Literal(ROLES[0]), Type.Literal(ROLES[1])], { description: 'owner: manages members; member: uses the data' });

export const BusinessBody = Type.Object({
  id: Uuid,
  name: Type.String(),
  abn: Type.String({ description: '11 digits' }),
  role: Role,
  created_at: Timestamp,
});

export const MemberBody = Type.Object({
  user_id: Uuid,
  email: Type.String(),
  name: Type.String(),
  role: Role,
  added_at: Timestamp,
});

// Path ids are plain strings in the schema so a malformed one is our clear 400, not a generic pattern message.
const BusinessParams = Type.Object({ id: Type.String({ description: 'Business UUID' }) });

function businessReply(b: BusinessView) {
  return { id: b.id, name: b.name, abn: b.abn, role: b.role, created_at: isoTime(b.createdAt) };
}

function memberReply(m: Member) {
  return { user_id: m.userId, email: m.email, name: m.name, role: m.role, added_at: isoTime(m.addedAt) };
}

function pathUuid(raw: string, what: string): string {
  const id = normalizeUuid(raw);
  if (!id) throw new AppError('invalid_request', `${what}: must be a UUID`);
  return id;
}

/** Businesses and their members; every route needs a user token (business-scoped tokens are for the sync endpoints). */
export function registerBusinessRoutes(app: App, deps: SyncDeps): void {
  const userOnly = requireUser(deps, { tokenKinds: ['user'] });

  app.get('/api/business', {
    onRequest: userOnly,
    schema: {
      tags: ['businesses'], summary: 'The businesses the caller belongs to', security: BearerSecurity,
      response: { 200: Type.Array(BusinessBody), ...errors(401, 403) },
    },
  }, async (req) => (await listBusinesses(deps, req.caller.userId)).map(businessReply));

  app.post('/api/business', {
    onRequest: userOnly,
    schema: {
      tags: ['businesses'], summary: 'Create a business; the caller becomes its owner', security: BearerSecurity,
      body: Type.Object({ name: Type.String({ maxLength: 1000 }), abn: Type.String({ maxLength: 100 }) }, { additionalProperties: false }),
      response: { 201: BusinessBody, ...errors(400, 401, 403, 413, 415) },
    },
  }, async (req, reply) => reply.code(201).send(businessReply(await createBusiness(deps, req.caller.userId, req.body))));

  app.get('/api/business/:id', {
    onRequest: userOnly,
    schema: {
      tags: ['businesses'], summary: 'One business the caller belongs to', security: BearerSecurity,
      params: BusinessParams,
      response: { 200: BusinessBody, ...errors(400, 401, 403, 404) },
    },
  }, async (req) => businessReply(await getBusiness(deps, req.caller.userId, pathUuid(req.params.id, 'id'))));

  app.get('/api/business/:id/members', {
    onRequest: userOnly,
    schema: {
      tags: ['businesses'], summary: 'Members of a business (any member may list)', security: BearerSecurity,
      params: BusinessParams,
      response: { 200: Type.Array(MemberBody), ...errors(400, 401, 403, 404) },
    },
  }, async (req) => (await listMembers(deps, req.caller.userId, pathUuid(req.params.id, 'id'))).map(memberReply));

  app.post('/api/business/:id/members', {
    onRequest: userOnly,
    schema: {
      tags: ['businesses'], summary: 'Add a registered user by e-mail (owners only)', security: BearerSecurity,
      params: BusinessParams,
      body: Type.Object({ email: Type.String({ maxLength: 1000 }), role: Type.Optional(Role) }, { additionalProperties: false }),
      response: { 201: MemberBody, ...errors(400, 401, 403, 404, 409, 413, 415) },
    },
  }, async (req, reply) => {
    const m = await addMember(deps, req.caller.userId, pathUuid(req.params.id, 'id'), { email: req.body.email, role: req.body.role ?? 'member' });
    return reply.code(201).send(memberReply(m));
  });

  app.delete('/api/business/:id/members/:userId', {
    onRequest: userOnly,
    schema: {
      tags: ['businesses'], summary: 'Remove a member (owners; or a member removing themselves)', security: BearerSecurity,
      params: Type.Object({ id: Type.String(), userId: Type.String() }),
      response: { 204: Type.Null({ description: 'Removed' }), ...errors(400, 401, 403, 404, 409) },
    },
  }, async (req, reply) => {
    const businessId = pathUuid(req.params.id, 'id');
    const userId = pathUuid(req.params.userId, 'userId');
    // The removed member's feed connections, on every instance, are closed now rather than at the next heartbeat,
    // before any change committed after the removal reaches them.
    await withAccessChange(deps.pubsub, req.log, [businessId], () => removeMember(deps, req.caller.userId, businessId, userId));
    return reply.code(204).send(null);
  });
}
