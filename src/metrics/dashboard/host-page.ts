import type { StoredAlert } from '../alerts/alert-store.js';
import type { HostWithStatus } from '../domain/host-status.js';
import type { Series } from '../domain/series.js';
import { alertsTable } from './alerts-table.js';
import { accountAside } from './dashboard-page.js';
import { formatAbsolute, formatRelative } from './format.js';
import { html, type SafeHtml } from './html-template.js';
import { pageParts } from './page-layout.js';
import { rangeControls } from './range-controls.js';
import { chartBudget, rangeQuery, seriesUrl, type TimeRange } from './time-range.js';
import { formatValue, unitOf } from './units.js';

export interface HostPageView {
  host: HostWithStatus;
  range: TimeRange;
  /** A metric asked for with ?metric= (its chart is opened first). */
  metric: string | undefined;
  now: number;
  tenantName: string;
  /** Ingest is refused for want of disk space: the page says so at the top. */
  ingestPaused?: boolean;
  session: boolean;
  /** The largest point budget a series request may ask (`--series-points-max`). */
  maxPoints: number;
}

export interface HostPageRest {
  host: HostWithStatus;
  range: TimeRange;
  /** The range as one point with min and max: every metric the host reported in it. */
  summary: Series;
  alerts: StoredAlert[];
}

const hostPath = (h: HostWithStatus) => `/hosts/${encodeURIComponent(h.hostId)}`;

/**
 * One host: header, time range and the chart area dashboard.js fills from
 * /api/v1/host/:id, then the page's scripts; and the document's closing.
 * hostPageRest goes between the two.
 */
export function hostPageParts(v: HostPageView): { start: SafeHtml; end: SafeHtml } {
  const h = v.host;
  const budget = chartBudget(v.maxPoints);
  const series = seriesUrl(`/api/v1/host/${encodeURIComponent(h.hostId)}`, v.range, budget);
  const body = html`<header class="page-head">
<h1><span class="hostname">${h.hostname}</span> <span class="status ${h.status}">${h.status}</span></h1>
<p class="summary"><span class="host-id">${h.hostId}</span> · ${h.platform} · last report <time class="last-report" datetime="${new Date(h.lastTs).toISOString()}" title="${formatAbsolute(h.lastTs)}">${formatRelative(h.lastTs, v.now)}</time></p>
</header>
${rangeControls(hostPath(h), v.range, v.metric ? { metric: v.metric } : {})}
<section class="charts" aria-label="Charts"></section>`;
  return pageParts({
    title: `${h.hostname} · Fleet metrics`,
    refreshSeconds: v.range.preset ? 60 : 0,
    headerAside: accountAside(v.tenantName, v.session),
    ingestPaused: v.ingestPaused,
    nav: 'hosts',
    page: { kind: 'host', data: { 'host-id': h.hostId, now: String(v.now), series, 'max-points': String(budget), ...(v.metric ? { metric: v.metric } : {}) } },
    preload: series,
    body,
  });
}

/**
 * The table of every metric over the range (what the page is without
 * JavaScript, and the list that opens any metric's chart) and the host's alerts.
 */
export function hostPageRest(v: HostPageRest): SafeHtml {
  const path = hostPath(v.host);
  return html`<section class="metrics-list">
<h2>All metrics</h2>
${metricsTable(v.summary, (name) => `${path}?metric=${encodeURIComponent(name)}&${rangeQuery(v.range)}`)}
</section>
<section class="alerts-section">
<h2>Alerts</h2>
<div class="alerts-list">${alertsTable(v.alerts, { showHost: false })}</div>
</section>
`;
}

function metricsTable(summary: Series, href: (name: string) => string): SafeHtml {
  const names = Object.keys(summary.metrics);
  if (names.length === 0) return html`<p class="none">No reports in this range.</p>`;
  return html`<div class="table-wrap"><table class="metrics">
<thead><tr><th scope="col">Metric</th><th scope="col">Mean</th><th scope="col">Min</th><th scope="col">Max</th></tr></thead>
<tbody>
${names.map((name) => {
    const unit = unitOf(name);
    return html`<tr><th scope="row" data-label="Metric"><a href="${href(name)}" data-metric="${name}">${name}</a></th><td data-label="Mean">${formatValue(summary.metrics[name]?.[0], unit)}</td><td data-label="Min">${formatValue(summary.min?.[name]?.[0], unit)}</td><td data-label="Max">${formatValue(summary.max?.[name]?.[0], unit)}</td></tr>
`;
  })}</tbody>
</table></div>`;
}
