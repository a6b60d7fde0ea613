import { formatAbsolute, formatPercent, formatRelative } from './format.js';
import { html, type SafeHtml } from './html-template.js';
import { pageLayout } from './page-layout.js';
import type { HostLatest } from '../domain/metrics-store.js';

export interface DashboardView {
  /** One row per host: its most recent report's headline numbers. */
  hosts: HostLatest[];
  now: number;
  /** Shown in the top bar so a person with several tokens knows which tenant they are looking at. */
  tenantName: string;
  /** Signed in through the session cookie: offer sign-out. Bearer callers have nothing to sign out of. */
  session: boolean;
}

/** Agents report every few seconds; a host silent this long is flagged so an outage stands out. */
export const STALE_AFTER_MS = 5 * 60_000;
export const REFRESH_SECONDS = 30;

export function renderDashboard(view: DashboardView): string {
  const aside = html`<div class="account"><span class="tenant">Tenant <strong>${view.tenantName}</strong></span>${view.session
    ? html`<form class="signout" method="post" action="/signout"><button type="submit">Sign out</button></form>`
    : ''}</div>`;
  const count = view.hosts.length;
  const body = count === 0
    ? html`<h1>Hosts</h1>
<section class="empty">
<p>No host has reported yet.</p>
<p>Point an agent at <code>POST /api/v1/ingest</code> with this tenant's token; its host appears here after the first report.</p>
</section>`
    : html`<h1>Hosts</h1>
<p class="summary">${count} ${count === 1 ? 'host' : 'hosts'} · as of ${formatAbsolute(view.now)} · refreshes every ${REFRESH_SECONDS} s</p>
<div class="table-wrap">
<table class="hosts">
<thead><tr><th scope="col">Host</th><th scope="col">Platform</th><th scope="col">CPU</th><th scope="col">Memory</th><th scope="col">Last report</th></tr></thead>
<tbody>
${view.hosts.map((h) => hostRow(h, view.now))}</tbody>
</table>
</div>`;
  return pageLayout({ title: 'Hosts · Fleet metrics', refreshSeconds: REFRESH_SECONDS, headerAside: aside, body }).value;
}

function hostRow(h: HostLatest, now: number): SafeHtml {
  const stale = now - h.lastTs > STALE_AFTER_MS;
  const iso = new Date(h.lastTs).toISOString();
  return html`<tr class="${stale ? 'host stale' : 'host'}">
<th scope="row" data-label="Host"><span class="hostname">${h.hostname}</span>${h.hostId !== h.hostname ? html`<span class="host-id">${h.hostId}</span>` : ''}</th>
<td data-label="Platform">${h.platform}</td>
<td data-label="CPU" class="metric">${gauge(h.cpuUsage, 'CPU usage')}</td>
<td data-label="Memory" class="metric">${gauge(h.memoryPercent, 'Memory used')}</td>
<td data-label="Last report"><time datetime="${iso}" title="${iso}">${formatRelative(h.lastTs, now)}</time>${stale ? html` <span class="badge">stale</span>` : ''}<span class="absolute">${formatAbsolute(h.lastTs)}</span></td>
</tr>
`;
}

/** A native <meter> gives a coloured bar without inline styles (which the CSP would block). */
function gauge(value: number | null, label: string): SafeHtml {
  if (value === null) return html`<span class="value missing">${formatPercent(null)}</span>`;
  const clamped = Math.min(100, Math.max(0, value));
  return html`<meter min="0" max="100" low="70" high="90" optimum="0" value="${clamped.toFixed(1)}" aria-label="${label}">${formatPercent(value)}</meter><span class="value">${formatPercent(value)}</span>`;
}
