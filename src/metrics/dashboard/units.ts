/**
 * The unit of a metric, from its name (the report format fixes them: percent
 * fields, byte fields, load averages), so tables and charts format values
 * the same way. static/metrics/dashboard.js applies the same rules in the browser.
 */
export type Unit = 'percent' | 'bytes' | 'load' | 'number';

export function unitOf(metric: string): Unit {
  if (/(?:^|\.)(?:usage|percent)$/.test(metric) || metric.startsWith('cpu.perCore.')) return 'percent';
  if (metric.startsWith('cpu.loadAverage.')) return 'load';
  if (/(?:^|\.)(?:total|used|free|available|swapTotal|swapUsed|swapFree|\w*Bytes)$/.test(metric)) return 'bytes';
  return 'number';
}

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function formatBytes(v: number): string {
  let i = 0;
  let x = Math.abs(v);
  while (x >= 1024 && i < BYTE_UNITS.length - 1) { x /= 1024; i++; }
  return `${v < 0 ? '-' : ''}${x >= 100 || i === 0 ? x.toFixed(0) : x.toFixed(1)} ${BYTE_UNITS[i]}`;
}

export function formatValue(v: number | null | undefined, unit: Unit): string {
  if (v === null || v === undefined) return '—';
  switch (unit) {
    case 'percent': return `${v.toFixed(1)} %`;
    case 'bytes': return formatBytes(v);
    case 'load': return v.toFixed(2);
    default: return Math.abs(v) >= 1000 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(2);
  }
}
