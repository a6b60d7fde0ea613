import { html, type HtmlValue, type SafeHtml } from './html-template.js';

/** Served by the static-assets route; same origin, so `default-src 'self'` allows them. */
export const STYLESHEET_URL = '/static/dashboard.css';
export const FAVICON_URL = '/static/favicon.svg';
/** uPlot, served from its npm package (no CDN), and the dashboard's own script. */
export const CHART_STYLESHEET_URL = '/static/uPlot.min.css';
export const CHART_SCRIPT_URL = '/static/uPlot.iife.min.js';
export const DASHBOARD_SCRIPT_URL = '/static/dashboard.js';

export type NavItem = 'hosts' | 'fleet';

export interface LayoutOptions {
  title: string;
  /**
   * Seconds between reloads when JavaScript is off (a meta refresh inside
   * <noscript>); with JavaScript the page updates itself without reloading.
   */
  refreshSeconds?: number;
  /** Seconds before the page reloads itself, with or without JavaScript (a page that could not be served yet). */
  retrySeconds?: number;
  /** Right-hand side of the top bar. */
  headerAside?: HtmlValue;
  /** Which section of the navigation is current; none on the sign-in page. */
  nav?: NavItem;
  /** The page's role and data for dashboard.js (data-* attributes of <main>). */
  page?: { kind: string; data?: Record<string, string> };
  /**
   * A same-origin JSON request the page's script makes first: fetched as soon
   * as the head is parsed, while the scripts load, and handed to the script's
   * own fetch of the same URL (`crossorigin`: the mode and credentials of a
   * plain fetch()).
   */
  preload?: string;
  /** Ingest is refused for want of disk space (--min-free-disk-bytes): said at the top, so missing reports are explained. */
  ingestPaused?: boolean;
  body: HtmlValue;
}

/** What a tenant is told while ingest is paused: the state, not the server's paths or sizes. */
export const INGEST_PAUSED_NOTICE = 'Reports are not being accepted: the server\'s disk is nearly full. Agents keep theirs and send them once space is freed.';

/**
 * The document shell: no inline script or style, so the page renders fully
 * under the service's CSP. Split in two so a page can stream: `start` ends
 * with the page's scripts right after `body` (classic scripts run as soon as
 * the parser reaches them, so the charts load while a slow rest of the page,
 * written between the parts, is still on its way), `end` closes the document.
 */
export function pageParts(o: LayoutOptions): { start: SafeHtml; end: SafeHtml } {
  const scripted = o.page !== undefined;
  const data = Object.entries(o.page?.data ?? {}).map(([k, v]) => html` data-${k}="${v}"`);
  const start = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${o.refreshSeconds ? html`<noscript><meta http-equiv="refresh" content="${o.refreshSeconds}"></noscript>\n` : ''}${o.retrySeconds ? html`<meta http-equiv="refresh" content="${o.retrySeconds}">\n` : ''}<title>${o.title}</title>
${scripted ? html`<link rel="stylesheet" href="${CHART_STYLESHEET_URL}">\n` : ''}<link rel="stylesheet" href="${STYLESHEET_URL}">
<link rel="icon" href="${FAVICON_URL}" type="image/svg+xml">
${o.preload ? html`<link rel="preload" href="${o.preload}" as="fetch" crossorigin>\n` : ''}</head>
<body>
<header class="topbar">
<a class="brand" href="/">Fleet metrics</a>
${o.nav ? html`<nav class="sections"><a href="/"${o.nav === 'hosts' ? html` aria-current="page"` : ''}>Hosts</a><a href="/fleet"${o.nav === 'fleet' ? html` aria-current="page"` : ''}>Fleet</a></nav>` : ''}
${o.headerAside ?? ''}
</header>
<main${o.page ? html` data-page="${o.page.kind}"` : ''}${data}>
${o.ingestPaused ? html`<p class="notice ingest-paused" role="status">${INGEST_PAUSED_NOTICE}</p>
` : ''}${o.body}
${scripted ? html`<script src="${CHART_SCRIPT_URL}"></script>\n<script src="${DASHBOARD_SCRIPT_URL}"></script>\n` : ''}`;
  return { start, end: html`</main>\n</body>\n</html>\n` };
}

/** The whole document at once. */
export function pageLayout(o: LayoutOptions): SafeHtml {
  const { start, end } = pageParts(o);
  return html`${start}${end}`;
}
