import { AppError } from '../../core/errors.js';
import { assertReportText, isNameText, type Report } from './report-schema.js';

/** Deepest nesting followed inside `network` and a service entry; deeper reports get 400. */
export const MAX_FLATTEN_DEPTH = 6;
/** Longest metric name; longer ones get 400 rather than being truncated into collisions. */
export const MAX_METRIC_NAME_LENGTH = 256;

/** Sections whose every numeric leaf is a metric under `<section>.<key>...` (the host agent's names: docs/host-agent.md). */
export const FREE_FORM_SECTIONS = ['network', 'diskio', 'system', 'pressure', 'sensors'] as const;

/**
 * Turns a validated report into its metrics: every numeric leaf of `cpu`,
 * `memory`, `disks`, `services` and the FREE_FORM_SECTIONS under a dotted name, in a
 * deterministic order. Strings and booleans are never metrics. Other
 * top-level fields are ignored.
 *
 * Throws `invalid_request` naming the field for text that is not
 * well-formed Unicode or holds NUL anywhere in the report, a metric name with
 * a control or invisible character, a non-finite number (JSON
 * `1e400` parses to Infinity), nesting past MAX_FLATTEN_DEPTH, a name past
 * MAX_METRIC_NAME_LENGTH, or two leaves that would share a name (two disks
 * with the same path).
 */
export function flattenReport(report: Report): Map<string, number> {
  assertReportText(report);
  const out = new Map<string, number>();
  const put = (name: string, value: number, field: string) => {
    if (!Number.isFinite(value)) throw new AppError('invalid_request', `body ${field}: must be a finite number`);
    if (!isNameText(name)) throw new AppError('invalid_request', `body ${field}: metric name holds a control or invisible character`);
    if (name.length > MAX_METRIC_NAME_LENGTH) throw new AppError('invalid_request', `body ${field}: metric name is longer than ${MAX_METRIC_NAME_LENGTH} characters`);
    if (out.has(name)) throw new AppError('invalid_request', `body ${field}: metric ${name} is reported twice`);
    out.set(name, value);
  };
  const walk = (value: unknown, name: string, field: string, depth: number) => {
    if (typeof value === 'number') return put(name, value, field);
    if (value === null || typeof value !== 'object') return;
    if (depth > MAX_FLATTEN_DEPTH) throw new AppError('invalid_request', `body ${field}: nested deeper than ${MAX_FLATTEN_DEPTH} levels`);
    // Object.keys: own enumerable keys only, so "__proto__" from JSON is an ordinary name, never a prototype.
    const keys = Array.isArray(value) ? value.map((_, i) => String(i)) : Object.keys(value);
    for (const key of keys) walk((value as Record<string, unknown>)[key], `${name}.${key}`, `${field}.${key}`, depth + 1);
  };

  walk(report.cpu, 'cpu', 'cpu', 1);
  walk(report.memory, 'memory', 'memory', 1);
  report.disks?.forEach((disk, i) => {
    for (const key of Object.keys(disk)) {
      if (key !== 'path') walk((disk as Record<string, unknown>)[key], `disk.${disk.path}.${key}`, `disks.${i}.${key}`, 2);
    }
  });
  for (const section of FREE_FORM_SECTIONS) {
    const value = (report as Record<string, unknown>)[section];
    if (value !== undefined) walk(value, section, section, 1);
  }
  report.services?.forEach((service, i) => {
    for (const key of Object.keys(service)) {
      if (key !== 'name') walk((service as Record<string, unknown>)[key], `service.${service.name}.${key}`, `services.${i}.${key}`, 2);
    }
  });
  return out;
}
