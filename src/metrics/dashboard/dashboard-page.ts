import type { HostStatus, HostWithStatus } from '../domain/host-status.js';
import { formatAbsolute, formatPercent, formatRelative } from './format.js';
import { html, SafeHtml } from './html-template.js';
import { pageLayout } from './page-layout.js';
import { rangeControls } from './range-controls.js';
import { rangeQuery, type TimeRange } from './time-range.js';

/** Columns the host list sorts by (`?sort=`), and which way each sorts first. */
export const SORT_KEYS = { name: 'asc', status: 'desc', platform: 'asc', cpu: 'desc', memory: 'desc', disk: 'desc', last: 'desc' } as const;
export type SortKey = keyof typeof SORT_KEYS;

export interface HostListQuery {
  sort: SortKey;
  dir: 'asc' | 'desc';
  /** Case-insensitive filter on hostname, host id and platform. */
  q: string;
}

export interface DashboardView {
  /** One row per host: its most recent report's headline numbers and its status. */
  hosts: HostWithStatus[];
  counts: Record<HostStatus, number>;
  now: number;
  range: TimeRange;
  list: HostListQuery;
  /** Shown in the top bar so a person with several tokens knows which tenant they are looking at. */
  tenantName: string;
  /** Ingest is refused for want of disk space: the page says so at the top. */
  ingestPaused?: boolean;
  /** Signed in through the session cookie: offer sign-out. Bearer callers have nothing to sign out of. */
  session: boolean;
  /** The largest point budget a request may ask (`--series-points-max`): the sparklines ask no more. */
  maxPoints: number;
}

/** Seconds between reloads without JavaScript; with it, dashboard.js polls the status endpoint instead. */
export const REFRESH_SECONDS = 30;

export function parseHostListQuery(query: Record<string, unknown>): HostListQuery {
  const sort = typeof query['sort'] === 'string' && Object.hasOwn(SORT_KEYS, query['sort']) ? query['sort'] as SortKey : 'name';
  const dir = query['dir'] === 'asc' || query['dir'] === 'desc' ? query['dir'] : SORT_KEYS[sort];
  const q = typeof query['q'] === 'string' ? query['q'].slice(0, 128) : '';
  return { sort, dir, q };
}

const STATUS_RANK: Record<HostStatus, number> = { up: 0, late: 1, down: 2 };

/** Filters and sorts like dashboard.js does in the browser; missing values sort last either way. */
export function sortAndFilter(hosts: HostWithStatus[], list: HostListQuery): HostWithStatus[] {
  const needle = list.q.trim().toLowerCase();
  const kept = needle ? hosts.filter((h) => `${h.hostname} ${h.hostId} ${h.platform}`.toLowerCase().includes(needle)) : hosts;
  const key = (h: HostWithStatus): string | number | null => {
    switch (list.sort) {
      case 'name': return h.hostname.toLowerCase();
      case 'status': return STATUS_RANK[h.status];
      case 'platform': return h.platform.toLowerCase();
      case 'cpu': return h.cpuUsage;
      case 'memory': return h.memoryPercent;
      case 'disk': return h.diskPercent;
      case 'last': return h.lastTs;
    }
  };
  const sign = list.dir === 'asc' ? 1 : -1;
  return [...kept].sort((a, b) => {
    const x = key(a);
    const y = key(b);
    if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
    return (x < y ? -sign : x > y ? sign : 0) || (a.hostId < b.hostId ? -1 : 1);
  });
}

export function accountAside(tenantName: string, session: boolean): SafeHtml {
  return html`<div class="account"><span class="tenant">Tenant <strong>${tenantName}</strong></span>${session
    ? html`<form class="signout" method="post" action="/signout"><button type="submit">Sign out</button></form>`
    : ''}</div>`;
}

/** Where the rows go in the page; no escaped text can contain it (`<` is always escaped). */
const ROWS = new SafeHtml('<!--rows-->');

/** Rows per piece of a streamed host list: about 10 ms of rendering, after which other requests get their turn. */
export const ROWS_PER_PIECE = 250;

/** The page at once (small lists; tests). */
export function renderDashboard(view: DashboardView): string {
  return [...dashboardPieces(view)].join('');
}

/**
 * The page in pieces: everything before the rows, the rows `ROWS_PER_PIECE` at a time, then the rest. A tenant at
 * the host limit has a page of 10,000 rows, a third of a second of rendering: sent as pieces with a turn of the event
 * loop between them, it does not stall every other request meanwhile.
 */
export function* dashboardPieces(view: DashboardView): Generator<string> {
  const shown = sortAndFilter(view.hosts, view.list);
  const page = dashboardShell(view, shown.length);
  const at = page.indexOf(ROWS.value);
  if (at < 0) { yield page; return; }
  yield page.slice(0, at);
  for (let i = 0; i < shown.length; i += ROWS_PER_PIECE) yield shown.slice(i, i + ROWS_PER_PIECE).map((h) => hostRow(h, view.now, view.range).value).join('');
  yield page.slice(at + ROWS.value.length);
}

