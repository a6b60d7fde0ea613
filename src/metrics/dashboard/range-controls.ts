import { html, type SafeHtml } from './html-template.js';
import { RANGE_PRESETS, type TimeRange } from './time-range.js';

const LABELS: Record<keyof typeof RANGE_PRESETS, string> = { '15m': '15 min', '1h': '1 h', '6h': '6 h', '24h': '24 h', '7d': '7 d', '30d': '30 d' };

/** `2026-11-21T23:18` in UTC, the value a datetime-local input shows without JavaScript. */
function minuteUtc(ts: number): string {
  return new Date(ts).toISOString().slice(0, 16);
}

/**
 * The time range bar: preset links, a custom range form (plain GET, so it
 * works without JavaScript) and, filled in by dashboard.js, the pause button
 * of the auto-refresh. `extra` are query parameters to keep (sort, filter, metric).
 */
export function rangeControls(path: string, range: TimeRange, extra: Record<string, string> = {}): SafeHtml {
  const keep = new URLSearchParams(extra).toString();
  const href = (q: string) => `${path}?${q}${keep ? `&${keep}` : ''}`;
  return html`<div class="range-bar" data-from="${range.from}" data-to="${range.to}" data-preset="${range.preset ?? ''}">
<nav class="presets" aria-label="Time range">${Object.keys(RANGE_PRESETS).map((p) => html`<a href="${href(`range=${p}`)}" data-range="${p}"${range.preset === p ? html` aria-current="true"` : ''}>${LABELS[p as keyof typeof LABELS]}</a>`)}</nav>
<form class="custom-range" method="get" action="${path}">
${Object.entries(extra).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}<label>From <input type="datetime-local" name="from" value="${minuteUtc(range.from)}" required></label>
<label>To <input type="datetime-local" name="to" value="${minuteUtc(range.to)}" required></label>
<button type="submit">Apply</button>
</form>
<p class="range-now"><span class="range-text">${range.preset ? html`Last ${LABELS[range.preset]}, ending now` : html`${minuteUtc(range.from).replace('T', ' ')} – ${minuteUtc(range.to).replace('T', ' ')} UTC`}</span></p>
</div>`;
}
