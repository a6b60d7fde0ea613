import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Adds fields (tenant, business, user) to every later log line of this
 * request, the final "request completed" line included. Call it once the
 * request is authenticated. Fastify gives each request its own child of the
 * server's logger (with the request id), shared by the reply, which logs the
 * completion: the fields are added to that child in place, not through a
 * second child per request. Only identifiers belong here, never a credential.
 */
export function bindLogContext(req: FastifyRequest, reply: FastifyReply, fields: Record<string, string | number>): void {
  const own = req.log as typeof req.log & { setBindings?: (bindings: Record<string, unknown>) => void };
  if (own !== req.server.log && typeof own.setBindings === 'function') {
    own.setBindings(fields);
  } else {
    req.log = req.log.child(fields);
  }
  reply.log = req.log;
}
