import { Type } from 'typebox';
import type { App } from '../../core/http/create-app.js';
import type { SyncDeps } from '../deps.js';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.js';
import { isMember, requireUser, resolveBusiness } from '../http/auth-guard.js';
import { BearerSecurity, errors } from '../http/schemas.js';
import { createPubSubNotifier } from '../feed/change-events.js';
import type { ChangeDeps } from './change-operations.js';
import { pullResultJson } from './change-rows.js';
import { listConflicts, pullChanges, pushChanges, resolveConflict, syncStatus } from './change-operations.js';
import {
  BusinessHeaderSchema, ConflictListQuerySchema, ConflictSchema, PullBodySchema, PullResultSchema, PushBodySchema, PushResultSchema, ResolveBodySchema, StatusSchema,
} from './change-schemas.js';

/**
 * Push, pull, status and conflicts. Each acts on one business, named by
 * X-Business-ID or carried by a business-scoped token; both token kinds are
 * accepted and membership is checked on every request.
 */
export function registerChangeRoutes(app: App, deps: SyncDeps): void {
  const auth = requireUser(deps);
  const changeDeps: ChangeDeps = {
    changes: deps.changes,
    notifier: createPubSubNotifier(deps.pubsub, app.log),
    now: deps.now,
    pullPage: { default: deps.config.pullPageSize, max: deps.config.pullPageMax, bytes: deps.config.pullPageBytes },
  };

  app.post('/api/sync/push', {
    onRequest: [auth, deps.diskGuard.hook],
    config: { expensive: true, repeatable: true },
    schema: {
      tags: ['sync'], summary: 'Apply changes and tombstones in one transaction', security: BearerSecurity,
      description: 'Invalid items are counted in `rejected` and explained in `rejections`; conflicting items are stored as pending conflicts and listed. 200 whenever the request itself is valid.',
      headers: BusinessHeaderSchema, body: PushBodySchema,
      response: { 200: PushResultSchema, ...errors(400, 401, 403, 404, 413, 415, 503) },
    },
  }, async (req) => {
    const businessId = await resolveBusiness(req, deps, req.body.business_id);
    const result = await pushChanges(changeDeps, businessId, {
      userId: req.caller.userId,
      instanceId: req.body.instance_id,
      branch: req.body.branch,
      changes: req.body.changes ?? [],
      tombstones: req.body.tombstones ?? [],
    });
    deps.selfMetrics.pushes.inc();
    deps.selfMetrics.pushedItems.inc({ outcome: 'accepted' }, result.accepted);
    deps.selfMetrics.pushedItems.inc({ outcome: 'rejected' }, result.rejected);
    deps.selfMetrics.pushedItems.inc({ outcome: 'conflict' }, result.conflicts.length);
    return result;
  });

  app.post('/api/sync/pull', {
    onRequest: auth,
    config: { expensive: true, repeatable: true },
    schema: {
      tags: ['sync'], summary: 'Changes after since_version, one page at a time, in version order', security: BearerSecurity,
      headers: BusinessHeaderSchema, body: PullBodySchema,
      response: { 200: PullResultSchema, ...errors(400, 401, 403, 404, 413, 415, 503) },
    },
  }, async (req, reply) => {
    const businessId = await resolveBusiness(req, deps, req.body.business_id);
    const page = await pullChanges(changeDeps, businessId, req.body.since_version, req.body.limit);
    deps.selfMetrics.pulledChanges.inc(page.changes.length);
    // A string with a JSON content type is sent as it is: the schema above documents the shape, pullResultJson
    // writes it (the typed reply expects the object form, hence the cast).
    return reply.type('application/json; charset=utf-8').send(pullResultJson(page) as never);
  });

  app.get('/api/sync/status', {
    onRequest: auth,
    schema: {
      tags: ['sync'], summary: 'Server version and pending conflicts of the business', security: BearerSecurity,
      headers: BusinessHeaderSchema,
      response: { 200: StatusSchema, ...errors(400, 401, 403, 404) },
    },
  }, async (req) => syncStatus(changeDeps, await resolveBusiness(req, deps)));

  app.get('/api/sync/conflicts', {
    onRequest: auth,
    schema: {
      tags: ['sync'], summary: 'Conflicts of the business (pending by default), by ascending id', security: BearerSecurity,
      headers: BusinessHeaderSchema, querystring: ConflictListQuerySchema,
      response: { 200: Type.Array(ConflictSchema), ...errors(400, 401, 403, 404) },
    },
  }, async (req) => listConflicts(changeDeps, await resolveBusiness(req, deps), req.query));

  app.post('/api/sync/conflicts/:id/resolve', {
    onRequest: auth,
    schema: {
      tags: ['sync'], summary: 'Resolve a pending conflict: local (apply the pushed data), remote (keep the server data) or skip', security: BearerSecurity,
      headers: BusinessHeaderSchema,
      params: Type.Object({ id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) }),
      body: ResolveBodySchema,
      response: { 200: ConflictSchema, ...errors(400, 401, 403, 404, 409, 413, 415) },
    },
  }, async (req) => resolveConflict(changeDeps, await conflictTarget(req, deps, req.params.id), req.caller.userId, req.params.id, req.body.resolution));
}

/**
 * The business a resolve acts on. Named by X-Business-ID or a business token,
 * it follows the rules of every sync request; otherwise (a user token alone)
 * it is the conflict's own business, as attachment download finds the
 * attachment's. The caller must be a member of it: if not, 404, exactly as for
 * an unknown id, so another business's conflict ids reveal nothing.
 */
async function conflictTarget(req: FastifyRequest, deps: SyncDeps, conflictId: number): Promise<string> {
  if (req.headers['x-business-id'] !== undefined || req.caller.businessId !== undefined) return resolveBusiness(req, deps);
  const businessId = await deps.changes.conflictBusiness(conflictId);
  if (businessId === undefined || !(await isMember(deps, req.caller.userId, businessId))) throw new AppError('not_found', `conflict ${conflictId} not found`);
  return businessId;
}
