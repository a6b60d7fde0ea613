/**
 * The time range every dashboard page shows, read from its URL so a link
 * shows the same view: `?range=<preset>` (ends now: the page refreshes) or
 * `?from=<ms>&to=<ms>` (a fixed window, e.g. after a drag-zoom). The custom
 * range form without JavaScript sends `YYYY-MM-DDTHH:MM`, read as UTC; with
 * JavaScript the page converts the viewer's local time to ms first.
 */
export const RANGE_PRESETS = { '15m': 15 * 60_000, '1h': 3_600_000, '6h': 6 * 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000, '30d': 30 * 86_400_000 } as const;
export type RangePreset = keyof typeof RANGE_PRESETS;
export const DEFAULT_PRESET: RangePreset = '1h';

export interface TimeRange {
  from: number;
  to: number;
  /** The preset when the range ends now (auto-refreshed), null for a fixed window. */
  preset: RangePreset | null;
}

/** The largest epoch millisecond a JavaScript Date can show (ECMA-262: 8.64e15). */
const MAX_DATE_MS = 8.64e15;

const MINUTE_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?$/;

function parseInstant(text: string | undefined): number | undefined {
  if (text === undefined || text === '') return undefined;
  // A time past the largest a Date holds (year 275760) is unreadable like any other junk, not a failed page.
  if (/^\d{1,16}$/.test(text)) return Number(text) <= MAX_DATE_MS ? Number(text) : undefined;
  if (MINUTE_UTC.test(text)) {
    // Before 1970 no report can be, and the series API takes no negative time: unreadable too.
    const ms = Date.parse(`${text}Z`);
    return Number.isNaN(ms) || ms < 0 ? undefined : ms;
  }
  return undefined;
}

function isPreset(text: string | undefined): text is RangePreset {
  return text !== undefined && Object.hasOwn(RANGE_PRESETS, text);
}

/** A page never fails on its range: anything unreadable falls back to the default preset. */
export function parseTimeRange(query: Record<string, unknown>, now: number): TimeRange {
  const str = (k: string) => (typeof query[k] === 'string' ? query[k] : undefined);
  const from = parseInstant(str('from'));
  const to = parseInstant(str('to'));
  if (from !== undefined && to !== undefined && from < to) return { from, to, preset: null };
  const range = str('range');
  const preset = isPreset(range) ? range : DEFAULT_PRESET;
  return { from: now - RANGE_PRESETS[preset], to: now, preset };
}

/** The query string that reproduces a range (used in links: presets, sort headers, host links). */
export function rangeQuery(range: TimeRange): string {
  return range.preset ? `range=${range.preset}` : `from=${range.from}&to=${range.to}`;
}

const HOUR = 3_600_000;
/** The most points a chart asks for: about two per pixel of a wide chart. */
export const CHART_POINTS = 1000;

/** A chart's budget: CHART_POINTS, or the largest a request may ask (`--series-points-max`, a tenant's limit) when lower. */
export function chartBudget(maxPoints: number): number {
  return Math.min(CHART_POINTS, maxPoints);
}

/**
 * What a page asks the series API for over a range (the rule of dashboard.js
 * seriesWindow, which the server applies to the page's first request): up to
 * 3 days the range itself at up to `budget` points; longer, the range widened
 * to whole hours at one point per hour (answered from the hourly rollups), or
 * per a whole number of hours when a point per hour would pass the budget (a
 * range of years). `budget` is chartBudget's: CHART_POINTS, less under a
 * lower `--series-points-max` or answer limit (the fleet page of a tenant with
 * thousands of names).
 */
export function seriesWindow(range: Pick<TimeRange, 'from' | 'to'>, budget: number): { from: number; to: number; points: number } {
  if (range.to - range.from < 72 * HOUR) return { from: range.from, to: range.to, points: budget };
  const from = Math.floor(range.from / HOUR) * HOUR;
  const hours = Math.ceil((range.to + 1 - from) / HOUR);
  const step = Math.ceil(hours / budget);
  const points = Math.ceil(hours / step);
  return { from, to: from + points * step * HOUR - 1, points };
}

/** The URL of a page's first series request (with min and max), which the page preloads. */
export function seriesUrl(path: string, range: Pick<TimeRange, 'from' | 'to'>, budget: number): string {
  const w = seriesWindow(range, budget);
  return `${path}?from=${w.from}&to=${w.to}&points=${w.points}&minmax=true`;
}
