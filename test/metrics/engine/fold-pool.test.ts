import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeBlock, type BlockData } from '../../../src/metrics/storage/engine/block-codec.js';
import { Buckets } from '../../../src/metrics/storage/engine/buckets.js';
import { createFoldPool, MIN_BLOCKS_TO_SPLIT } from '../../../src/metrics/storage/engine/fold-pool.js';
import { planGrid, subgrid } from '../../../src/metrics/storage/engine/query-plan.js';
import { WINDOW_MS } from '../../../src/metrics/storage/engine/windows.js';

const DAY0 = 1_699_920_000_000;

/** A host-day's blocks: 10 s reports with jitter, a decimal walk, a counter, and a metric that stops half-way. */
function day(windows: number): { blocks: Uint8Array[]; starts: number[] } {
  let s = 42;
  const rnd = () => { s = (s * 1103515245 + 12345) % 2 ** 31; return s / 2 ** 31; };
  const blocks: Uint8Array[] = [];
  const starts: number[] = [];
  let cpu = 40;
  let bytes = 1e9;
  for (let w = 0; w < windows; w++) {
    const start = DAY0 + w * WINDOW_MS;
    const n = 360;
    const ts = Float64Array.from({ length: n }, (_, i) => start + i * 10_000 + Math.floor(rnd() * 200));
    const cols: BlockData['columns'] = new Map();
    cols.set(1, Float64Array.from({ length: n }, () => (cpu = Math.max(0, Math.round((cpu + rnd() * 4 - 2) * 100) / 100))));
    cols.set(2, Float64Array.from({ length: n }, () => (bytes += Math.floor(rnd() * 50_000))));
    cols.set(3, Float64Array.from({ length: n }, (_, i) => (w < windows / 2 || i % 3 ? Math.round(rnd() * 1000) / 10 : Number.NaN)));
    blocks.push(encodeBlock({ ts, columns: cols }));
    starts.push(start);
  }
  return { blocks, starts };
}

const pool = createFoldPool(1);
after(() => pool.close());

test('a thread still starting is not sent a part: the fold is done here meanwhile, and warm() settles once the thread is ready', async () => {
  const cold = createFoldPool(1);
  try {
    const { blocks, starts } = day(24);
    const grid = planGrid(DAY0, DAY0 + 24 * WINDOW_MS - 1, 500, { unit: 1, tiers: [WINDOW_MS] });
    const warming = cold.warm();
    const first = new Buckets(grid);
    await cold.fold(first, blocks, starts);
    assert.equal(cold.foldedApart, 0, 'the starting thread was not waited for');
    assert.deepEqual(first.columns(true), local(grid, blocks));
    await warming;
    const second = new Buckets(grid);
    await cold.fold(second, blocks, starts);
    assert.equal(cold.foldedApart, 1, 'the ready thread folded a part');
    assert.deepEqual(second.columns(true), local(grid, blocks));
  } finally {
    await cold.close();
  }
});

function local(grid: ReturnType<typeof planGrid>, blocks: Uint8Array[]) {
  const b = new Buckets(grid);
  for (const x of blocks) b.addBlock(x);
  return b.columns(true);
}

test('a host-day folded half on a fold thread answers exactly what one thread folds, buckets straddling the split included', async () => {
  const { blocks, starts } = day(24);
  // 500 points over the day: 172,837 ms buckets, not aligned to the windows, so one bucket spans the split.
  const grid = planGrid(DAY0, DAY0 + 24 * WINDOW_MS - 1, 500, { unit: 1, tiers: [WINDOW_MS] });
  assert.equal(grid.tier, null);
  await pool.warm();
  const before = pool.foldedApart;
  const split = new Buckets(grid);
  await pool.fold(split, blocks, starts);
  assert.equal(pool.foldedApart, before + 1, 'a part went to the fold thread');
  assert.deepEqual(split.columns(true), local(grid, blocks));
});

test('a grid wider than the data and a query starting mid-day fold the same apart as together', async () => {
  const { blocks, starts } = day(12);
  for (const [from, to, points] of [[DAY0 - 3 * WINDOW_MS, DAY0 + 30 * WINDOW_MS, 97], [DAY0 + 5_555_555, DAY0 + 11 * WINDOW_MS, 1000]] as const) {
    const grid = planGrid(from, to, points, { unit: 1, tiers: [] });
    const split = new Buckets(grid);
    await pool.fold(split, blocks, starts);
    assert.deepEqual(split.columns(true), local(grid, blocks));
  }
});

