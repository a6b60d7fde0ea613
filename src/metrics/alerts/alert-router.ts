import { createHash } from 'node:crypto';
import type { Alert } from './alert.js';
import { routeMatches, routeTiming, type AlertRoute, type RouteTiming } from './alert-route.js';
import { hostKey, routeStates, type AlertStore, type RouteNotification, type StoredAlert } from './alert-store.js';
import { SERVICE_LABELS, buildWebhookPayload, type AlertContext } from './webhook-payload.js';

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
  /** Present on a resolved notification: the alert stopped being reported. */
  resolved?: true;
}

export interface AlertRouter {
  /**
   * Records the alerts one stored report of a host carries (none resolves
   * every incident of that host) and sends the notifications that are due:
   * first notifications (after the route's group_wait), repeats (after its
   * repeat_interval), retries of failed ones, and resolved notifications (retried too while they fail, for up to
   * the route's repeat_interval).
   * Resolves with one result per (alert, route) notified now: the report's
   * alerts in alert order then route order, then resolved alerts. An alert
   * already notified within repeat_interval, or whose notification a
   * concurrent report of the host claimed (on any instance), has no result:
   * each notification is sent once. Never rejects for a delivery: failures
   * are results.
   */
  route(ctx: AlertContext, alerts: Alert[]): Promise<AlertResult[]>;
  /**
   * `route` for each report in turn (a bulk body's, in line order), one
   * answer per report. A route whose delivery failed is not called again for
   * the later reports: their notifications to it are failed results whose
   * `error` says so, and stay due for the next request. The open incidents of every host in the batch are read
   * at once, for each host's first report. A report without alerts of a host the batch's earlier
   * reports left without any open incident is not looked up again: nothing
   * could resolve, so its answer is empty without a read.
   */
  routeAll(reports: Array<{ ctx: AlertContext; alerts: Alert[] }>): Promise<AlertResult[][]>;
}

type Delivery = Pick<AlertResult, 'outcome' | 'status' | 'error'>;

/**
 * How long past the alert timeout a claimed notification ('sending') stays another report's to finish: delivery is
 * bounded by the timeout, and recording its outcome takes the host's hold, which nothing keeps for long. A claim
 * older than that belongs to an instance that stopped, and the next report sends the notification again.
 */
const CLAIM_GRACE_MS = 30_000;

export interface AlertRouterOptions {
  timeoutMs: number;
  /** Incidents and their notification state; shared by every instance, so any instance can take any report. */
  store: AlertStore;
  now: () => number;
}

