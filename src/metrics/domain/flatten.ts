import { AppError } from '../../core/errors.js';
import type { Report } from './report-schema.js';
import { assertReportText, isNameText } from './report-text.js';

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
  // A name is clean when each of its keys is (isNameText), so keys are checked one at a time on the way down;
  // a leaf's field path in the body is spelled out only for an error: `field` maps a metric name back to it.
  const walk = (value: unknown, name: string, depth: number, field: (name: string) => string, clean: boolean) => {
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new AppError('invalid_request', `body ${field(name)}: must be a finite number`);
      if (!clean) throw new AppError('invalid_request', `body ${field(name)}: metric name holds a control or invisible character`);
      if (name.length > MAX_METRIC_NAME_LENGTH) throw new AppError('invalid_request', `body ${field(name)}: metric name is longer than ${MAX_METRIC_NAME_LENGTH} characters`);
      if (out.has(name)) throw new AppError('invalid_request', `body ${field(name)}: metric ${name} is reported twice`);
      out.set(name, value);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    if (depth > MAX_FLATTEN_DEPTH) throw new AppError('invalid_request', `body ${field(name)}: nested deeper than ${MAX_FLATTEN_DEPTH} levels`);
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) walk(value[i], `${name}.${i}`, depth + 1, field, clean);
      return;
    }
    // Object.keys: own enumerable keys only, so "__proto__" from JSON is an ordinary name, never a prototype.
    for (const key of Object.keys(value)) walk((value as Record<string, unknown>)[key], `${name}.${key}`, depth + 1, field, clean && isNameText(key));
  };
  const same = (name: string) => name;
  /** The entries of a disk or service: every key but the one that names it, under `<kind>.<its name>`. */
  const entries = (item: Record<string, unknown>, kind: string, label: string, skip: string, array: string, i: number) => {
    const prefix = `${kind}.${label}`;
    const field = (name: string) => `${array}.${i}${name.slice(prefix.length)}`;
    const clean = isNameText(label);
    for (const key of Object.keys(item)) {
      if (key !== skip) walk(item[key], `${prefix}.${key}`, 2, field, clean && isNameText(key));
    }
  };

  walk(report.cpu, 'cpu', 1, same, true);
  walk(report.memory, 'memory', 1, same, true);
  report.disks?.forEach((disk, i) => entries(disk, 'disk', disk.path, 'path', 'disks', i));
  for (const section of FREE_FORM_SECTIONS) {
    const value = (report as Record<string, unknown>)[section];
    if (value !== undefined) walk(value, section, 1, same, true);
  }
  report.services?.forEach((service, i) => entries(service, 'service', service.name, 'name', 'services', i));
  return out;
}