test('more metrics than one slab of accumulators holds: every metric keeps its own buckets, on both threads', async () => {
  // 2,000 buckets: one metric per slab, so 30 metrics are 30 slabs and the fold thread sends back 15 or so.
  const metrics = 30;
  const blocks: Uint8Array[] = [];
  const starts: number[] = [];
  for (let w = 0; w < 8; w++) {
    const start = DAY0 + w * WINDOW_MS;
    const ts = Float64Array.from({ length: 360 }, (_, i) => start + i * 10_000);
    const cols: BlockData['columns'] = new Map();
    for (let m = 1; m <= metrics; m++) {
      const col = Float64Array.from({ length: 360 }, (_, i) => m * 1000 + ((i * 7 + w * 13 + m) % 97) / 10);
      cols.set(m, col);
    }
    blocks.push(encodeBlock({ ts, columns: cols }));
    starts.push(start);
  }
  const grid = planGrid(DAY0, DAY0 + 8 * WINDOW_MS - 1, 2000, { unit: 1, tiers: [] });
  const split = new Buckets(grid);
  await pool.fold(split, blocks, starts);
  const got = split.columns(true);
  assert.deepEqual(got, local(grid, blocks));
  assert.equal(got.metrics.size, metrics);
  for (let m = 1; m <= metrics; m++) {
    // No two metrics' values overlap (m * 1000 + under 10): a bucket that shared memory with another metric's would mix them.
    for (const column of [got.metrics, got.min!, got.max!]) {
      assert.ok(column.get(m)!.every((v) => v !== null && v >= m * 1000 && v < m * 1000 + 10), `metric ${m} holds only its own values`);
    }
    assert.ok(got.metrics.get(m)!.every((v, b) => got.min!.get(m)![b]! <= v! && v! <= got.max!.get(m)![b]!));
  }
});

test(`fewer than ${MIN_BLOCKS_TO_SPLIT} blocks, or every fold thread busy: the query folds its blocks itself`, async () => {
  const { blocks, starts } = day(MIN_BLOCKS_TO_SPLIT * 4);
  const grid = planGrid(DAY0, DAY0 + blocks.length * WINDOW_MS - 1, 300, { unit: 1, tiers: [] });
  const before = pool.foldedApart;
  const small = new Buckets(grid);
  await pool.fold(small, blocks.slice(0, MIN_BLOCKS_TO_SPLIT - 1), starts.slice(0, MIN_BLOCKS_TO_SPLIT - 1));
  assert.equal(pool.foldedApart, before, 'no part sent for a few blocks');
  assert.deepEqual(small.columns(true), local(grid, blocks.slice(0, MIN_BLOCKS_TO_SPLIT - 1)));
  // Two queries at once on one thread: the first takes it, the second does not wait for it.
  const [a, b] = [new Buckets(grid), new Buckets(grid)];
  await Promise.all([pool.fold(a, blocks, starts), pool.fold(b, blocks, starts)]);
  assert.equal(pool.foldedApart, before + 1, 'one of the two queries used the thread');
  const want = local(grid, blocks);
  assert.deepEqual(a.columns(true), want);
  assert.deepEqual(b.columns(true), want);
});

test('a block the fold thread cannot decode fails the read; the pool serves the next one', async () => {
  const { blocks, starts } = day(8);
  const grid = planGrid(DAY0, DAY0 + 8 * WINDOW_MS - 1, 500, { unit: 1, tiers: [] });
  const broken = [...blocks];
  broken[7] = Uint8Array.from([1, 2, 3, 4]);
  let decodeError: Error | undefined;
  try { new Buckets(grid).addBlock(broken[7]); } catch (e) { decodeError = e as Error; }
  assert.ok(decodeError, 'the block does not decode here either');
  // Block 7 is in the part the thread folds: its decoder's error, as a local decode would have thrown it.
  await assert.rejects(pool.fold(new Buckets(grid), broken, starts), (e: Error) => e.message === decodeError!.message);
  const ok = new Buckets(grid);
  await pool.fold(ok, blocks, starts);
  assert.deepEqual(ok.columns(true), local(grid, blocks));
});

test('subgrid: the buckets a span can fall in, at their offset in the whole grid', () => {
  const grid = { start: 1000, width: 100, count: 50, tier: null, from: 1010, to: 5990 };
  const range = { from: 1010, to: 5990 };
  assert.deepEqual(subgrid(grid, 1250, 1600), { grid: { start: 1200, width: 100, count: 4, tier: null, ...range }, first: 2 });
  assert.deepEqual(subgrid(grid, 0, 1150), { grid: { start: 1000, width: 100, count: 2, tier: null, ...range }, first: 0 });
  assert.deepEqual(subgrid(grid, 5500, 9000), { grid: { start: 5500, width: 100, count: 5, tier: null, ...range }, first: 45 });
  assert.equal(subgrid(grid, 9000, 9500).grid.count, 0);
});

test('no fold threads (one core): every block is folded by the query itself', async () => {
  const none = createFoldPool(0);
  const { blocks, starts } = day(6);
  const grid = planGrid(DAY0, DAY0 + 6 * WINDOW_MS - 1, 100, { unit: 1, tiers: [] });
  const b = new Buckets(grid);
  await none.fold(b, blocks, starts);
  assert.equal(none.foldedApart, 0);
  assert.deepEqual(b.columns(true), local(grid, blocks));
  await none.close();
});