/** Identity of an incident across reports: the alert's name, severity and agent labels (not its value or message). */
export function incidentFingerprint(alert: Alert): string {
  // The labels the service sets override the agent's of the same name in every notification: they are no part of
  // what tells two alerts apart (two incidents would go out under one payload fingerprint).
  const labels = Object.entries(alert.labels ?? {}).filter(([name]) => !SERVICE_LABELS.has(name)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256').update(JSON.stringify([alert.name, alert.severity, labels])).digest('hex').slice(0, 16);
}

/**
 * Alertmanager's grouping and de-duplication, driven by reports: the group is
 * (route, tenant, host), and a host's alerts are re-evaluated on each of its
 * reports (agents send every firing alert on every report), so no timer is
 * needed and any instance can take any report. When a route has anything due
 * for a host, one POST carries every alert of that host firing on that route
 * plus the ones just resolved (as Alertmanager re-sends the whole group), so
 * they share an outcome. Routes are delivered concurrently, each bounded by
 * `timeoutMs`, so an ingest waits at most about one timeout.
 */
export function createAlertRouter(routes: AlertRoute[], opts: AlertRouterOptions): AlertRouter {
  const timed = routes.map((route) => ({ route, timing: routeTiming(route) }));
  const claimLeaseMs = opts.timeoutMs + CLAIM_GRACE_MS;
  /**
   * Routes one report; `openAfter` counts the host's incidents still open once it is recorded, `sent` says whether
   * it sent notifications (which can take up to the timeout). `read`: the host's open incidents, already asked for.
   * `failedRoutes`: the routes that failed earlier in the same request, by name, which are not called again.
   * `pendingAfter`: how many reports of the host newer than this one are stored but still to be routed after it
   * (the later lines of the same bulk body).
   */
  async function routeOne(ctx: AlertContext, alerts: Alert[], read?: Promise<StoredAlert[]>, failedRoutes = new Map<string, Delivery>(), pendingAfter = () => 0): Promise<{ results: AlertResult[]; openAfter: number; sent: boolean }> {
    const now = opts.now();
    // The read without a hold decides whether the report can change anything: most reports of a quiet host cannot.
    const known = await (read ?? opts.store.firing(ctx.tenantId, ctx.hostId));
    // Most reports: no alert, and nothing open or pending to resolve. The plan would find nothing to do.
    if (!alerts.length && !known.length) return { results: [], openAfter: 0, sent: false };
    const hint = plan(known, ctx, alerts, now, timed, claimLeaseMs);
    if (!hint.changed) return { results: [], openAfter: hint.openAfter, sent: false };
    // Planned again and claimed under the host's hold, on what is committed now: of concurrent reports of one host, on
    // any instance, only the first finds a notification due, and the others find it claimed ('sending').
    const { current, resolved, openAfter, sends } = await opts.store.forHost(ctx.tenantId, ctx.hostId, async (host) => {
      const open = await host.open();
      // A late report (a spool sent out of order, a relay's backlog) opens nothing once a newer report of the host is
      // stored (but for the body's later lines, routed after it): that report did not carry the alert (it would have
      // opened it, or kept it open), or resolved it since, so it had cleared, and nobody is paged for what has cleared.
      // Asked under the hold, on its connection, only when the report would open an incident, which is rare.
      const firing = new Set(open.filter((i) => i.resolvedAt === null).map((i) => i.fingerprint));
      const opens = alerts.some((a) => !firing.has(incidentFingerprint(a)));
      const late = opens && await host.reportsAfter(ctx.ts) > pendingAfter();
      const held = plan(open, ctx, late ? alerts.filter((a) => firing.has(incidentFingerprint(a))) : alerts, now, timed, claimLeaseMs);
      for (const s of held.sends) {
        for (const c of s.firing) c.incident.routes[s.route.name] = claimed(c.incident.routes[s.route.name], now);
        for (const r of s.ending) {
          const state = r.incident.routes[s.route.name]!;
          state.resolved = { at: now, since: state.resolved ? state.resolved.since ?? state.resolved.at : now, outcome: 'sending' };
          // Claimed: should this instance stop before recording the outcome, a later report finds it and sends again.
          r.incident.resolvePending = true;
        }
      }
      for (const p of held.lapsed) p.incident.resolvePending = false;
      const claimedKnown = new Set(held.sends.flatMap((s) => s.firing.filter((c) => !c.isNew)));
      const claimedPending = new Set(held.sends.flatMap((s) => s.ending.filter((r) => r.pending)));
      const opened = held.current.filter((c) => c.isNew);
      const ids = await host.record({
        opened: opened.map((c) => c.incident),
        updated: [
          ...held.current.filter((c) => !c.isNew && (c.refreshed || claimedKnown.has(c))).map((c) => c.incident),
          ...held.resolved.map((r) => r.incident),
          ...[...new Set([...claimedPending, ...held.lapsed])].map((p) => p.incident),
        ],
      });
      opened.forEach((c, i) => { c.incident.id = ids[i]!; });
      return held;
    });
    if (!sends.length) return { results: [], openAfter, sent: false };
    // A route that failed earlier in the request is not called again: a dead receiver costs a bulk body one timeout,
    // not one per line. Its notifications stay due (failed), so the host's next request tries again.
    const deliveries = await Promise.all(sends.map(async (s) => {
      const earlier = failedRoutes.get(s.route.name);
      if (earlier) return earlier;
      const delivery = await deliver(s.route, JSON.stringify(buildWebhookPayload(s.route.name, ctx, [
        ...s.firing.map((c) => ({ alert: c.alert, startsAt: c.incident.startsAt })),
        ...s.ending.map((r) => ({ alert: r.alert, startsAt: r.incident.startsAt, endsAt: r.incident.resolvedAt! })),
      ])), opts.timeoutMs);
      if (delivery.outcome === 'failed') failedRoutes.set(s.route.name, { outcome: 'failed', error: `not sent: this route failed earlier in the request (${delivery.error!})` });
      return delivery;
    }));
    // The outcomes go into what is committed now (another report may have refreshed or resolved the incidents
    // meanwhile), for the claims still this report's. A crash before this leaves the claim to expire and be retried.
    await opts.store.forHost(ctx.tenantId, ctx.hostId, async (host) => {
      const ids = [...new Set(sends.flatMap((s) => [...s.firing, ...s.ending].map((t) => t.incident.id)))];
      const fresh = new Map((await host.byIds(ids)).map((i) => [i.id, i]));
      const updated = new Set<StoredAlert>();
      sends.forEach((s, i) => {
        for (const c of s.firing) {
          const incident = fresh.get(c.incident.id);
          const state = incident?.routes[s.route.name];
          if (!incident || state?.outcome !== 'sending' || state.notifiedAt !== now) continue;
          incident.routes[s.route.name] = notified(state, now, deliveries[i]!);
          updated.add(incident);
        }
        for (const r of s.ending) {
          const incident = fresh.get(r.incident.id);
          const state = incident?.routes[s.route.name];
          if (!incident || !state || state.resolved?.outcome !== 'sending' || state.resolved.at !== now) continue;
          state.resolved = { at: now, since: state.resolved.since ?? now, ...deliveries[i]! };
          updated.add(incident);
        }
      });
      for (const incident of updated) if (incident.resolvedAt !== null) incident.resolvePending = resolvePending(incident, timed, now);
      await host.record({ opened: [], updated: [...updated] });
    });
    const results: AlertResult[] = [];
    for (const c of current) {
      sends.forEach((s, i) => { if (s.firing.includes(c)) results.push({ alert: c.alert.name, route: s.route.name, ...deliveries[i]! }); });
    }
    // Then the resolved notifications: this report's, and earlier reports' sent again.
    const retried = [...new Set(sends.flatMap((s) => s.ending.filter((r) => r.pending)))];
    for (const r of [...resolved, ...retried]) {
      sends.forEach((s, i) => { if (s.ending.includes(r)) results.push({ alert: r.alert.name, route: s.route.name, resolved: true, ...deliveries[i]! }); });
    }
    return { results, openAfter, sent: true };
  }
  return {
    route: async (ctx, alerts) => (await routeOne(ctx, alerts)).results,
    async routeAll(reports) {
      // Each host's first read, all asked for at once (one statement): what one host's reports record changes nothing
      // another host reads. Its later reports read again, after what the earlier ones recorded.
      const firstReads = new Map<string, Promise<StoredAlert[]>>();
      for (const { ctx } of reports) {
        const host = hostKey(ctx.tenantId, ctx.hostId);
        if (firstReads.has(host)) continue;
        const read = opts.store.firing(ctx.tenantId, ctx.hostId);
        // Awaited by the host's first report; should an earlier one throw, nobody else would.
        read.catch(() => undefined);
        firstReads.set(host, read);
      }
      const clear = new Set<string>();
      const failedRoutes = new Map<string, Delivery>();
      const answers: AlertResult[][] = [];
      for (const [at, { ctx, alerts }] of reports.entries()) {
        const host = hostKey(ctx.tenantId, ctx.hostId);
        const read = firstReads.get(host);
        firstReads.delete(host);
        if (!alerts.length && clear.has(host)) { answers.push([]); continue; }
        // The body's later reports of the host are stored already, but routed after this one: they do not make it late.
        const pendingAfter = () => {
          let n = 0;
          for (let i = at + 1; i < reports.length; i++) {
            const later = reports[i]!.ctx;
            if (later.ts > ctx.ts && later.hostId === ctx.hostId && later.tenantId === ctx.tenantId) n++;
          }
          return n;
        };
        const { results, openAfter, sent } = await routeOne(ctx, alerts, read, failedRoutes, pendingAfter);
        // A report that notified took a round of webhooks (up to the timeout): other requests may have recorded
        // incidents of the hosts still ahead meanwhile, so those read again when their turn comes.
        if (sent) firstReads.clear();
        if (openAfter === 0) clear.add(host); else clear.delete(host);
        answers.push(results);
      }
      return answers;
    },
  };
}

interface Tracked {
  alert: Alert;
  /** A new incident has id 0 until it is recorded. */
  incident: StoredAlert;
  isNew: boolean;
  /** A known incident this report is the newest of: its last seen, value and message change. */
  refreshed: boolean;
  /** Resolved by an earlier report, its resolved notification still to be delivered to some route. */
  pending?: true;
}

/** One POST to one route: the group's firing alerts (when anything is due) and the alerts just resolved. */
interface Send {
  route: AlertRoute;
  firing: Tracked[];
  ending: Tracked[];
}

interface Plan {
  current: Tracked[];
  resolved: Tracked[];
  /**
   * Resolve-pending incidents no route will send again (delivered meanwhile, past their retries, or superseded by the
   * alert firing again): no longer pending.
   */
  lapsed: Tracked[];
  openAfter: number;
  sends: Send[];
  /** Whether recording the report changes anything. */
  changed: boolean;
}

/**
 * What one report does to the host's open incidents, and which notifications are due (resolved ones still pending
 * from earlier reports included). Changes only `firing`'s objects.
 */
function plan(firing: StoredAlert[], ctx: AlertContext, alerts: Alert[], now: number, timed: Array<{ route: AlertRoute; timing: RouteTiming }>, claimLeaseMs: number): Plan {
  const { current, resolved, openAfter } = reconcile(firing.filter((i) => i.resolvedAt === null), ctx, alerts, now);
  const firingNow = new Set(current.map((c) => c.incident.fingerprint));
  const earlier: Tracked[] = firing.filter((i) => i.resolvedAt !== null)
    .map((incident) => ({ incident, alert: storedAsAlert(incident), isNew: false, refreshed: false, pending: true }));
  // A resolution still to deliver of an alert that fires again is superseded: sent with (after) the new firing, under
  // the same fingerprint, it would close at a receiver the page that fires now.
  const superseded = earlier.filter((p) => firingNow.has(p.incident.fingerprint));
  const pending = earlier.filter((p) => !firingNow.has(p.incident.fingerprint));
  // Incidents still open that the report does not carry (a late report resolves nothing): they are part of the group
  // that goes out all the same, or a receiver keyed on the group would read it smaller than it is, and "resolved".
  const carried = new Set(current.map((c) => c.incident));
  const others: Tracked[] = firing.filter((i) => i.resolvedAt === null && !carried.has(i))
    .map((incident) => ({ incident, alert: storedAsAlert(incident), isNew: false, refreshed: false }));
  const sends = timed.map(({ route, timing }) => {
    const reported = current.filter((c) => routeMatches(route, c.alert));
    const firing = [...reported, ...others.filter((c) => routeMatches(route, c.alert))];
    const due = reported.some((c) => isDue(c.incident.routes[route.name], c.incident.createdAt, timing, now, claimLeaseMs));
    const ending = timing.sendResolved ? [
      ...resolved.filter((r) => heardOf(r.incident.routes[route.name]) && routeMatches(route, r.alert)),
      ...pending.filter((p) => resolveDue(p.incident.routes[route.name], timing, now, claimLeaseMs)),
    ] : [];
    // A resolved notification carries the group's still-firing alerts too: a receiver that keys on groupKey would
    // otherwise read status "resolved" and close a page that still fires.
    return { route, firing: due || ending.length ? firing : [], ending };
  }).filter((s) => s.firing.length || s.ending.length);
  const sent = new Set(sends.flatMap((s) => s.ending));
  const lapsed = [...superseded, ...pending.filter((p) => !sent.has(p) && !resolvePending(p.incident, timed, now))];
  const changed = sends.length > 0 || resolved.length > 0 || lapsed.length > 0 || current.some((c) => c.isNew || c.refreshed);
  return { current, resolved, lapsed, openAfter, sends, changed };
}

/**
 * Matches the report's alerts to the host's open incidents: a known one is
 * refreshed, a new one is opened, and open incidents the report no longer
 * carries are resolved at the report's ts. The same alert twice in one report counts once.
 */
function reconcile(firing: StoredAlert[], ctx: AlertContext, alerts: Alert[], now: number): { current: Tracked[]; resolved: Tracked[]; openAfter: number } {
  const open = new Map(firing.map((i) => [i.fingerprint, i]));
  const current: Tracked[] = [];
  const seen = new Set<string>();
  for (const alert of alerts) {
    const fingerprint = incidentFingerprint(alert);
    if (seen.has(fingerprint)) continue;
    seen.add(fingerprint);
    const known = open.get(fingerprint);
    const fields = { message: alert.message ?? null, value: alert.value ?? null, threshold: alert.threshold ?? null };
    if (known) {
      // A report older than the incident's latest (a drained spool) neither moves it back nor replaces its value and message.
      const refreshed = ctx.ts >= known.lastSeenAt;
      if (refreshed) Object.assign(known, fields, { lastSeenAt: ctx.ts });
      current.push({ alert, incident: known, isNew: false, refreshed });
    } else {
      const incident: StoredAlert = {
        id: 0, tenantId: ctx.tenantId, hostId: ctx.hostId, fingerprint, name: alert.name, severity: alert.severity,
        labels: alert.labels ?? {}, ...fields, startsAt: ctx.ts, lastSeenAt: ctx.ts, resolvedAt: null, createdAt: now, routes: routeStates(), resolvePending: false,
      };
      current.push({ alert, incident, isNew: true, refreshed: false });
    }
  }
  const resolved: Tracked[] = [];
  for (const incident of open.values()) {
    if (seen.has(incident.fingerprint) || ctx.ts <= incident.lastSeenAt) continue;
    incident.resolvedAt = ctx.ts;
    resolved.push({ incident, alert: storedAsAlert(incident), isNew: false, refreshed: false });
  }
  // Open incidents the report did not resolve (it carries them, or it is older than their last report), plus new ones.
  return { current, resolved, openAfter: open.size - resolved.length + current.filter((c) => c.isNew).length };
}

function storedAsAlert(i: StoredAlert): Alert {
  const alert: Alert = { name: i.name, severity: i.severity, labels: i.labels };
  if (i.message !== null) alert.message = i.message;
  if (i.value !== null) alert.value = i.value;
  if (i.threshold !== null) alert.threshold = i.threshold;
  return alert;
}

/** When the route last delivered a firing notification of the incident, if ever. */
function lastDelivered(state: RouteNotification | undefined): number | undefined {
  return state?.deliveredAt ?? (state?.outcome === 'delivered' ? state.notifiedAt : undefined);
}

/**
 * Whether the route gets the resolved notification: it delivered a firing one, or one is in flight (the receiver
 * may be hearing of the incident right now; a resolved notification of an alert it never got is harmless).
 */
function heardOf(state: RouteNotification | undefined): boolean {
  return lastDelivered(state) !== undefined || state?.outcome === 'sending';
}

/**
 * Whether a resolved notification attempted before is due again on the route: it failed, or its claim expired (the
 * instance sending it stopped), and its first attempt is less than the route's repeat_interval old.
 */
function resolveDue(state: RouteNotification | undefined, timing: RouteTiming, now: number, claimLeaseMs: number): boolean {
  const r = state?.resolved;
  if (!r || r.outcome === 'delivered' || now - (r.since ?? r.at) >= timing.repeatIntervalMs) return false;
  return r.outcome === 'failed' || now - r.at >= claimLeaseMs;
}

/** Whether a resolved incident still has a resolved notification to deliver: one in flight, or one to retry. */
function resolvePending(incident: StoredAlert, timed: Array<{ route: AlertRoute; timing: RouteTiming }>, now: number): boolean {
  return timed.some(({ route, timing }) => {
    const r = incident.routes[route.name]?.resolved;
    return timing.sendResolved && r !== undefined && r.outcome !== 'delivered' && now - (r.since ?? r.at) < timing.repeatIntervalMs;
  });
}

/** A firing notification this report is about to send: no other report sends it until the claim expires. */
function claimed(prev: RouteNotification | undefined, now: number): RouteNotification {
  const deliveredAt = lastDelivered(prev);
  return { notifiedAt: now, outcome: 'sending', ...(deliveredAt !== undefined ? { deliveredAt } : {}) };
}

/** The route's state after the firing notification claimed at `now`; a failure keeps the time of the last delivery. */
function notified(claim: RouteNotification, now: number, delivery: Delivery): RouteNotification {
  const deliveredAt = delivery.outcome === 'delivered' ? now : lastDelivered(claim);
  return { notifiedAt: now, ...delivery, ...(deliveredAt !== undefined ? { deliveredAt } : {}), ...(claim.resolved ? { resolved: claim.resolved } : {}) };
}

/**
 * Never notified: once group_wait has passed. Failed last time: now (retry). Delivered: after repeat_interval.
 * Claimed by a report still sending it: not until the claim expires (its instance may have stopped meanwhile).
 */
function isDue(state: RouteNotification | undefined, createdAt: number, timing: RouteTiming, now: number, claimLeaseMs: number): boolean {
  if (!state) return now - createdAt >= timing.groupWaitMs;
  if (state.outcome === 'sending') return now - state.notifiedAt >= claimLeaseMs;
  if (state.outcome === 'failed') return true;
  return now - state.notifiedAt >= timing.repeatIntervalMs;
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
