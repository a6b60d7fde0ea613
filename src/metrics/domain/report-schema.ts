import { Type, type Static } from 'typebox';
import { AppError } from '../../core/errors.js';
import { AlertsSchema } from '../alerts/alert.js';

/**
 * The agent report, as published to agents (the host agent builds its
 * reports against this schema) and served in the OpenAPI document.
 *
 * Required: the identity (`agentId`, `hostname`, `platform`), `ts`, and the two
 * numbers every dashboard row needs (`cpu.usage`, `memory`). `disks`,
 * `network`, `services` and `alerts` are optional. Unknown fields anywhere are
 * tolerated (newer agents talking to older servers) but never stored.
 * Bytes are bytes, percentages are 0-100. Array bounds keep a hostile report
 * from costing more than its body limit already allows.
 */

/**
 * The host id: stable across hostname changes and unique where hostnames
 * collide ("localhost"). It appears in URL paths and log lines, so it is
 * plain ASCII that starts with a letter or digit and never holds `..`: no
 * id can read as a relative path segment (`.`, `..`) or an option (`-x`).
 */
export const AGENT_ID_PATTERN = '^(?!.*\\.\\.)[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$';

/**
 * Text shown to people or used in metric names (hostname, platform, disk
 * path, service name, every key that becomes part of a metric name): no
 * control characters (C0, DEL, C1: no NUL, CR, LF, ESC), no invisible format
 * characters (zero-width spaces and joiners, bidirectional overrides such as
 * U+202E, the BOM), no line or paragraph separators, and no lone UTF-16
 * surrogate. What is left looks the same in a terminal, a log line and the
 * dashboard as it does in the report. Ajv compiles patterns with the `u` flag,
 * which these Unicode property classes need.
 */
export const NAME_TEXT_PATTERN = '^[^\\p{Cc}\\p{Cf}\\p{Cs}\\p{Zl}\\p{Zp}]*$';
const NAME_TEXT = new RegExp(NAME_TEXT_PATTERN, 'u');

/** Whether `s` is allowed as a name or label (see NAME_TEXT_PATTERN). */
export function isNameText(s: string): boolean {
  return NAME_TEXT.test(s);
}

const Bytes = Type.Number({ minimum: 0, description: 'Bytes.' });
const Percent = Type.Number({ minimum: 0, maximum: 100, description: 'Percent, 0-100.' });

export const CpuSchema = Type.Object({
  usage: Type.Number({ minimum: 0, maximum: 100, description: 'Busy share of all cores, percent.' }),
  perCore: Type.Optional(Type.Array(Type.Number({ minimum: 0, maximum: 100 }), { maxItems: 1024, description: 'Busy percent per core.' })),
  loadAverage: Type.Optional(Type.Array(Type.Number({ minimum: 0 }), { minItems: 3, maxItems: 3, description: '1, 5 and 15 minute load averages.' })),
}, { additionalProperties: true });

export const MemorySchema = Type.Object({
  total: Bytes,
  used: Bytes,
  free: Bytes,
  percent: Percent,
}, { additionalProperties: true });

export const DiskSchema = Type.Object({
  path: Type.String({ minLength: 1, maxLength: 256, pattern: NAME_TEXT_PATTERN, description: 'Mount point; names the metrics `disk.<path>.*`. No control or invisible characters.' }),
  total: Bytes,
  used: Bytes,
  available: Bytes,
  percent: Percent,
}, { additionalProperties: true });

export const ServiceSchema = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 128, pattern: NAME_TEXT_PATTERN, description: 'Names the metrics `service.<name>.*`. No control or invisible characters.' }),
  status: Type.Optional(Type.String({ maxLength: 64, description: 'Free text (e.g. "active"); not stored.' })),
}, {
  additionalProperties: true,
  description: 'One supervised service. Every other numeric field (at any depth) becomes `service.<name>.<field>`, e.g. `service.nginx.restarts`.',
});

