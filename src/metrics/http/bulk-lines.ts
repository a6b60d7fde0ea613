// Why: a bulk body's lines are parsed, checked and flattened off the event loop, and cross back as a few columns.
import { isUtf8 } from 'node:buffer';
import { AppError } from '../../core/errors.js';
import { describeValidationError, validatorCompiler } from '../../core/http/validation.js';
import type { Alert } from '../alerts/alert.js';
import { flattenWellFormed } from '../domain/flatten.js';
import { assertReportTs, type BulkItem } from '../domain/ingest.js';
import { createShapeTable, NO_SHAPE, ReportMetrics } from '../domain/report-shapes.js';
import { ReportSchema, type Report } from '../domain/report-schema.js';
import { MAX_TEXT_DEPTH } from '../domain/report-text.js';

/** Most reports one bulk body may carry; more is 413 (the agent sends at most this many per batch). */
export const MAX_BULK_REPORTS = 10_000;

export interface BulkLineOptions {
  /** Largest single line in bytes: the single-ingest body limit, so a line is refused exactly when a POST of it would be. */
  lineLimit: number;
  /** The server clock when the body arrived, and how far ahead of it or behind it (the retention) a report ts may be. */
  now: number;
  maxFutureMs: number;
  retentionMs: number;
}

const READY = 0;
const REFUSED = 1;
/** JSON that Fastify's own parser must read (it may spell `__proto__` or `constructor`, or does not parse): read on the event loop. */
const RAW = 2;

/**
 * A body's non-blank lines, read: each one ready (a checked report, its
 * metrics flattened), refused (the error single ingest would give), or raw
 * (left to the event loop's parser). Ready reports are columns, not objects,
 * so a thousand of them cross between threads as a handful of arrays.
 */
export interface BulkLines {
  /** Per non-blank line, in order: its 1-based number in the body, and whether it is READY, REFUSED or RAW. */
  line: Uint32Array<ArrayBuffer>;
  kind: Uint8Array<ArrayBuffer>;
  /** Lines parsed as JSON here (raw ones are counted by whoever parses them). */
  jsonLines: number;
  /** Lines refused unread for their size: not known to be anything but JSON, so a body of only these is still NDJSON. */
  oversized: number;
  /**
   * Ready lines, in order: host id, hostname and platform as indexes into `strings`, ts, metric names (`shape` i >= 0:
   * `shapes[i]`, the names many reports share; -(j + 1): `unshaped[j]`, past the shape table's bound), values up to `ends`.
   */
  strings: string[];
  text: Uint32Array<ArrayBuffer>;
  ts: Float64Array<ArrayBuffer>;
  shape: Int32Array<ArrayBuffer>;
  shapes: string[][];
  unshaped: string[][];
  ends: Uint32Array<ArrayBuffer>;
  values: Float64Array<ArrayBuffer>;
  /** The alerts of the ready lines that carry any, by ready index. */
  alerts: Array<[ready: number, alerts: Alert[]]>;
  /** Refused lines, in order; `of` when the line was a valid report. */
  refused: Array<{ error: AppError['code']; details: string | undefined; of: { hostId: string; ts: number } | undefined }>;
  /** Raw lines' text, in order. */
  raw: string[];
}

type Validator = ((v: unknown) => boolean) & { errors?: Parameters<typeof describeValidationError>[1] | null };

let compiled: Validator | undefined;

/**
 * The body validator of POST /api/v1/ingest (the same compiler, so the same checks and messages), compiled once per
 * thread on first use: a service sent no bulk body compiles none.
 */
export function reportValidator(): Validator {
  return (compiled ??= validatorCompiler()({ schema: ReportSchema, httpPart: 'body', method: 'POST', url: '/api/v1/ingest/bulk' }) as Validator);
}

/**
 * Only JSON.parse runs here. What secure-json-parse (Fastify's parser) would
 * refuse needs `__proto__` or `constructor` spelled out or escaped (`\u`),
 * and a leading BOM it would strip: such lines, and lines that do not parse,
 * go to the event loop's parser, which gives the exact answer single ingest does, as do lines nested deeper than
 * single ingest allows.
 * A line read here thus has no escape, and only an escape can put NUL or a
 * lone surrogate into JSON decoded from UTF-8 (raw control characters do not
 * parse, and a line that is not UTF-8 was refused): its text is well-formed unchecked.
 */
function needsFastifyParser(text: string): boolean {
  return text.charCodeAt(0) === 0xfeff || text.includes('\\u') || text.includes('__proto__') || text.includes('constructor') || nestsDeeperThan(text, MAX_TEXT_DEPTH);
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether JSON text opens more than `limit` objects or arrays inside one another. Such a line goes to the event
 * loop's path, whose full text check refuses it as single ingest does (the check this path skips, flattenWellFormed):
 * here its unknown fields would be kept, and an alert nested 10,000 deep crossed back from a parse thread as a
 * message the event loop could not read. Counts brackets outside strings; far cheaper than parsing.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  // Nesting past `limit` takes more than `limit` opening brackets, and a report has a dozen: counted with indexOf
  // (a tenth of the walk's time on the peers' reports, which was half of JSON.parse's), walked only past the limit.
  let opens = 0;
  for (let i = text.indexOf('{'); i >= 0 && opens <= limit; i = text.indexOf('{', i + 1)) opens++;
  for (let i = text.indexOf('['); i >= 0 && opens <= limit; i = text.indexOf('[', i + 1)) opens++;
  if (opens <= limit) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) i++;
        else if (d === QUOTE) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

