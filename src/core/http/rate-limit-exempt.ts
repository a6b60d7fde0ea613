import type { FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `false` exempts the route from the service's rate limits: probes
     * (`/healthz`, `/readyz`) and the token-protected `/metrics` are polled by
     * load balancers and Prometheus from a few addresses, and must keep
     * answering while clients are being throttled.
     */
    rateLimit?: false;
  }
}

/** What a service's rate-limit hook consults before counting a request. */
export function isRateLimitExempt(req: Pick<FastifyRequest, 'routeOptions'>): boolean {
  return req.routeOptions.config?.rateLimit === false;
}
