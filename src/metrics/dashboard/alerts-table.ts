import type { StoredAlert } from '../alerts/alert-store.js';
import { formatAbsolute } from './format.js';
import { html, type SafeHtml } from './html-template.js';

/**
 * Alerts as a table (server-rendered; dashboard.js refreshes it the same way).
 * Every field but the times comes from an agent and is escaped by `html`.
 */
export function alertsTable(alerts: StoredAlert[], opts: { showHost: boolean }): SafeHtml {
  if (alerts.length === 0) return html`<p class="none alerts-empty">No alerts in this range.</p>`;
  return html`<div class="table-wrap"><table class="alerts">
<thead><tr><th scope="col">Alert</th>${opts.showHost ? html`<th scope="col">Host</th>` : ''}<th scope="col">State</th><th scope="col">Started</th><th scope="col">Notified</th></tr></thead>
<tbody>
${alerts.map((a) => html`<tr class="alert ${a.severity}" data-alert-id="${a.id}">
<th scope="row" data-label="Alert"><span class="sev ${a.severity}">${a.severity}</span> <span class="alert-name">${a.name}</span>${a.message ? html`<span class="alert-message">${a.message}</span>` : ''}</th>
${opts.showHost ? html`<td data-label="Host"><a href="/hosts/${encodeURIComponent(a.hostId)}">${a.hostId}</a></td>` : ''}<td data-label="State">${a.resolvedAt === null ? html`<span class="state firing">firing</span>` : html`<span class="state resolved">resolved</span> <span class="absolute">${formatAbsolute(a.resolvedAt)}</span>`}</td>
<td data-label="Started"><time datetime="${new Date(a.startsAt).toISOString()}">${formatAbsolute(a.startsAt)}</time></td>
<td data-label="Notified">${routesSummary(a)}</td>
</tr>
`)}</tbody>
</table></div>`;
}

function routesSummary(a: StoredAlert): SafeHtml {
  const routes = Object.entries(a.routes);
  if (routes.length === 0) return html`<span class="missing">—</span>`;
  return html`${routes.map(([name, s]) => html`<span class="route ${s.outcome}" title="${s.error ?? ''}">${name}: ${s.outcome}</span>`)}`;
}
