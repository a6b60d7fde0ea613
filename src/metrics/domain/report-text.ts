// Why: the text rules of a report without the schema library, so the host agent (which flattens its own reports
// before sending them) does not carry TypeBox.
import { AppError } from '../../core/errors.js';

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

/** Deepest nesting `assertReportText` follows; past it the report is refused (flattening stops far earlier anyway). */
export const MAX_TEXT_DEPTH = 64;

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
