import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Adds fields (tenant, business, user) to every later log line of this
 * request, the final "request completed" line included. Call it once the
 * request is authenticated; it replaces both loggers because Fastify logs the
 * completion through the reply's logger. Only identifiers belong here, never
 * a credential.
 */
export function bindLogContext(req: FastifyRequest, reply: FastifyReply, fields: Record<string, string | number>): void {
  req.log = req.log.child(fields);
  reply.log = req.log;
}
