import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { MEMORY_MAX_BYTES, Spool, type SpoolEntry } from '../../src/agent/delivery/spool.js';
import { captureLog, tempDir } from './agent-harness.js';

const dirs: string[] = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });
function dir() { const d = tempDir(); dirs.push(d); return d; }
async function body(spool: Spool, entry: SpoolEntry): Promise<string> {
  for await (const b of spool.readMany([entry], [], [])) return b.toString();
  throw new Error('nothing read');
}

test('reports survive a reopen, in order, and new ones continue the sequence', async () => {
  const d = dir();
  const cap = captureLog();
  const a = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log, now: () => 2_000 });
  await a.append(Buffer.from('one'), 1_000);
  await a.append(Buffer.from('two'), 2_000);
  const b = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log, now: () => 3_000 });
  assert.equal(b.length, 2);
  assert.equal(await body(b, b.peek()!), 'one');
  const third = await b.append(Buffer.from('three'), 3_000);
  assert.equal(third.seq, 3);
  await b.removeMany([b.peek()!], 'delivered');
  assert.equal(await body(b, b.peek()!), 'two');
  assert.equal(b.bytes, 8);
});

test('half-written files from a crash are removed at open, never sent', async () => {
  const d = dir();
  writeFileSync(path.join(d, 'r-0000000000000001-1000.json.tmp'), '{"trunc');
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: captureLog().log, now: () => 1_000 });
  assert.equal(s.length, 0);
  assert.deepEqual(readdirSync(d), []);
});

test('past the size bound the oldest reports are dropped first, counted persistently, and logged', async () => {
  const d = dir();
  const cap = captureLog();
  const s = await Spool.open({ dir: d, maxBytes: 25, maxAgeMs: 1e9, log: cap.log, now: () => 10 });
  for (let i = 1; i <= 5; i++) await s.append(Buffer.from(`report-${i}..`), i);
  assert.equal(s.length, 2);
  assert.equal(await body(s, s.peek()!), 'report-4..');
  assert.equal(s.counters.dropped, 3);
  assert.ok(cap.find('spool bound reached, dropped oldest reports unsent').length >= 1);
  const again = await Spool.open({ dir: d, maxBytes: 25, maxAgeMs: 1e9, log: cap.log, now: () => 10 });
  assert.equal(again.counters.dropped, 3);
});

test('reports older than the age bound are dropped at open and on append', async () => {
  const d = dir();
  let now = 1_000;
  const cap = captureLog();
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 500, log: cap.log, now: () => now });
  await s.append(Buffer.from('old'), 900);
  now = 1_600;
  await s.append(Buffer.from('new'), 1_600);
  assert.equal(s.length, 1);
  assert.equal(await body(s, s.peek()!), 'new');
  now = 5_000;
  const reopened = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 500, log: cap.log, now: () => now });
  assert.equal(reopened.length, 0);
  assert.equal(reopened.counters.dropped, 2);
});

test('only names the spool writes are indexed (the path is derived from seq and ts again); other files are left alone', async () => {
  const d = dir();
  writeFileSync(path.join(d, 'r-0000000000000001-01000.json'), '{"leading":"zero"}');
  writeFileSync(path.join(d, 'r-0000000000000002-1000.json'), '{"n":2}');
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: captureLog().log, now: () => 1_000 });
  assert.deepEqual([s.length, s.peek()?.seq, s.bytes], [1, 2, 7]);
  assert.equal(await body(s, s.peek()!), '{"n":2}');
  await s.removeMany([s.peek()!], 'delivered');
  await s.settled();
  assert.deepEqual(readdirSync(d).sort(), ['r-0000000000000001-01000.json']);
});

