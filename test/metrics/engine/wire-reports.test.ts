import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { NewReport } from '../../../src/metrics/domain/metrics-store.js';
import { createShapeTable } from '../../../src/metrics/domain/report-shapes.js';
import { createWireBuilder, readWireReports } from '../../../src/metrics/storage/engine/wire-reports.js';
import { ReportMetrics } from '../../../src/metrics/domain/report-shapes.js';

const report = (hostId: string, ts: number, metrics: Array<[string, number]>, tenantId = 't1'): NewReport =>
  ({ tenantId, hostId, hostname: `${hostId}.example`, platform: 'linux', ts, metrics: ReportMetrics.of(metrics) });

/** What the writer thread reads, as plain values. */
const plain = (r: ReturnType<typeof readWireReports>[number]) => ({ ...r, names: [...r.names], values: [...Array.from(r.values)] });
const expected = (r: NewReport) => ({ tenantId: r.tenantId, hostId: r.hostId, hostname: r.hostname, platform: r.platform, ts: r.ts, names: [...r.metrics.keys()], values: [...r.metrics.values()] });

/** The writer thread's side: shapes arrive with the message that first uses them. */
function receive(shapes: ReturnType<typeof createShapeTable>, known: Map<number, string[]>) {
  for (const [shape, names] of shapes.takeNew()) known.set(shape, names);
  return known;
}

test('reports cross as columns and read back as they were, any range of them, past every growth of the arrays', () => {
  const shapes = createShapeTable();
  const wire = createWireBuilder(shapes);
  const reports: NewReport[] = [];
  for (let i = 0; i < 300; i++) {
    // Three shapes, values of every kind a float64 holds, hosts and tenants repeating.
    const metrics: Array<[string, number]> = i % 3 === 0 ? [['cpu.usage', i / 7], ['memory.used', -0]]
      : i % 3 === 1 ? [['cpu.usage', Number.MAX_VALUE], ['disk./.used', 5e-324], ['load.1', -i]]
        : Array.from({ length: 40 }, (_, k) => [`m${k}`, i * 1000 + k] as [string, number]);
    reports.push(report(`h${i % 7}`, 1_700_000_000_000 + i * 10_000, metrics, `t${i % 2}`));
  }
  for (const r of reports) wire.add(r);
  assert.equal(wire.size, 300);
  const { reports: columns, transfer } = wire.take();
  assert.equal(wire.size, 0, 'the builder starts over');
  assert.equal(columns.strings.length, 2 + 7 + 7 + 1, 'each distinct string once');
  assert.equal(transfer.length, 5);
  const known = receive(shapes, new Map());
  const all = readWireReports(columns, known, 0, 300).map(plain);
  assert.deepEqual(all, reports.map(expected));
  assert.ok(Object.is(all[0]!.values[1], -0), '-0 stays -0');
  assert.deepEqual(readWireReports(columns, known, 120, 123).map(plain), reports.slice(120, 123).map(expected));
});

test('a report whose names the full shape table cannot number carries its names itself', () => {
  const shapes = createShapeTable(2);
  const wire = createWireBuilder(shapes);
  const numbered = report('a', 1, [['x', 1], ['y', 2]]);
  const unnumbered = report('b', 2, [['p', 3], ['q', 4]]);
  wire.add(numbered);
  wire.add(unnumbered);
  wire.add(numbered);
  const { reports: columns } = wire.take();
  assert.deepEqual(columns.names, [[1, ['p', 'q']]]);
  assert.deepEqual(readWireReports(columns, receive(shapes, new Map()), 0, 3).map(plain), [numbered, unnumbered, numbered].map(expected));
});

test('a message past the arrays\' kept size reads back whole, and so does the small one after it', () => {
  const shapes = createShapeTable();
  const wire = createWireBuilder(shapes);
  const big = Array.from({ length: 3_000 }, (_, i) => report('h', i, Array.from({ length: 30 }, (_, k) => [`m${k}`, i + k] as [string, number])));
  for (const r of big) wire.add(r);
  const first = wire.take().reports;
  assert.equal(first.values.length, 90_000);
  const known = receive(shapes, new Map());
  assert.deepEqual(readWireReports(first, known, 2_999, 3_000).map(plain), [expected(big[2_999]!)]);
  const small = report('s', 5, [['m0', 1]]);
  wire.add(small);
  const second = wire.take().reports;
  assert.equal(second.count, 1);
  assert.deepEqual(readWireReports(second, receive(shapes, known), 0, 1).map(plain), [expected(small)]);
  // Many reports of few values: past the kept number of reports rather than of values.
  const many = Array.from({ length: 5_000 }, (_, i) => report(`h${i % 3}`, i, [['m0', i]]));
  for (const r of many) wire.add(r);
  const third = wire.take().reports;
  assert.deepEqual(readWireReports(third, receive(shapes, known), 4_998, 5_000).map(plain), many.slice(4_998).map(expected));
  wire.add(small);
  assert.deepEqual(readWireReports(wire.take().reports, receive(shapes, known), 0, 1).map(plain), [expected(small)]);
});
