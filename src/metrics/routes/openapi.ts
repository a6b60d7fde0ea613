import type { App } from '../../core/http/create-app.js';

/**
 * GET /api/v1/openapi.json: the OpenAPI 3 document generated from the route
 * schemas. Public on purpose (like PowerSync's and most APIs' published
 * specs): it describes the interface and holds no tenant data.
 */
export function registerOpenApiRoute(app: App): void {
  app.get('/api/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
