import type { FastifyReply } from 'fastify';

/**
 * An AbortSignal that fires when the client closes its connection before the
 * answer went out: an append still waiting for its commit is then withdrawn
 * instead of being committed for nobody.
 */
export function clientGone(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  const res = reply.raw;
  // Gone already (while its body was read, before this was asked): its 'close' came before anyone listened.
  if (res.destroyed && !res.writableEnded) ac.abort();
  else res.once('close', () => { if (!res.writableEnded) ac.abort(); });
  return ac.signal;
}
