/**
 * The packed value vector of one stored report: a row per report instead of a
 * row per sample (see docs/metrics-api.md, "Storage"). Layout:
 *
 *   varint n | n varints: metric ids ascending, delta-encoded | n float64 LE values
 *
 * A report of 28 metrics packs into about 260 bytes: ids cost a byte or two,
 * values keep full float64 precision (byte counters exceed float32's 2^24).
 */
export interface PackedSamples {
  metricIds: Uint32Array;
  values: Float64Array;
}

export function encodeSamples(samples: Array<[id: number, value: number]>): Buffer {
  const sorted = [...samples].sort((a, b) => a[0] - b[0]);
  const head: number[] = [];
  pushVarint(head, sorted.length);
  let prev = 0;
  for (const [id] of sorted) {
    pushVarint(head, id - prev);
    prev = id;
  }
  const buf = Buffer.allocUnsafe(head.length + sorted.length * 8);
  Buffer.from(head).copy(buf, 0);
  sorted.forEach(([, value], i) => buf.writeDoubleLE(value, head.length + i * 8));
  return buf;
}

export function decodeSamples(buf: Uint8Array): PackedSamples {
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  let pos = 0;
  const read = () => {
    let value = 0;
    let shift = 1;
    for (;;) {
      const byte = view[pos++];
      if (byte === undefined) throw new Error('packed samples truncated');
      value += (byte & 0x7f) * shift;
      if (byte < 0x80) return value;
      shift *= 128;
    }
  };
  const n = read();
  const metricIds = new Uint32Array(n);
  let id = 0;
  for (let i = 0; i < n; i++) metricIds[i] = id += read();
  if (view.length !== pos + n * 8) throw new Error('packed samples have the wrong length');
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) values[i] = view.readDoubleLE(pos + i * 8);
  return { metricIds, values };
}

function pushVarint(out: number[], n: number): void {
  let v = n;
  while (v >= 0x80) {
    out.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}
