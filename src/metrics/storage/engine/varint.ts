/**
 * Byte-level integer coding for the block codec: LEB128 varints over the
 * whole safe-integer range (values past 2^31 are common: byte counters,
 * epoch milliseconds) and zigzag for signed deltas.
 */
export class ByteWriter {
  private buf: Uint8Array;
  length = 0;

  constructor(initial = 1024) {
    this.buf = new Uint8Array(initial);
  }

  private ensure(extra: number): void {
    if (this.length + extra <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.length + extra));
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.length++] = b;
  }

  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }

  /** Unsigned integer, 0 <= n <= 2^53. */
  uvarint(n: number): void {
    this.ensure(8);
    let v = n;
    while (v >= 0x80) {
      this.buf[this.length++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[this.length++] = v;
  }

  /** Signed integer with |n| < 2^52, zigzag-mapped so small magnitudes take one byte. */
  svarint(n: number): void {
    this.uvarint(n >= 0 ? n * 2 : -n * 2 - 1);
  }

  finish(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

export class ByteReader {
  pos = 0;
  constructor(private readonly buf: Uint8Array) {}

  byte(): number {
    if (this.pos >= this.buf.length) throw new Error('block truncated');
    return this.buf[this.pos++]!;
  }

  bytes(n: number): Uint8Array {
    if (this.pos + n > this.buf.length) throw new Error('block truncated');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  uvarint(): number {
    let b = this.byte();
    if (b < 0x80) return b;
    let value = b & 0x7f;
    let mul = 128;
    for (;;) {
      b = this.byte();
      value += (b & 0x7f) * mul;
      if (b < 0x80) return value;
      mul *= 128;
    }
  }

  svarint(): number {
    const z = this.uvarint();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }

  /**
   * k zigzag varints into `out` from index `at` (the decoder's hot loop: locals only, no call per value). Values of
   * up to four bytes (28 bits, nearly all of a block's steps) decode in integer arithmetic; longer ones in doubles,
   * exact to 2^53.
   */
  svarints(out: Float64Array, k: number, at = 0): void {
    const buf = this.buf;
    let pos = this.pos;
    const end = at + k;
    for (let i = at; i < end; i++) {
      let b = buf[pos++]!;
      if (b < 0x80) { out[i] = (b >>> 1) ^ -(b & 1); continue; }
      let z = b & 0x7f;
      let shift = 7;
      while (shift < 28) {
        b = buf[pos++]!;
        z |= (b & 0x7f) << shift;
        shift += 7;
        if (b < 0x80) break;
      }
      if (b < 0x80) { out[i] = (z >>> 1) ^ -(z & 1); continue; }
      let big = z;
      let mul = 2 ** 28;
      do {
        b = buf[pos++]!;
        big += (b & 0x7f) * mul;
        mul *= 128;
      } while (b >= 0x80);
      out[i] = big % 2 === 0 ? big / 2 : -(big + 1) / 2;
    }
    if (pos > buf.length) throw new Error('block truncated');
    this.pos = pos;
  }

  get done(): boolean {
    return this.pos >= this.buf.length;
  }
}
