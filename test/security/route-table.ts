import type { App } from '../../src/core/http/create-app.js';

export interface RouteEntry {
  method: string;
  /** The route pattern, e.g. `/api/business/:id/members`. */
  url: string;
}

/**
 * Every route the app serves, read from Fastify's own route tree
 * (`printRoutes`), so a route added later is listed without anyone
 * remembering to add it to a test. HEAD twins of GET routes are left out.
 */
export function routeTable(app: App): RouteEntry[] {
  const out: RouteEntry[] = [];
  const prefixes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^((?:[│ ] {3})*)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    const url = (depth ? prefixes[depth - 1]! : '') + m[2]!;
    prefixes[depth] = url;
    prefixes.length = depth + 1;
    for (const method of (m[3] ?? '').split(', ').filter(Boolean)) {
      if (method !== 'HEAD') out.push({ method, url });
    }
  }
  if (!out.length) throw new Error('no route read from printRoutes(): its format changed');
  return out;
}

/** `/a/:id/b/:userId` with `values(name)` substituted for each parameter. */
export function fillParams(url: string, value: (param: string) => string): string {
  return url.replace(/:([A-Za-z_]+)/g, (_, name: string) => encodeURIComponent(value(name)));
}
