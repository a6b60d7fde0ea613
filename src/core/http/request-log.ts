import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import { redactUrl } from './redact.js';

/**
 * One log line per request at info, as operators expect from a web service:
 * method, route pattern, status, duration, and (through reply.log) the tenant
 * or user authentication bound (log-context.ts). Fastify's "incoming request"
 * line moves to debug.
 */
export class RequestLogController extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const fields = {
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      url: redactUrl(request.url),
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (error) reply.log.error({ ...fields, err: error }, 'request errored');
    else reply.log.info(fields, 'request completed');
  }
}
