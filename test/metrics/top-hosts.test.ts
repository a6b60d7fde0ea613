// readTopHostsBy: the fleet page's pass over every host's range, stopped between two hosts when the one who asked has left.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { HostLatest, MetricsStore } from '../../src/metrics/domain/metrics-store.js';
import { readTopHostsBy } from '../../src/metrics/domain/top-hosts.js';

const host = (i: number): HostLatest => ({ hostId: `h${i}`, hostname: `h${i}`, platform: 'linux', lastTs: 0, cpuUsage: i, memoryPercent: null, diskPercent: null, intervalMs: null });

/** A store of `n` hosts whose range reads are counted; cpu.usage (id 1) is the host's number. */
function fakeStore(n: number, onRead: (reads: number) => void): MetricsStore {
  let reads = 0;
  return {
    latestByHost: () => Promise.resolve(Array.from({ length: n }, (_, i) => host(i))),
    readHostSeries: (_tenant: string, hostId: string) => {
      onRead(++reads);
      return Promise.resolve({ bucketMs: 1000, timestamps: [0], metrics: new Map([[1, [Number(hostId.slice(1))]]]) });
    },
    metricNames: () => Promise.resolve(new Map([[1, 'cpu.usage']])),
  } as unknown as MetricsStore;
}

test('every host is read and ranked; an aborted signal stops the pass at the next host', async () => {
  let reads = 0;
  const all = await readTopHostsBy(fakeStore(5, (r) => { reads = r; }), 't', ['cpu.usage'], { from: 0, to: 1 }, 2);
  assert.equal(reads, 5);
  assert.equal(all.hosts, 5);
  assert.deepEqual(all.ranked.get('cpu.usage')!.map((h) => h.hostId), ['h4', 'h3']);

  const ac = new AbortController();
  reads = 0;
  const stopped = readTopHostsBy(fakeStore(5, (r) => { reads = r; if (r === 2) ac.abort(); }), 't', ['cpu.usage'], { from: 0, to: 1 }, 2, { signal: ac.signal });
  await assert.rejects(stopped, { name: 'AbortError' });
  assert.equal(reads, 2, 'no host is read after the abort');
});