/**
 * Reads a decompressed NDJSON body: the limits on the whole body first
 * (413 past MAX_BULK_REPORTS, 400 for a body without a line), then every line
 * with the checks of single ingest. Pure: runs in a parse thread (readBulkLines)
 * or, without one, on the event loop (readBulkLinesTakingTurns).
 */
export function readBulkLines(body: Uint8Array, opts: BulkLineOptions): BulkLines {
  const steps = bulkLineSteps(body, opts);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** Lines read between two turns of the event loop: about 15 ms of a 2-core machine's time (8,000 reports/s). */
export const LINES_PER_TURN = 128;

/**
 * readBulkLines on the event loop, giving other requests a turn every LINES_PER_TURN lines: a body of 10,000 reports
 * is about a second of parsing, which single reports of other tenants would otherwise wait behind (`npm run bench --
 * bulk-fairness`: 258-427 ms at the median before, 45-58 ms after, behind two 5,000-report bodies at a time).
 */
export async function readBulkLinesTakingTurns(body: Uint8Array, opts: BulkLineOptions): Promise<BulkLines> {
  const steps = bulkLineSteps(body, opts);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** The reading, yielding after every LINES_PER_TURN lines; returns the lines read. */
function* bulkLineSteps(body: Uint8Array, opts: BulkLineOptions): Generator<void, BulkLines, void> {
  const validate = reportValidator();
  // The body is cut into lines as bytes and each line decoded on its own (0x0A is never part of a UTF-8 sequence, so
  // the lines and their text are those of the decoded body split at "\n"): a body is never one string of megabytes,
  // which V8 keeps with the old objects until a full collection.
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  // Found once, before any line is read (a body past the limit is refused unparsed): per non-blank line, its number
  // in the body, its first byte and its end (a trailing \r left out).
  const spans: number[] = [];
  for (let i = 1, start = 0; start <= bytes.length; i++) {
    const at = bytes.indexOf(NEWLINE, start);
    const newline = at < 0 ? bytes.length : at;
    if (!isBlank(bytes, start, newline)) {
      if (spans.length === 3 * MAX_BULK_REPORTS) throw new AppError('payload_too_large', `more than ${MAX_BULK_REPORTS} reports in one bulk body`);
      spans.push(i, start, newline > start && bytes[newline - 1] === CARRIAGE_RETURN ? newline - 1 : newline);
    }
    start = newline + 1;
  }
  const count = spans.length / 3;
  if (!count) throw new AppError('invalid_request', 'body holds no report: send one JSON report per line (application/x-ndjson)');

  const out: BulkLines = {
    line: new Uint32Array(count), kind: new Uint8Array(count), jsonLines: 0, oversized: 0,
    strings: [], text: new Uint32Array(3 * count), ts: new Float64Array(count), shape: new Int32Array(count), shapes: [], unshaped: [],
    ends: new Uint32Array(count), values: new Float64Array(32 * count), alerts: [], refused: [], raw: [],
  };
  const stringIndex = new Map<string, number>();
  const str = (s: string): number => {
    let i = stringIndex.get(s);
    if (i === undefined) stringIndex.set(s, (i = out.strings.push(s) - 1));
    return i;
  };
  const shapes = createShapeTable();
  const deps = { now: () => opts.now, maxFutureMs: opts.maxFutureMs, retentionMs: opts.retentionMs };
  let n = 0;
  let ready = 0;
  let end = 0;
  // A report's metrics go straight into the values column after `end` (kept only once the report is ready) and its
  // names into one reused list: no Map, no name array per report.
  const names = shapes.nameList();
  const sink = {
    add(name: string, value: number): boolean {
      if (!names.add(name)) return false;
      const at = end + names.size - 1;
      if (at >= out.values.length) {
        const grown = new Float64Array(Math.max(at + 1, 2 * out.values.length));
        grown.set(out.values);
        out.values = grown;
      }
      out.values[at] = value;
      return true;
    },
  };
  const refuse = (e: AppError, of?: { hostId: string; ts: number }) => {
    out.kind[n] = REFUSED;
    out.refused.push({ error: e.code, details: e.details, of });
  };
  for (; n < count; n++) {
    if (n > 0 && n % LINES_PER_TURN === 0) yield;
    const start = spans[3 * n + 1]!;
    const stop = spans[3 * n + 2]!;
    out.line[n] = spans[3 * n]!;
    // The line's bytes, as a POST of it would count them.
    if (stop - start > opts.lineLimit) {
      out.oversized++;
      refuse(new AppError('payload_too_large', `line is larger than the single-report body limit of ${opts.lineLimit} bytes`));
    } else if (!isUtf8(bytes.subarray(start, stop))) {
      refuse(new AppError('invalid_request', 'body: not valid UTF-8'));
    } else {
      const text = bytes.toString('utf8', start, stop);
      let value: unknown;
      try {
        value = needsFastifyParser(text) ? undefined : JSON.parse(text);
      } catch {
        value = undefined;
      }
      if (value === undefined) {
        out.kind[n] = RAW;
        out.raw.push(text);
      } else {
        out.jsonLines++;
        if (!validate(value)) refuse(new AppError('invalid_request', describeValidationError('body', validate.errors ?? [])));
        else {
          const report = value as Report;
          let checked = false;
          names.reset();
          try {
            assertReportTs(deps, report);
            // No `\u` in the line (needsFastifyParser), so no NUL or lone surrogate in its text: the walk that looks for them is skipped.
            flattenWellFormed(report, sink);
            checked = true;
          } catch (e: unknown) {
            if (!(e instanceof AppError)) throw e;
            refuse(e, { hostId: report.agentId, ts: report.ts });
          }
          if (checked) {
            out.kind[n] = READY;
            out.text[3 * ready] = str(report.agentId);
            out.text[3 * ready + 1] = str(report.hostname);
            out.text[3 * ready + 2] = str(report.platform);
            out.ts[ready] = report.ts;
            const shape = names.shape();
            out.shape[ready] = shape === NO_SHAPE ? -out.unshaped.push(names.names.slice(0, names.size)) : shape;
            end += names.size;
            out.ends[ready] = end;
            if (report.alerts?.length) out.alerts.push([ready, report.alerts]);
            ready++;
          }
        }
      }
    }
  }
  // The table numbers shapes from 0 in the order it met them.
  out.shapes = shapes.takeNew().map(([, names]) => names);
  out.text = out.text.slice(0, 3 * ready);
  out.ts = out.ts.slice(0, ready);
  out.shape = out.shape.slice(0, ready);
  out.ends = out.ends.slice(0, ready);
  out.values = out.values.slice(0, end);
  return out;
}

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * Whether bytes [start, end) are a blank line: nothing but whitespace as
 * String.prototype.trim sees it. A line with a byte of ASCII that is not
 * whitespace is not blank (almost every line: its first byte is `{`); one with
 * nothing but ASCII whitespace is; only one of whitespace and other bytes
 * (NBSP, U+2028, a BOM...) is decoded to tell.
 */
function isBlank(bytes: Buffer, start: number, end: number): boolean {
  let ascii = true;
  for (let i = start; i < end; i++) {
    const b = bytes[i]!;
    if (b === 0x20 || (b >= 0x09 && b <= 0x0d)) continue;
    if (b < 0x80) return false;
    ascii = false;
  }
  return ascii || bytes.toString('utf8', start, end).trim() === '';
}

/** The buffers of `lines` a thread hands over rather than copies. */
export function transferOf(lines: BulkLines): ArrayBuffer[] {
  return [lines.line.buffer, lines.kind.buffer, lines.text.buffer, lines.ts.buffer, lines.shape.buffer, lines.ends.buffer, lines.values.buffer];
}

/**
 * The items of a read body for `ingestReports`, in line order, each made only
 * when the iteration reaches it: a ready line as the tenant's prepared report,
 * a raw one through `parseRaw` (the event loop's parser and checks). Throws
 * `invalid_request` at the end when every line was read and none was JSON.
 */
export function* bulkItems(lines: BulkLines, tenantId: string, parseRaw: (line: number, text: string) => { item: BulkItem; json: boolean }): Generator<BulkItem> {
  const alerts = new Map(lines.alerts);
  let jsonLines = lines.jsonLines;
  let ready = 0;
  let refused = 0;
  let raw = 0;
  for (let n = 0; n < lines.line.length; n++) {
    const line = lines.line[n]!;
    const kind = lines.kind[n];
    if (kind === REFUSED) {
      const r = lines.refused[refused++]!;
      yield { line, error: new AppError(r.error, r.details), ...(r.of ? { of: r.of } : {}) };
    } else if (kind === RAW) {
      const { item, json } = parseRaw(line, lines.raw[raw++]!);
      if (json) jsonLines++;
      yield item;
    } else {
      const s = lines.shape[ready]!;
      const names = s >= 0 ? lines.shapes[s]! : lines.unshaped[-s - 1]!;
      const metrics = new ReportMetrics(names, lines.values.subarray(ready ? lines.ends[ready - 1]! : 0, lines.ends[ready]!));
      yield {
        line,
        prepared: {
          tenantId,
          hostId: lines.strings[lines.text[3 * ready]!]!,
          hostname: lines.strings[lines.text[3 * ready + 1]!]!,
          platform: lines.strings[lines.text[3 * ready + 2]!]!,
          ts: lines.ts[ready]!,
          metrics,
        },
        alerts: alerts.get(ready) ?? [],
      };
      ready++;
    }
  }
  if (!jsonLines && !lines.oversized) throw new AppError('invalid_request', 'body is not NDJSON: no line is JSON');
}
