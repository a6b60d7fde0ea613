// Why: a message's reports cross to the writer thread as a few typed arrays, not as one object per report.
import type { NewReport } from '../../domain/metrics-store.js';
import type { HeadReport } from './head-writer.js';
import { NO_SHAPE, type ShapeTable } from '../../domain/report-shapes.js';

/**
 * The reports of one message to the writer thread, as columns. A bulk body's
 * thousand reports as objects cost each thread about a microsecond apiece to
 * clone and outlived a scavenge or two on both sides; as columns they are a
 * handful of arrays, all in one buffer that is moved (transferred), not copied:
 * each buffer a message transfers costs about 2 µs on the sender alone (five
 * took 14 µs a message, one 5-7), and most messages carry one or two reports.
 */
export interface WireReports {
  count: number;
  /** Values of all the reports together. */
  valueCount: number;
  /** The message's distinct strings; `text` indexes them. */
  strings: string[];
  /** Per report: NO_SHAPE's names. */
  names: Array<[report: number, names: string[]]>;
  /** The columns (wireColumns): ts and values as float64, then text, shape and ends as 32-bit integers. */
  data: ArrayBuffer;
}

/** The columns of a message, as views of its buffer. */
export interface WireColumns {
  ts: Float64Array<ArrayBuffer>;
  /** Every report's values, one report after the other; report i's end at `ends[i]`. */
  values: Float64Array<ArrayBuffer>;
  /** Per report: its tenant id, host id, hostname and platform, as indexes into `strings`. */
  text: Uint32Array<ArrayBuffer>;
  /** Per report: its shape (report-shapes.ts), or NO_SHAPE with its names in `names`. */
  shape: Int32Array<ArrayBuffer>;
  ends: Uint32Array<ArrayBuffer>;
}

export function wireColumns(w: WireReports): WireColumns {
  const n = w.count;
  const ints = 8 * (n + w.valueCount);
  return {
    ts: new Float64Array(w.data, 0, n),
    values: new Float64Array(w.data, 8 * n, w.valueCount),
    text: new Uint32Array(w.data, ints, 4 * n),
    shape: new Int32Array(w.data, ints + 16 * n, n),
    ends: new Uint32Array(w.data, ints + 20 * n, n),
  };
}

export interface WireBuilder {
  /** Reports added since the last `take`. */
  readonly size: number;
  add(report: NewReport): void;
  /** The columns of the reports added since the last call, and the buffers to transfer with them. */
  take(): { reports: WireReports; transfer: ArrayBuffer[] };
}

const FIRST_REPORTS = 64;
/** Past this many values (or a 32nd as many reports) the builder's arrays start small again after a message: a rare huge body's size is not kept. */
const KEEP_VALUES = 1 << 16;

export function createWireBuilder(shapes: ShapeTable): WireBuilder {
  let strings: string[] = [];
  let stringIndex = new Map<string, number>();
  let names: Array<[number, string[]]> = [];
  let text = new Uint32Array(4 * FIRST_REPORTS);
  let ts = new Float64Array(FIRST_REPORTS);
  let shape = new Int32Array(FIRST_REPORTS);
  let ends = new Uint32Array(FIRST_REPORTS);
  let values = new Float64Array(32 * FIRST_REPORTS);
  let n = 0;

  const str = (s: string): number => {
    let i = stringIndex.get(s);
    if (i === undefined) {
      i = strings.length;
      strings.push(s);
      stringIndex.set(s, i);
    }
    return i;
  };
  const grown = <T extends Float64Array | Uint32Array | Int32Array>(a: T, need: number): T => {
    if (need <= a.length) return a;
    const b = new (a.constructor as new (n: number) => T)(Math.max(need, 2 * a.length));
    b.set(a);
    return b;
  };

  return {
    get size() { return n; },
    add(r) {
      const end = (n ? ends[n - 1]! : 0) + r.metrics.size;
      text = grown(text, 4 * (n + 1));
      ts = grown(ts, n + 1);
      shape = grown(shape, n + 1);
      ends = grown(ends, n + 1);
      values = grown(values, end);
      text[4 * n] = str(r.tenantId);
      text[4 * n + 1] = str(r.hostId);
      text[4 * n + 2] = str(r.hostname);
      text[4 * n + 3] = str(r.platform);
      ts[n] = r.ts;
      const s = shapes.shapeOfNames(r.metrics.names, r.metrics.size);
      shape[n] = s;
      if (s === NO_SHAPE) names.push([n, [...r.metrics.names]]);
      values.set(r.metrics.valueColumn, end - r.metrics.size);
      ends[n] = end;
      n++;
    },
    take() {
      const end = n ? ends[n - 1]! : 0;
      const reports: WireReports = { count: n, valueCount: end, strings, names, data: new ArrayBuffer(8 * (n + end) + 24 * n) };
      const out = wireColumns(reports);
      out.ts.set(ts.subarray(0, n));
      out.values.set(values.subarray(0, end));
      out.text.set(text.subarray(0, 4 * n));
      out.shape.set(shape.subarray(0, n));
      out.ends.set(ends.subarray(0, n));
      n = 0;
      strings = [];
      stringIndex = new Map();
      names = [];
      if (values.length > KEEP_VALUES || ts.length > KEEP_VALUES / 32) {
        text = new Uint32Array(4 * FIRST_REPORTS);
        ts = new Float64Array(FIRST_REPORTS);
        shape = new Int32Array(FIRST_REPORTS);
        ends = new Uint32Array(FIRST_REPORTS);
        values = new Float64Array(32 * FIRST_REPORTS);
      }
      return { reports, transfer: [reports.data] };
    },
  };
}

/** Reports [from, to) of a message as the writer takes them; values are views of the message's array. */
export function readWireReports(w: WireReports, shapeNames: ReadonlyMap<number, readonly string[]>, from: number, to: number): HeadReport[] {
  const own = w.names.length ? new Map(w.names) : undefined;
  const { ts, values, text, shape, ends } = wireColumns(w);
  const out: HeadReport[] = [];
  for (let i = from; i < to; i++) {
    const s = shape[i]!;
    out.push({
      tenantId: w.strings[text[4 * i]!]!,
      hostId: w.strings[text[4 * i + 1]!]!,
      hostname: w.strings[text[4 * i + 2]!]!,
      platform: w.strings[text[4 * i + 3]!]!,
      ts: ts[i]!,
      names: s === NO_SHAPE ? own!.get(i)! : shapeNames.get(s)!,
      values: values.subarray(i ? ends[i - 1]! : 0, ends[i]!),
    });
  }
  return out;
}