test('counters saved twice at once (both loops counting) both land, the last value on disk, no temporary file left', async () => {
  const d = dir();
  const s = await Spool.open({ dir: d, maxBytes: 40, maxAgeMs: 1e9, log: captureLog().log, now: () => 10 });
  for (let i = 1; i <= 4; i++) await s.append(Buffer.from('report-10'), i);
  for (let round = 0; round < 20; round++) {
    const [first, second] = s.peekBatch(2, 1e9);
    // Two counts saved in the same tick (the delivery loop rejecting, the collection loop's bound dropping), and
    // two reports appended to keep the spool full.
    await Promise.all([s.removeMany([first!], 'rejected'), s.removeMany([second!], 'rejected')]);
    await s.append(Buffer.from('report-10'), 10);
    await s.append(Buffer.from('report-10'), 10);
  }
  assert.deepEqual(s.counters, { dropped: 0, rejected: 40 });
  assert.deepEqual(JSON.parse(readFileSync(path.join(d, 'counters.json'), 'utf8')), s.counters);
  assert.deepEqual(readdirSync(d).filter((n) => n.endsWith('.tmp')), []);
});

test('a report whose write fails (a full disk, say) leaves no temporary file behind and is held in memory, in its place', async () => {
  const d = dir();
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: captureLog().log, now: () => 10 });
  // A non-empty directory where the report's file goes makes the write's last step (the rename) fail.
  mkdirSync(path.join(d, 'r-0000000000000001-5.json', 'x'), { recursive: true });
  const held = await s.append(Buffer.from('held'), 5);
  assert.deepEqual(readdirSync(d).filter((n) => n.endsWith('.tmp')), []);
  assert.equal(s.inMemory, 1);
  await s.append(Buffer.from('next'), 6);
  assert.equal(s.peek(), held);
  assert.deepEqual(await Promise.all(s.peekBatch(10, 1e9).map((e) => body(s, e))), ['held', 'next']);
});

/** Makes every write to the spool fail (its directory replaced by a file: ENOTDIR, as for root a full disk would), and undoes it. */
function unwritable(d: string): { restore(): void } {
  rmSync(d, { recursive: true, force: true });
  writeFileSync(d, '');
  return { restore() { rmSync(d); mkdirSync(d, { mode: 0o700 }); } };
}

test('while the spool cannot be written, reports are held in memory and sent in order with the files; one line says so, one says it is over', async () => {
  const d = dir();
  const cap = captureLog();
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, log: cap.log, now: () => 10 });
  await s.append(Buffer.from('on disk 1'), 1);
  await s.removeMany([s.peek()!], 'delivered');
  await s.settled();
  const full = unwritable(d);
  for (let i = 2; i <= 4; i++) await s.append(Buffer.from(`in memory ${i}`), i);
  assert.equal(s.inMemory, 3);
  assert.equal(cap.find('the spool cannot be written: reports are held in memory until it can, and lost if the agent stops first').length, 1, 'said once, not per report');
  // Refused for good while full: the count stays in memory, the removal goes on (the counters file cannot be written).
  await s.removeMany([s.peekBatch(2, 1e9)[1]!], 'rejected');
  assert.deepEqual(s.counters, { dropped: 0, rejected: 1 });
  assert.equal(cap.find('spool counters could not be saved; kept in memory').length, 1);
  full.restore();
  await s.append(Buffer.from('on disk 5'), 5);
  assert.deepEqual(cap.find('the spool can be written again; the reports held in memory are written to it').map((l) => [l['held'], l['stillInMemory']]), [[2, 0]]);
  assert.equal(s.inMemory, 0);
  assert.deepEqual(readdirSync(d).filter((n) => n.startsWith('r-')).sort(), ['r-0000000000000002-2.json', 'r-0000000000000004-4.json', 'r-0000000000000005-5.json'],
    'written in their places: they survive a stop now');
  const batch = s.peekBatch(10, 1e9);
  assert.deepEqual(await Promise.all(batch.map((e) => body(s, e))), ['in memory 2', 'in memory 4', 'on disk 5'], 'in order, held and written alike');
  await s.removeMany(batch, 'delivered');
  await s.settled();
  assert.equal(s.length, 0);
  assert.equal(s.inMemory, 0);
  assert.equal(s.bytes, 0);
  assert.deepEqual(readdirSync(d).filter((n) => n.startsWith('r-')), [], 'delivered: unlinked');
});