export const ReportSchema = Type.Object({
  agentId: Type.String({ pattern: AGENT_ID_PATTERN, description: 'Stable agent identifier; it is the host id. 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit, never "..".' }),
  hostname: Type.String({ minLength: 1, maxLength: 255, pattern: NAME_TEXT_PATTERN, description: 'Display name; the latest report wins. No control or invisible characters.' }),
  platform: Type.String({ minLength: 1, maxLength: 64, pattern: NAME_TEXT_PATTERN, description: 'Operating system family, e.g. "linux". No control or invisible characters.' }),
  ts: Type.Integer({ minimum: 0, description: 'Sample time, epoch milliseconds.' }),
  cpu: CpuSchema,
  memory: MemorySchema,
  disks: Type.Optional(Type.Array(DiskSchema, { maxItems: 256 })),
  network: Type.Optional(Type.Object({}, {
    additionalProperties: true,
    description: 'Free-form; every numeric leaf becomes `network.<key>[.<key>...]` (arrays use the index).',
  })),
  diskio: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `diskio.<device>.<field>` (block device I/O counters).' })),
  system: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `system.<key>[.<key>...]` (uptime, processes, file descriptors, sockets).' })),
  pressure: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `pressure.<resource>.<some|full>.<field>` (Linux PSI).' })),
  sensors: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'Free-form; every numeric leaf becomes `sensors.<chip>.<sensor>` (temperatures, degrees Celsius).' })),
  services: Type.Optional(Type.Array(ServiceSchema, { maxItems: 256 })),
  alerts: Type.Optional(AlertsSchema),
}, { additionalProperties: true });

export type Report = Static<typeof ReportSchema>;

/** Deepest nesting `assertReportText` follows; past it the report is refused (flattening stops far earlier anyway). */
const MAX_TEXT_DEPTH = 64;

/**
 * Every string and every key anywhere in a report, unknown fields included,
 * must be well-formed Unicode without NUL: a lone UTF-16 surrogate (JSON
 * `"\ud800"`) cannot be encoded as UTF-8 and NUL cannot be stored in a
 * PostgreSQL text column, so either would fail deep in storage instead of
 * being refused here. Throws `invalid_request` naming the field. Iterative,
 * so a deeply nested unknown field cannot overflow the stack.
 */
export function assertReportText(report: unknown): void {
  if (typeof report === 'string') {
    if (LONE_SURROGATE_OR_NUL.test(report)) refuseText('', 'text');
    return;
  }
  if (report === null || typeof report !== 'object') return;
  // One frame per object or array, none per leaf; a field's dotted path is spelled out only to name it in an error.
  const stack: TextFrame[] = [{ value: report, depth: 0, parent: undefined, key: '' }];
  for (let frame = stack.pop(); frame; frame = stack.pop()) {
    if (frame.depth >= MAX_TEXT_DEPTH) throw new AppError('invalid_request', `body ${pathOf(frame)}: nested deeper than ${MAX_TEXT_DEPTH} levels`);
    const value = frame.value;
    const keys = Array.isArray(value) ? undefined : Object.keys(value);
    const n = keys ? keys.length : (value as unknown[]).length;
    for (let i = 0; i < n; i++) {
      const key = keys ? keys[i]! : i;
      if (typeof key === 'string' && LONE_SURROGATE_OR_NUL.test(key)) { const at = pathOf(frame); refuseText(at ? `${at}.(key)` : '(key)', 'a key'); }
      const child = (value as Record<string | number, unknown>)[key];
      if (typeof child === 'string') {
        if (LONE_SURROGATE_OR_NUL.test(child)) refuseText(childPath(frame, key), 'text');
      } else if (child !== null && typeof child === 'object') {
        stack.push({ value: child, depth: frame.depth + 1, parent: frame, key });
      }
    }
  }
}

/** Under the `u` flag \p{Cs} matches only unpaired surrogates: a proper pair is one code point. */
const LONE_SURROGATE_OR_NUL = /[\p{Cs}\0]/u;

interface TextFrame { value: object; depth: number; parent: TextFrame | undefined; key: string | number }

function pathOf(frame: TextFrame): string {
  return frame.parent ? childPath(frame.parent, frame.key) : '';
}

function childPath(parent: TextFrame, key: string | number): string {
  const base = pathOf(parent);
  return base ? `${base}.${key}` : String(key);
}

function refuseText(field: string, what: string): never {
  throw new AppError('invalid_request', `body ${field || '(root)'}: ${what} holds a lone UTF-16 surrogate or a NUL character`);
}
