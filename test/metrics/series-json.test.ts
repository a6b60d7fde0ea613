// The streamed JSON of a large series answer is, joined, exactly what JSON.stringify writes for the whole answer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AggregateSeries, HostSeries } from '../../src/metrics/domain/series.js';
import { seriesJsonChunks } from '../../src/metrics/routes/series-json.js';

const host: HostSeries = {
  hostId: 'web-1', from: 0, to: 30_000, points: 1000, bucketMs: null,
  timestamps: [0, 10_000, 20_000],
  metrics: { 'cpu.usage': [1.5, null, 0.30000000000000004], 'disk./"quoted"\\.used': [1e21, -0, 5e-324] },
};

test('host answers with and without min/max, and an aggregate, join to JSON.stringify of the answer', () => {
  const aggregate: AggregateSeries = { from: 0, to: 30_000, points: 3, bucketMs: 10_000, hosts: 4, timestamps: host.timestamps, metrics: host.metrics };
  for (const answer of [host, { ...host, min: host.metrics, max: host.metrics }, aggregate]) {
    const chunks = [...seriesJsonChunks(answer)];
    assert.equal(chunks.join(''), JSON.stringify(answer));
    // One piece per column at least: no piece holds the whole answer.
    assert.ok(chunks.length >= 2 + Object.keys(answer.metrics).length, `${chunks.length} pieces`);
  }
});

test('an answer with no metric still joins to its JSON', () => {
  const empty: HostSeries = { ...host, timestamps: [], metrics: {} };
  assert.equal([...seriesJsonChunks(empty)].join(''), JSON.stringify(empty));
  assert.deepEqual(JSON.parse([...seriesJsonChunks(empty)].join('')), empty);
});
