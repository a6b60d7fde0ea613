import { html, type HtmlValue, type SafeHtml } from './html-template.js';

/** Served by the static-assets route; same origin, so `default-src 'self'` allows them. */
export const STYLESHEET_URL = '/static/dashboard.css';
export const FAVICON_URL = '/static/favicon.svg';

export interface LayoutOptions {
  title: string;
  /** Seconds between automatic reloads (a meta refresh: no script needed). */
  refreshSeconds?: number;
  /** Right-hand side of the top bar. */
  headerAside?: HtmlValue;
  body: HtmlValue;
}

/** The document shell: no inline script or style, so the page renders fully under the service's CSP. */
export function pageLayout(o: LayoutOptions): SafeHtml {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${o.refreshSeconds ? html`<meta http-equiv="refresh" content="${o.refreshSeconds}">\n` : ''}<title>${o.title}</title>
<link rel="stylesheet" href="${STYLESHEET_URL}">
<link rel="icon" href="${FAVICON_URL}" type="image/svg+xml">
</head>
<body>
<header class="topbar">
<a class="brand" href="/">Fleet metrics</a>
${o.headerAside ?? ''}
</header>
<main>
${o.body}
</main>
</body>
</html>
`;
}
