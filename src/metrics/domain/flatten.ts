import { AppError } from '../../core/errors.js';
import type { Report } from './report-schema.js';
import { createShapeTable, ReportMetrics } from './report-shapes.js';
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
 * a control or invisible character, a non-finite number, an alert's value or threshold included (JSON
 * `1e400` parses to Infinity), nesting past MAX_FLATTEN_DEPTH, a name past
 * MAX_METRIC_NAME_LENGTH, or two leaves that would share a name (two disks
 * with the same path).
 */
export function flattenReport(report: Report): ReportMetrics {
  names.reset();
  // A rare huge report's values array is not kept for the small ones after it.
  if (values.length > KEEP_VALUES) values = new Float64Array(64);
  flattenInto(report, sink);
  return new ReportMetrics(names.names.slice(0, names.size), values.slice(0, names.size));
}

const KEEP_VALUES = 4096;
/**
 * One report's names and values while it is flattened, reused from report to report as a bulk body's lines reuse
 * theirs (bulk-lines.ts): this runs once per ingested report, synchronously, never re-entered, and only the answer's
 * two exact-size copies are allocated.
 */
const names = createShapeTable().nameList();
let values = new Float64Array(64);
const sink: MetricSink = {
  add(name, value) {
    if (!names.add(name)) return false;
    if (names.size > values.length) {
      const grown = new Float64Array(2 * values.length);
      grown.set(values);
      values = grown;
    }
    values[names.size - 1] = value;
    return true;
  },
};

/** Where flattening puts each metric, in order; `add` answers false for a name it already holds (refused as reported twice). */
export interface MetricSink {
  add(name: string, value: number): boolean;
}

/**
 * flattenReport into a sink of the caller's (bulk bodies reuse one, so a
 * report costs no arrays of its own). Plain functions, not closures: a bulk body flattens
 * thousands of reports, and closures per report were most of what flattening allocated.
 */
export function flattenInto(report: Report, sink: MetricSink): void {
  assertReportText(report);
  flattenWellFormed(report, sink);
}

/**
 * flattenInto for a report whose text is already known well-formed (no NUL,
 * no lone surrogate anywhere): a bulk line parsed without any `\u` escape
 * (bulk-lines.ts), since only an escape can put either into JSON text decoded
 * from UTF-8. Walking the whole report again for it was a fifth of a bulk body's allocations.
 */
export function flattenWellFormed(report: Report, sink: MetricSink): void {
  walk(sink, report.cpu, 'cpu', 1, undefined, true);
  walk(sink, report.memory, 'memory', 1, undefined, true);
  const disks = report.disks ?? [];
  for (let i = 0; i < disks.length; i++) walkEntries(sink, disks[i]!, 'disk', disks[i]!.path, 'path', 'disks', i);
  for (let s = 0; s < FREE_FORM_SECTIONS.length; s++) {
    const section = FREE_FORM_SECTIONS[s]!;
    const value = (report as Record<string, unknown>)[section];
    if (value !== undefined) walk(sink, value, section, 1, undefined, true);
  }
  const services = report.services ?? [];
  for (let i = 0; i < services.length; i++) walkEntries(sink, services[i]!, 'service', services[i]!.name, 'name', 'services', i);
  // Not metrics, but numbers a webhook and the alerts list show: refused like a metric's when not finite.
  const alerts = report.alerts ?? [];
  for (let i = 0; i < alerts.length; i++) {
    const { value, threshold } = alerts[i]!;
    if (value !== undefined && !Number.isFinite(value)) throw new AppError('invalid_request', `body alerts.${i}.value: must be a finite number`);
    if (threshold !== undefined && !Number.isFinite(threshold)) throw new AppError('invalid_request', `body alerts.${i}.threshold: must be a finite number`);
  }
}

/**
 * Where the entry of `disks` or `services` a metric comes from sits in the
 * body: `<array>.<index>`, then the metric name past `cut`. A leaf's field
 * path is spelled out only for an error.
 */
interface Origin { array: string; index: number; cut: number }

function fieldOf(origin: Origin | undefined, name: string): string {
  return origin ? `${origin.array}.${origin.index}${name.slice(origin.cut)}` : name;
}

/** A name is clean when each of its keys is (isNameText), so keys are checked one at a time on the way down. */
function walk(sink: MetricSink, value: unknown, name: string, depth: number, origin: Origin | undefined, clean: boolean): void {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new AppError('invalid_request', `body ${fieldOf(origin, name)}: must be a finite number`);
    if (!clean) throw new AppError('invalid_request', `body ${fieldOf(origin, name)}: metric name holds a control or invisible character`);
    if (name.length > MAX_METRIC_NAME_LENGTH) throw new AppError('invalid_request', `body ${fieldOf(origin, name)}: metric name is longer than ${MAX_METRIC_NAME_LENGTH} characters`);
    if (!sink.add(name, value)) throw new AppError('invalid_request', `body ${fieldOf(origin, name)}: metric ${name} is reported twice`);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (depth > MAX_FLATTEN_DEPTH) throw new AppError('invalid_request', `body ${fieldOf(origin, name)}: nested deeper than ${MAX_FLATTEN_DEPTH} levels`);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) walk(sink, value[i], join(name, i).name, depth + 1, origin, clean);
    return;
  }
  // Own enumerable keys only (for-in with hasOwn: no keys array per object), so "__proto__" from JSON is an ordinary
  // name, never a prototype.
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const j = join(name, key);
    walk(sink, (value as Record<string, unknown>)[key], j.name, depth + 1, origin, clean && j.clean);
  }
}

/** The entries of a disk or service: every key but the one that names it, under `<kind>.<its name>`. */
function walkEntries(sink: MetricSink, item: Record<string, unknown>, kind: string, label: string, skip: string, array: string, index: number): void {
  const prefix = join(kind, label);
  const origin: Origin = { array, index, cut: prefix.name.length };
  for (const key in item) {
    if (key === skip || !Object.hasOwn(item, key)) continue;
    const j = join(prefix.name, key);
    walk(sink, item[key], j.name, 2, origin, prefix.clean && j.clean);
  }
}

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
