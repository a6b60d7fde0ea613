import { createHash } from 'node:crypto';
import type { Alert } from './alert.js';

/** Which report the alerts came from; the service sets these labels, agents cannot forge them. */
export interface AlertContext {
  tenantId: string;
  hostId: string;
  hostname: string;
  /** The report's `ts`, epoch ms. */
  ts: number;
}

/** One alert of a notification: firing, or resolved at `endsAt` (report time, epoch ms). */
export interface PayloadItem {
  alert: Alert;
  /** When the incident started (its first report's ts). */
  startsAt: number;
  endsAt?: number;
}

export interface WebhookAlert {
  status: 'firing' | 'resolved';
  labels: Record<string, string>;
  annotations: Record<string, string>;
  startsAt: string;
  endsAt: string;
  generatorURL: string;
  fingerprint: string;
}

/**
 * The body Alertmanager's webhook receiver sends (version 4), so existing
 * receivers (alertmanager-webhook adapters, chat bridges) accept it unchanged.
 * One payload groups the alerts of one host that matched one route.
 */
export interface WebhookPayload {
  version: '4';
  groupKey: string;
  truncatedAlerts: 0;
  /** `firing` while any alert of the notification fires, as Alertmanager does. */
  status: 'firing' | 'resolved';
  receiver: string;
  groupLabels: Record<string, string>;
  commonLabels: Record<string, string>;
  commonAnnotations: Record<string, string>;
  externalURL: string;
  alerts: WebhookAlert[];
}

/** Alertmanager's "not resolved yet" end time. */
const ZERO_TIME = '0001-01-01T00:00:00Z';

export function buildWebhookPayload(receiver: string, ctx: AlertContext, alerts: PayloadItem[]): WebhookPayload {
  const groupLabels = { tenant: ctx.tenantId, host: ctx.hostId };
  const items = alerts.map((a) => toWebhookAlert(a, ctx));
  return {
    version: '4',
    groupKey: `{}:{${Object.entries(groupLabels).sort().map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ')}}`,
    truncatedAlerts: 0,
    status: items.some((i) => i.status === 'firing') ? 'firing' : 'resolved',
    receiver,
    groupLabels,
    commonLabels: common(items.map((i) => i.labels)),
    commonAnnotations: common(items.map((i) => i.annotations)),
    externalURL: '',
    alerts: items,
  };
}

/** Labels every notification's alert gets from the service, over the agent's labels of the same name. */
export const SERVICE_LABELS: ReadonlySet<string> = new Set(['alertname', 'severity', 'tenant', 'host', 'hostname']);

function toWebhookAlert({ alert, startsAt, endsAt }: PayloadItem, ctx: AlertContext): WebhookAlert {
  const labels: Record<string, string> = {
    ...alert.labels,
    alertname: alert.name,
    severity: alert.severity,
    tenant: ctx.tenantId,
    host: ctx.hostId,
    hostname: ctx.hostname,
  };
  const annotations: Record<string, string> = {};
  if (alert.message !== undefined) annotations['message'] = alert.message;
  if (alert.value !== undefined) annotations['value'] = String(alert.value);
  if (alert.threshold !== undefined) annotations['threshold'] = String(alert.threshold);
  return {
    status: endsAt === undefined ? 'firing' : 'resolved',
    labels,
    annotations,
    startsAt: new Date(startsAt).toISOString(),
    endsAt: endsAt === undefined ? ZERO_TIME : new Date(endsAt).toISOString(),
    generatorURL: '',
    fingerprint: fingerprint(labels),
  };
}

/**
 * Like Alertmanager's: a stable 64-bit hash of the sorted label set, so receivers can deduplicate; without `hostname`,
 * which a host may change while an alert fires (its resolution must carry the fingerprint its firing did).
 */
function fingerprint(labels: Record<string, string>): string {
  const canonical = JSON.stringify(Object.entries(labels).filter(([name]) => name !== 'hostname').sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

/** Pairs present with the same value in every map. */
function common(maps: Record<string, string>[]): Record<string, string> {
  const [first, ...rest] = maps;
  if (!first) return {};
  return Object.fromEntries(Object.entries(first).filter(([k, v]) => rest.every((m) => m[k] === v)));
}
