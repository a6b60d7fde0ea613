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

/**
 * Packs `values[i]` under metric id `ids[i]` (ids distinct, in any order). Written straight into one buffer: this
 * runs once per stored report, so it allocates nothing else that outlives the call.
 */
export function encodeSamples(ids: ArrayLike<number>, values: ArrayLike<number>): Buffer {
  const n = ids.length;
  // Insertion sort of positions by id: a report's ids mostly arrive ascending already.
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    let j = i;
    while (j > 0 && ids[order[j - 1]!]! > ids[i]!) { order[j] = order[j - 1]!; j--; }
    order[j] = i;
  }
  let head = varintLength(n);
  let prev = 0;
  for (let i = 0; i < n; i++) { const id = ids[order[i]!]!; head += varintLength(id - prev); prev = id; }
  const buf = Buffer.allocUnsafe(head + n * 8);
  let pos = writeVarint(buf, 0, n);
  prev = 0;
  for (let i = 0; i < n; i++) { const id = ids[order[i]!]!; pos = writeVarint(buf, pos, id - prev); prev = id; }
  for (let i = 0; i < n; i++) buf.writeDoubleLE(values[order[i]!]!, pos + i * 8);
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

function varintLength(n: number): number {
  let len = 1;
  for (let v = n; v >= 0x80; v = Math.floor(v / 128)) len++;
  return len;
}

function writeVarint(buf: Buffer, at: number, n: number): number {
  let pos = at;
  let v = n;
  while (v >= 0x80) {
    buf[pos++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[pos++] = v;
  return pos;
}
