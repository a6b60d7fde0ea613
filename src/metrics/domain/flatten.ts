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
  const walk = (value: unknown, name: string, depth: number, field: ((name: string) => string) | undefined, clean: boolean) => {
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new AppError('invalid_request', `body ${fieldOf(field, name)}: must be a finite number`);
      if (!clean) throw new AppError('invalid_request', `body ${fieldOf(field, name)}: metric name holds a control or invisible character`);
      if (name.length > MAX_METRIC_NAME_LENGTH) throw new AppError('invalid_request', `body ${fieldOf(field, name)}: metric name is longer than ${MAX_METRIC_NAME_LENGTH} characters`);
      if (out.has(name)) throw new AppError('invalid_request', `body ${fieldOf(field, name)}: metric ${name} is reported twice`);
      out.set(name, value);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    if (depth > MAX_FLATTEN_DEPTH) throw new AppError('invalid_request', `body ${fieldOf(field, name)}: nested deeper than ${MAX_FLATTEN_DEPTH} levels`);
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) { const j = join(name, i); walk(value[i], j.name, depth + 1, field, clean); }
      return;
    }
    // Object.keys: own enumerable keys only, so "__proto__" from JSON is an ordinary name, never a prototype.
    for (const key of Object.keys(value)) { const j = join(name, key); walk((value as Record<string, unknown>)[key], j.name, depth + 1, field, clean && j.clean); }
  };
  /** The entries of a disk or service: every key but the one that names it, under `<kind>.<its name>`. */
  const entries = (item: Record<string, unknown>, kind: string, label: string, skip: string, array: string, i: number) => {
    const prefix = join(kind, label);
    const field = (name: string) => `${array}.${i}${name.slice(prefix.name.length)}`;
    for (const key of Object.keys(item)) {
      if (key !== skip) { const j = join(prefix.name, key); walk(item[key], j.name, 2, field, prefix.clean && j.clean); }
    }
  };

  walk(report.cpu, 'cpu', 1, undefined, true);
  walk(report.memory, 'memory', 1, undefined, true);
  report.disks?.forEach((disk, i) => entries(disk, 'disk', disk.path, 'path', 'disks', i));
  for (const section of FREE_FORM_SECTIONS) {
    const value = (report as Record<string, unknown>)[section];
    if (value !== undefined) walk(value, section, 1, undefined, true);
  }
  report.services?.forEach((service, i) => entries(service, 'service', service.name, 'name', 'services', i));
  return out;
}

const fieldOf = (field: ((name: string) => string) | undefined, name: string) => (field ? field(name) : name);

/** A dotted name and whether its last key is clean (isNameText); the others were checked on the way down. */
interface Joined { readonly name: string; readonly clean: boolean }

/**
 * `parent.key`, remembered: agents send the same names in every report, so
 * flattening one costs map lookups instead of a new string and a Unicode
 * test per key. Bounded: past MAX_JOINS the table starts over, so names a
 * client invents cost memory once, not for good.
 */
const joins = new Map<string, Map<string | number, Joined>>();
let joined = 0;
const MAX_JOINS = 50_000;

function join(parent: string, key: string | number): Joined {
  let children = joins.get(parent);
  const hit = children?.get(key);
  if (hit) return hit;
  const made: Joined = { name: `${parent}.${key}`, clean: typeof key === 'number' || isNameText(key) };
  if (joined >= MAX_JOINS) {
    joins.clear();
    joined = 0;
    children = undefined;
  }
  if (!children) joins.set(parent, (children = new Map()));
  children.set(key, made);
  joined++;
  return made;
}
