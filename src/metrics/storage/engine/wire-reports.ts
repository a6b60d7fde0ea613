// Why: a message's reports cross to the writer thread as a few typed arrays, not as one object per report.
import type { NewReport } from '../../domain/metrics-store.js';
import type { HeadReport } from './head-writer.js';
import { NO_SHAPE, type ShapeTable } from '../../domain/report-shapes.js';

/**
 * The reports of one message to the writer thread, as columns. A bulk body's
 * thousand reports as objects cost each thread about a microsecond apiece to
 * clone and outlived a scavenge or two on both sides; as columns they are a
 * handful of arrays, moved (transferred), not copied.
 */
export interface WireReports {
  count: number;
  /** The message's distinct strings; `text` indexes them. */
  strings: string[];
  /** Per report: its tenant id, host id, hostname and platform, as indexes into `strings`. */
  text: Uint32Array<ArrayBuffer>;
  ts: Float64Array<ArrayBuffer>;
  /** Per report: its shape (report-shapes.ts), or NO_SHAPE with its names in `names`. */
  shape: Int32Array<ArrayBuffer>;
  names: Array<[report: number, names: string[]]>;
  /** Every report's values, one report after the other; report i's end at `ends[i]`. */
  values: Float64Array<ArrayBuffer>;
  ends: Uint32Array<ArrayBuffer>;
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
      const reports: WireReports = {
        count: n, strings, names,
        text: text.slice(0, 4 * n), ts: ts.slice(0, n), shape: shape.slice(0, n), values: values.slice(0, end), ends: ends.slice(0, n),
      };
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
      return { reports, transfer: [reports.text.buffer, reports.ts.buffer, reports.shape.buffer, reports.values.buffer, reports.ends.buffer] };
    },
  };
}

/** Reports [from, to) of a message as the writer takes them; values are views of the message's array. */
export function readWireReports(w: WireReports, shapeNames: ReadonlyMap<number, readonly string[]>, from: number, to: number): HeadReport[] {
  const own = w.names.length ? new Map(w.names) : undefined;
  const out: HeadReport[] = [];
  for (let i = from; i < to; i++) {
    const s = w.shape[i]!;
    out.push({
      tenantId: w.strings[w.text[4 * i]!]!,
      hostId: w.strings[w.text[4 * i + 1]!]!,
      hostname: w.strings[w.text[4 * i + 2]!]!,
      platform: w.strings[w.text[4 * i + 3]!]!,
      ts: w.ts[i]!,
      names: s === NO_SHAPE ? own!.get(i)! : shapeNames.get(s)!,
      values: w.values.subarray(i ? w.ends[i - 1]! : 0, w.ends[i]!),
    });
  }
  return out;
}
