// The fleet page in two parts: the charts' frame at once, the top lists and alerts (a read of every host) streamed after.
import type { StoredAlert } from '../alerts/alert-store.js';
import type { RankedHost } from '../domain/top-hosts.js';
import { alertsTable } from './alerts-table.js';
import { accountAside } from './dashboard-page.js';
import { html, type SafeHtml } from './html-template.js';
import { pageParts } from './page-layout.js';
import { rangeControls } from './range-controls.js';
import { chartBudget, rangeQuery, seriesUrl, type TimeRange } from './time-range.js';
import { formatValue } from './units.js';

export interface FleetPageView {
  range: TimeRange;
  now: number;
  /** Every host that is not down has reported up to here (see reportedUntil); undefined when all are down. */
  reportedUntil: number | undefined;
  tenantName: string;
  /** Ingest is refused for want of disk space: the page says so at the top. */
  ingestPaused?: boolean;
  session: boolean;
  /** The most points a request may ask: `--series-points-max`, or fewer when the tenant's aggregate answer may hold fewer (MetricsStore.aggregatePointsLimit). */
  maxPoints: number;
}

export interface FleetRankings {
  range: TimeRange;
  /** Hosts with reports in the range. */
  hosts: number;
  top: { cpu: RankedHost[]; memory: RankedHost[]; disk: RankedHost[] };
  alerts: StoredAlert[];
}

/**
 * Header, time range and the chart area dashboard.js fills from
 * /api/v1/aggregate, then the page's scripts; and the document's closing.
 * fleetPageRest goes between the two.
 */
export function fleetPageParts(v: FleetPageView): { start: SafeHtml; end: SafeHtml } {
  const budget = chartBudget(v.maxPoints);
  const series = seriesUrl('/api/v1/aggregate', v.range, budget);
  const body = html`<header class="page-head">
<h1>Fleet</h1>
<p class="summary">Average across the hosts reporting in the range; bands show the lowest and highest value of any host.</p>
</header>
${rangeControls('/fleet', v.range)}
<section class="charts" aria-label="Charts"></section>`;
  return pageParts({
    title: 'Fleet · Fleet metrics',
    refreshSeconds: v.range.preset ? 60 : 0,
    headerAside: accountAside(v.tenantName, v.session),
    ingestPaused: v.ingestPaused,
    nav: 'fleet',
    page: { kind: 'fleet', data: { now: String(v.now), series, 'max-points': String(budget), ...(v.reportedUntil !== undefined ? { 'reported-until': String(v.reportedUntil) } : {}) } },
    preload: series,
    body,
  });
}

/** The top 10 hosts by CPU, memory and fullest disk over the range, and every host's alerts. */
export function fleetPageRest(v: FleetRankings): SafeHtml {
  return html`<p class="summary fleet-count"><span class="fleet-hosts">${v.hosts}</span> ${v.hosts === 1 ? 'host' : 'hosts'} reported in the range.</p>
<section class="top-hosts">
${topTable('Top 10 by CPU', 'cpu', v.top.cpu, v.range)}
${topTable('Top 10 by memory', 'memory', v.top.memory, v.range)}
${topTable('Top 10 by disk', 'disk', v.top.disk, v.range)}
</section>
<section class="alerts-section">
<h2>Alerts</h2>
<div class="alerts-list">${alertsTable(v.alerts, { showHost: true })}</div>
</section>
`;
}

function topTable(title: string, key: string, rows: RankedHost[], range: TimeRange): SafeHtml {
  return html`<div class="top" data-top="${key}">
<h2>${title}</h2>
${rows.length === 0 ? html`<p class="none">No data in this range.</p>` : html`<ol class="top-list">
${rows.map((r) => html`<li><a href="/hosts/${encodeURIComponent(r.hostId)}?${rangeQuery(range)}" data-keep-range>${r.hostname}</a>${key === 'disk' ? html` <span class="fs">${r.metric.slice(5, -8)}</span>` : ''} <span class="value">${formatValue(r.value, 'percent')}</span></li>`)}
</ol>`}
</div>`;
}