test('reports held in memory are bounded: past MEMORY_MAX_BYTES the oldest held go first, counted as dropped; files are untouched', async (t) => {
  const d = dir();
  const cap = captureLog();
  const s = await Spool.open({ dir: d, maxBytes: 1e9, maxAgeMs: 1e9, log: cap.log, now: () => 10 });
  await s.append(Buffer.from('on disk'), 1);
  const full = unwritable(d);
  t.after(full.restore);
  const big = Buffer.alloc(MEMORY_MAX_BYTES / 4, 'x');
  for (let i = 2; i <= 6; i++) await s.append(big, i);
  assert.equal(s.inMemory, 4, 'five of a quarter each: the first held is dropped');
  assert.deepEqual(s.peekBatch(10, 1e9).map((e) => e.ts), [1, 3, 4, 5, 6], 'the report on disk stays, before them');
  assert.equal(s.counters.dropped, 1);
  assert.equal(cap.find('spool bound reached, dropped oldest reports unsent').length, 1);
});

test('under --spool-min-free-bytes new reports are held in memory, never written; back over it they are written, the held ones first', async () => {
  const d = dir();
  const cap = captureLog();
  let free = 50;
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, minFreeBytes: 100, freeBytes: () => free, log: cap.log, now: () => 10 });
  await s.append(Buffer.from('held 1'), 1);
  await s.append(Buffer.from('held 2'), 2);
  assert.equal(s.inMemory, 2);
  assert.deepEqual(readdirSync(d).filter((n) => n.startsWith('r-')), [], 'nothing written under the floor');
  const said = cap.find('the spool cannot be written: reports are held in memory until it can, and lost if the agent stops first');
  assert.equal(said.length, 1);
  assert.match(String(said[0]!['error']), /50 bytes free, under --spool-min-free-bytes \(100\)/);
  free = 1_000;
  await s.append(Buffer.from('written 3'), 3);
  assert.equal(s.inMemory, 0);
  assert.deepEqual(readdirSync(d).filter((n) => n.startsWith('r-')).sort(), ['r-0000000000000001-1.json', 'r-0000000000000002-2.json', 'r-0000000000000003-3.json']);
  assert.deepEqual(await Promise.all(s.peekBatch(10, 1e9).map((e) => body(s, e))), ['held 1', 'held 2', 'written 3']);
});

test('the real free space is read when no reader is given: a floor above any disk holds everything in memory', async () => {
  const d = dir();
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, minFreeBytes: Number.MAX_SAFE_INTEGER, log: captureLog().log, now: () => 10 });
  await s.append(Buffer.from('held'), 1);
  assert.equal(s.inMemory, 1);
  const none = await Spool.open({ dir: dir(), maxBytes: 1e6, maxAgeMs: 1e9, minFreeBytes: 1, log: captureLog().log, now: () => 10 });
  await none.append(Buffer.from('written'), 1);
  assert.equal(none.inMemory, 0);
});

test('a held report delivered while it is being written to the spool leaves no file to be sent again after a restart', async () => {
  const d = dir();
  let free = 0;
  const s = await Spool.open({ dir: d, maxBytes: 1e6, maxAgeMs: 1e9, minFreeBytes: 100, freeBytes: () => free, log: captureLog().log, now: () => 10 });
  await s.append(Buffer.from('held 1'), 1);
  await s.append(Buffer.from('held 2'), 2);
  free = 1_000;
  const [first, second] = s.peekBatch(2, 1e9);
  // The write starts, and before its file lands the delivery loop removes the first report (the service answered for it).
  const writing = s.writeHeld();
  await s.removeMany([first!], 'delivered');
  await writing;
  await s.settled();
  assert.deepEqual(readdirSync(d).filter((n) => n.startsWith('r-')), ['r-0000000000000002-2.json'], 'only the report still to send has a file');
  assert.equal(s.inMemory, 0);
  assert.equal(await body(s, second!), 'held 2');
});