function dashboardShell(view: DashboardView, shown: number): string {
  const count = view.hosts.length;
  const extra: Record<string, string> = { sort: view.list.sort, dir: view.list.dir, ...(view.list.q ? { q: view.list.q } : {}) };
  const body = count === 0
    ? html`<h1>Hosts</h1>
<section class="empty">
<p>No host has reported yet.</p>
<p>Point an agent at <code>POST /api/v1/ingest</code> with this tenant's token; its host appears here after the first report.</p>
</section>`
    : html`<h1>Hosts</h1>
<p class="summary"><span class="counts"><span class="total">${count} ${count === 1 ? 'host' : 'hosts'}</span>: ${(['up', 'late', 'down'] as const).map((s, i) => html`${i ? ' · ' : ''}<span class="count ${s}" data-status="${s}"><strong>${view.counts[s]}</strong> ${s}</span>`)}</span> · <span class="as-of">as of ${formatAbsolute(view.now)}</span></p>
${rangeControls('/', view.range, extra)}
<form class="filter" method="get" action="/" role="search">
<input type="hidden" name="sort" value="${view.list.sort}"><input type="hidden" name="dir" value="${view.list.dir}">${view.range.preset ? html`<input type="hidden" name="range" value="${view.range.preset}">` : html`<input type="hidden" name="from" value="${view.range.from}"><input type="hidden" name="to" value="${view.range.to}">`}
<label for="host-filter">Filter</label> <input id="host-filter" type="search" name="q" value="${view.list.q}" placeholder="name, id or platform" autocomplete="off" maxlength="256"> <button type="submit">Filter</button>
</form>
<div class="table-wrap">
<table class="hosts" data-sort="${view.list.sort}" data-dir="${view.list.dir}">
<thead><tr>${headers(view)}</tr></thead>
<tbody>
${shown ? ROWS : ''}</tbody>
</table>
</div>`;
  return pageLayout({
    title: 'Hosts · Fleet metrics',
    refreshSeconds: REFRESH_SECONDS,
    headerAside: accountAside(view.tenantName, view.session),
    ingestPaused: view.ingestPaused,
    nav: 'hosts',
    page: { kind: 'hosts', data: { now: String(view.now), 'max-points': String(view.maxPoints) } },
    body,
  }).value;
}

const COLUMNS: Array<[SortKey, string]> = [['name', 'Host'], ['status', 'Status'], ['platform', 'Platform'], ['cpu', 'CPU'], ['memory', 'Memory'], ['disk', 'Disk'], ['last', 'Last report']];

/** Each header is a link that sorts by it (the second click flips the direction): sorting works without JavaScript. */
function headers(view: DashboardView): SafeHtml[] {
  return COLUMNS.map(([key, label]) => {
    const current = view.list.sort === key;
    const dir = current ? (view.list.dir === 'asc' ? 'desc' : 'asc') : SORT_KEYS[key];
    const q = new URLSearchParams({ sort: key, dir, ...(view.list.q ? { q: view.list.q } : {}) }).toString();
    const aria = current ? (view.list.dir === 'asc' ? 'ascending' : 'descending') : 'none';
    return html`<th scope="col" aria-sort="${aria}"><a href="${`/?${q}&${rangeQuery(view.range)}`}" data-sort="${key}">${label}</a></th>`;
  });
}

function hostRow(h: HostWithStatus, now: number, range: TimeRange): SafeHtml {
  const iso = new Date(h.lastTs).toISOString();
  return html`<tr class="host ${h.status}" data-host-id="${h.hostId}">
<th scope="row" data-label="Host"><a class="hostname" href="/hosts/${encodeURIComponent(h.hostId)}?${rangeQuery(range)}">${h.hostname}</a>${h.hostId !== h.hostname ? html`<span class="host-id">${h.hostId}</span>` : ''}</th>
<td data-label="Status"><span class="status ${h.status}">${h.status}</span></td>
<td data-label="Platform">${h.platform}</td>
<td data-label="CPU" class="metric">${gauge(h.cpuUsage, 'CPU usage')}<span class="spark" data-host-id="${h.hostId}"></span></td>
<td data-label="Memory" class="metric">${gauge(h.memoryPercent, 'Memory used')}</td>
<td data-label="Disk" class="metric">${gauge(h.diskPercent, 'Fullest filesystem used')}</td>
<td data-label="Last report"><time datetime="${iso}" title="${iso}">${formatRelative(h.lastTs, now)}</time><span class="absolute">${formatAbsolute(h.lastTs)}</span></td>
</tr>
`;
}

/** A native <meter> gives a coloured bar without inline styles (which the CSP would block). */
function gauge(value: number | null, label: string): SafeHtml {
  if (value === null) return html`<span class="value missing">${formatPercent(null)}</span>`;
  const clamped = Math.min(100, Math.max(0, value));
  return html`<meter min="0" max="100" low="70" high="90" optimum="0" value="${clamped.toFixed(1)}" aria-label="${label}">${formatPercent(value)}</meter><span class="value">${formatPercent(value)}</span>`;
}
