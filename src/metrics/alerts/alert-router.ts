import type { Alert } from './alert.js';
import { routeMatches, type AlertRoute } from './alert-route.js';
import { buildWebhookPayload, type AlertContext } from './webhook-payload.js';

export { loadAlertRoutes, type AlertRoute } from './alert-route.js';
export type { AlertContext } from './webhook-payload.js';

/**
 * The outcome of sending one alert to one route; ingest answers 202 with these
 * when any failed. `status` is the receiver's HTTP status when it answered;
 * `error` says why delivery failed. The webhook URL is never echoed back: it
 * can carry the receiver's secret.
 */
export interface AlertResult {
  alert: string;
  route: string;
  outcome: 'delivered' | 'failed';
  status?: number;
  error?: string;
}

export interface AlertRouter {
  /**
   * Sends every alert to every route it matches and resolves with one result
   * per (alert, matching route), in alert order then route order; alerts that
   * match no route produce no result. Never rejects: failures are results.
   */
  route(ctx: AlertContext, alerts: Alert[]): Promise<AlertResult[]>;
}

type Delivery = Pick<AlertResult, 'outcome' | 'status' | 'error'>;

/**
 * Alerts of one report that match the same route travel in one POST (as
 * Alertmanager groups them), so they share an outcome. Routes are delivered
 * concurrently, each bounded by `timeoutMs`, so an ingest waits at most about
 * one timeout however many routes are slow.
 */
export function createAlertRouter(routes: AlertRoute[], opts: { timeoutMs: number }): AlertRouter {
  return {
    async route(ctx, alerts) {
      const groups = routes
        .map((route) => ({ route, alerts: alerts.filter((a) => routeMatches(route, a)) }))
        .filter((g) => g.alerts.length > 0);
      const deliveries = await Promise.all(
        groups.map((g) => deliver(g.route, JSON.stringify(buildWebhookPayload(g.route.name, ctx, g.alerts)), opts.timeoutMs)),
      );
      const results: AlertResult[] = [];
      for (const alert of alerts) {
        groups.forEach((g, i) => {
          if (g.alerts.includes(alert)) results.push({ alert: alert.name, route: g.route.name, ...deliveries[i]! });
        });
      }
      return results;
    },
  };
}

async function deliver(route: AlertRoute, body: string, timeoutMs: number): Promise<Delivery> {
  try {
    const res = await fetch(route.url, {
      method: 'POST',
      headers: { ...route.headers, 'content-type': 'application/json', 'user-agent': 'fleetsync-metrics-alerts' },
      body,
      // A redirect is a misconfigured receiver, not something to follow to an unchecked host.
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body?.cancel();
    if (res.status >= 200 && res.status < 300) return { outcome: 'delivered', status: res.status };
    return { outcome: 'failed', status: res.status, error: `receiver answered HTTP ${res.status}` };
  } catch (e: unknown) {
    return { outcome: 'failed', error: describeFetchError(e, timeoutMs) };
  }
}

function describeFetchError(e: unknown, timeoutMs: number): string {
  if (e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError')) return `no answer within ${timeoutMs} ms`;
  const cause = e instanceof Error ? (e.cause as { code?: unknown } | undefined) : undefined;
  if (typeof cause?.code === 'string') return `connection failed (${cause.code})`;
  return 'connection failed';
}
