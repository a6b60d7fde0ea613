import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { ingest, ingestBulk, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';

const NOW = Date.UTC(2026, 10, 21, 12);
const T0 = NOW - 3_600_000;

for (const backend of BACKENDS) {
  describe(`series reads on ${backend}`, () => {
    let m: MetricsHarness;
    let a: { token: string; tenantId: string };
    let b: { token: string; tenantId: string };
    const get = (token: string, path: string) => call(m.url, 'GET', path, { token });

    before(async () => {
      m = await startMetrics(backend, { now: () => NOW, seriesPoints: 100, seriesPointsMax: 1000 });
      a = await m.newTenant();
      b = await m.newTenant();
      // Tenant A: host h1 reports cpu.usage = i every 10 s for 360 reports (one hour); host h2 reports 50 with a phase of 3 s.
      const sends = [];
      for (let i = 0; i < 360; i++) {
        sends.push(ingest(m.url, a.token, makeReport({ agentId: 'h1', ts: T0 + i * 10_000, cpu: { usage: i % 100 } })));
        sends.push(ingest(m.url, a.token, makeReport({ agentId: 'h2', ts: T0 + 3_000 + i * 10_000, cpu: { usage: 50 }, disks: [] })));
      }
      sends.push(ingest(m.url, b.token, makeReport({ agentId: 'hb', ts: T0, cpu: { usage: 99 } })));
      const results = await Promise.all(sends);
      assert.ok(results.every((r) => r.status === 200));
    });
    after(() => m.close());

    test('GET /api/v1/hosts lists only the token\'s tenant hosts', async () => {
      assert.deepEqual((await get(a.token, '/api/v1/hosts')).body, ['h1', 'h2']);
      assert.deepEqual((await get(b.token, '/api/v1/hosts')).body, ['hb']);
    });

    test('a range within the budget returns raw reports, inclusive at both ends', async () => {
      const r = await get(a.token, `/api/v1/host/h1?from=${T0 + 10_000}&to=${T0 + 50_000}`);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.timestamps, [T0 + 10_000, T0 + 20_000, T0 + 30_000, T0 + 40_000, T0 + 50_000]);
      assert.deepEqual(r.body.metrics['cpu.usage'], [1, 2, 3, 4, 5]);
      assert.equal(r.body.bucketMs, null);
      assert.equal(r.body.hostId, 'h1');
      assert.equal(Object.keys(r.body.metrics).length, 17, 'cpu.usage, memory.*, 8 disk and 4 network metrics');
    });

    test('an answer of more than 50,000 values is streamed column by column (chunked, headers kept); its values are those a whole answer holds', async () => {
      const c = await m.newTenant();
      const put = await ingestBulk(m.url, c.token, Array.from({ length: 1000 }, (_, i) => makeReport({ agentId: 'big', ts: T0 + i * 3_000, cpu: { usage: i % 97 } })));
      assert.equal(put.status, 200);
      // 1,000 raw reports x 17 metrics x (value, min, max) = 51,000 values.
      const streamed = await get(c.token, `/api/v1/host/big?from=${T0}&to=${T0 + 3_000_000}&points=1000&minmax=true`);
      assert.equal(streamed.status, 200);
      assert.equal(streamed.headers.get('transfer-encoding'), 'chunked');
      assert.equal(streamed.headers.get('content-length'), null);
      assert.match(streamed.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(streamed.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(streamed.body.bucketMs, null);
      assert.deepEqual(streamed.body.timestamps, Array.from({ length: 1000 }, (_, i) => T0 + i * 3_000));
      assert.deepEqual(streamed.body.metrics['cpu.usage'], Array.from({ length: 1000 }, (_, i) => i % 97));
      assert.deepEqual(streamed.body.min, streamed.body.metrics);
      assert.equal(Object.keys(streamed.body.metrics).length, 17);
      // One metric is below the threshold: answered whole (one buffer, its length given), with the same values.
      const whole = await get(c.token, `/api/v1/host/big?from=${T0}&to=${T0 + 3_000_000}&points=1000&minmax=true&metrics=cpu.usage`);
      assert.equal(Number(whole.headers.get('content-length')), Buffer.byteLength(JSON.stringify(whole.body)));
      assert.equal(whole.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.equal(whole.headers.get('x-content-type-options'), 'nosniff');
      assert.deepEqual(whole.body.metrics['cpu.usage'], streamed.body.metrics['cpu.usage']);
      assert.deepEqual(whole.body.timestamps, streamed.body.timestamps);
    });

    test('past the budget, points are per-metric means of equal-width buckets', async () => {
      const r = await get(a.token, `/api/v1/host/h1?from=${T0}&to=${T0 + 999_999}&points=10`);
      assert.equal(r.body.bucketMs, 100_000);
      assert.equal(r.body.points, 10);
      assert.deepEqual(r.body.timestamps, Array.from({ length: 10 }, (_, i) => T0 + i * 100_000));
      assert.deepEqual(r.body.metrics['cpu.usage'], Array.from({ length: 10 }, (_, i) => i * 10 + 4.5));
      assert.deepEqual(r.body.metrics['memory.percent'], Array.from({ length: 10 }, () => 50));
    });

    test('minmax=true adds each bucket\'s smallest and largest raw value; raw points are their own extremes', async () => {
      const r = await get(a.token, `/api/v1/host/h1?from=${T0}&to=${T0 + 999_999}&points=10&minmax=true`);
      assert.deepEqual(r.body.min['cpu.usage'], Array.from({ length: 10 }, (_, i) => i * 10));
      assert.deepEqual(r.body.max['cpu.usage'], Array.from({ length: 10 }, (_, i) => i * 10 + 9));
      const raw = await get(a.token, `/api/v1/host/h1?from=${T0 + 10_000}&to=${T0 + 30_000}&minmax=true`);
      assert.deepEqual(raw.body.min['cpu.usage'], [1, 2, 3]);
      assert.deepEqual(raw.body.max['cpu.usage'], [1, 2, 3]);
      const plain = await get(a.token, `/api/v1/host/h1?from=${T0}&to=${T0 + 999_999}&points=10`);
      assert.equal(plain.body.min, undefined, 'off by default');
      const agg = await get(a.token, `/api/v1/aggregate?from=${T0}&to=${T0 + 99_999}&points=1&minmax=true`);
      assert.deepEqual([agg.body.min['cpu.usage'], agg.body.max['cpu.usage']], [[0], [50]], 'extremes over every host\'s raw values');
      // Exactly the documented fields, whatever the serializer.
      assert.deepEqual(Object.keys(r.body).sort(), ['bucketMs', 'from', 'hostId', 'max', 'metrics', 'min', 'points', 'timestamps', 'to']);
      assert.deepEqual(Object.keys(agg.body).sort(), ['bucketMs', 'from', 'hosts', 'max', 'metrics', 'min', 'points', 'timestamps', 'to']);
    });

    test('a bucketed mean of 16-digit counters is the exact quotient, never a rounding outside the bucket\'s min and max', async () => {
      const c = await m.newTenant();
      const V = 2_345_678_901_234_567; // below 2^53: exact in float64 and in JSON
      for (let i = 0; i < 3; i++) {
        assert.equal((await ingest(m.url, c.token, makeReport({ agentId: 'nic', ts: T0 + i * 1_200_000, network: { rxBytes: V + i } }))).status, 200);
      }
      const q = `from=${T0}&to=${T0 + 3_600_000 - 1}&points=2&minmax=true&metrics=network.rxBytes`;
      for (const path of [`/api/v1/host/nic?${q}`, `/api/v1/aggregate?${q}`]) {
        const r = await get(c.token, path);
        assert.equal(r.body.bucketMs, 1_800_000, path);
        assert.deepEqual(r.body.metrics['network.rxBytes'], [V + 0.5, V + 2], path);
        assert.deepEqual(r.body.max['network.rxBytes'], [V + 1, V + 2], path);
      }
    });

    test('without from/to the last hour is served, with the configured budget', async () => {
      const r = await get(a.token, '/api/v1/host/h1');
      assert.equal(r.body.to, NOW);
      assert.equal(r.body.from, NOW - 3_600_000);
      assert.equal(r.body.points, 100);
      assert.ok(r.body.timestamps.length <= 100 && r.body.timestamps.length > 0);
      // ceil(3,600,001 / 100) = 36,001 ms, widened until the epoch-aligned grid fits 100 buckets.
      assert.ok(r.body.bucketMs >= 36_001 && r.body.bucketMs < 36_500, String(r.body.bucketMs));
      const [first, ...rest] = r.body.timestamps as number[];
      assert.ok(rest.every((t) => t % r.body.bucketMs === 0), 'buckets start at multiples of their width');
      assert.equal(first, Math.max(NOW - 3_600_000, Math.floor((NOW - 3_600_000) / r.body.bucketMs) * r.body.bucketMs), 'the first, which starts before from, is stamped from');
    });

    test('metrics= keeps the named metrics only, and only the points where one of them has a value', async () => {
      const c = await m.newTenant();
      const sent = await Promise.all([
        ingest(m.url, c.token, makeReport({ agentId: 'h3', ts: T0, cpu: { usage: 10 } })),
        ingest(m.url, c.token, makeReport({ agentId: 'h3', ts: T0 + 10_000, cpu: { usage: 20 }, disks: [] })),
        ingest(m.url, c.token, makeReport({ agentId: 'h3', ts: T0 + 20_000, cpu: { usage: 30 } })),
      ]);
      assert.ok(sent.every((r) => r.status === 200));
      const q = `from=${T0}&to=${T0 + 20_000}&minmax=true`;
      const disk = await get(c.token, `/api/v1/host/h3?${q}&metrics=disk./.percent,no.such.metric`);
      assert.equal(disk.status, 200);
      assert.deepEqual(disk.body.timestamps, [T0, T0 + 20_000], 'the report without disks is not a point of this answer');
      assert.deepEqual(disk.body.metrics, { 'disk./.percent': [50, 50] });
      assert.deepEqual(disk.body.min, { 'disk./.percent': [50, 50] });
      const two = await get(c.token, `/api/v1/host/h3?${q}&metrics=memory.percent,cpu.usage,cpu.usage`);
      assert.deepEqual(two.body.timestamps, [T0, T0 + 10_000, T0 + 20_000]);
      assert.deepEqual(Object.keys(two.body.metrics), ['cpu.usage', 'memory.percent']);
      assert.deepEqual(two.body.metrics['cpu.usage'], [10, 20, 30]);
      const all = await get(c.token, `/api/v1/host/h3?${q}`);
      assert.ok(Object.keys(all.body.metrics).length > 10, 'without the parameter, every metric');
      const agg = await get(a.token, `/api/v1/aggregate?from=${T0}&to=${T0 + 99_999}&points=1&minmax=true&metrics=cpu.usage`);
      assert.deepEqual(agg.body.metrics, { 'cpu.usage': [agg.body.metrics['cpu.usage'][0]] });
      assert.deepEqual([agg.body.min['cpu.usage'], agg.body.max['cpu.usage']], [[0], [50]]);
      for (const bad of ['metrics=', 'metrics=,cpu.usage', 'metrics=cpu.usage,,memory.percent', 'metrics=cpu.usage,']) {
        const r = await get(c.token, `/api/v1/host/h3?${bad}`);
        assert.equal(r.status, 400, bad);
        assert.equal(r.body.error, 'invalid_request');
      }
    });

    test('metrics= takes 100 long names; one too long for the request line is a 431', async () => {
      const c = await m.newTenant();
      // service.<name>.restarts with a 75-character name: 91 characters each, 9.2 KB in all (the bound was 8,192).
      const names = Array.from({ length: 100 }, (_, i) => `svc-${String(i).padStart(3, '0')}-${'x'.repeat(67)}`);
      assert.equal((await ingest(m.url, c.token, makeReport({ agentId: 'h4', ts: T0, services: names.map((name, i) => ({ name, restarts: i })) }))).status, 200);
      const r = await get(c.token, `/api/v1/host/h4?from=${T0}&to=${T0}&metrics=${names.map((n) => `service.${n}.restarts`).join(',')}`);
      assert.equal(r.status, 200, r.text.slice(0, 200));
      assert.equal(Object.keys(r.body.metrics).length, 100);
      assert.deepEqual(r.body.metrics[`service.${names[99]}.restarts`], [99]);
      // 100 names of the longest length (256) are within the parameter's bound but not within 16 KiB of request line.
      const longest = Array.from({ length: 100 }, (_, i) => `m${String(i).padStart(3, '0')}`.padEnd(256, 'x')).join(',');
      const r431 = await get(c.token, `/api/v1/host/h4?metrics=${longest}`);
      assert.deepEqual([r431.status, r431.body.error], [431, 'header_too_large']);
    });

    test('an empty range is an empty series, not an error', async () => {
      const r = await get(a.token, `/api/v1/host/h1?from=0&to=1000`);
      assert.equal(r.status, 200);
      assert.deepEqual([r.body.timestamps, r.body.metrics], [[], {}]);
    });

    test('aggregate: 422 limit_exceeded when the tenant\'s names times the buckets pass 2,000,000 values, naming the budget that fits', async () => {
      const c = await m.newTenant();
      // Three hosts of 800 names each (under the per-host limit of 1,000): about 2,450 names with the base ones.
      for (let i = 0; i < 3; i++) {
        const network = Object.fromEntries(Array.from({ length: 800 }, (_, j) => [`h${i}k${j}`, j]));
        assert.equal((await ingest(m.url, c.token, makeReport({ agentId: `n${i}`, ts: NOW - 1000, network: network as never }))).status, 200);
      }
      // 1,000 buckets of 20 s, whole multiples of the aggregate's 10 s unit.
      const range = `from=${NOW - 20_000_000}&to=${NOW - 1}`;
      const r = await get(c.token, `/api/v1/aggregate?${range}&points=1000`);
      assert.deepEqual([r.status, r.body.error], [422, 'limit_exceeded'], r.text);
      const fits = Number(/ask for at most (\d+) points/.exec(r.body.details)?.[1]);
      assert.ok(fits >= 800 && fits < 1000, r.body.details);
      assert.equal((await get(c.token, `/api/v1/aggregate?${range}&points=${fits}`)).status, 200, 'the budget it names is served');
    });

    test('400 for non-integer bounds, from after to, or points beyond the cap', async () => {
      const cases: Array<[string, RegExp]> = [
        ['from=abc', /querystring from: must be a decimal integer/],
        ['to=1.5', /querystring to: must be a decimal integer/],
        ['from=-1', /querystring from: must be >= 0/],
        [`from=${T0 + 1}&to=${T0}`, /querystring from: .* is after to/],
        ['points=0', /querystring points: must be >= 1/],
        ['points=1001', /querystring points: 1001 is above the maximum of 1000/],
      ];
      for (const path of ['/api/v1/host/h1', '/api/v1/aggregate']) {
        for (const [q, details] of cases) {
          const r = await get(a.token, `${path}?${q}`);
          assert.equal(r.status, 400, `${path}?${q}`);
          assert.deepEqual(r.body.error, 'invalid_request');
          assert.match(r.body.details, details);
        }
      }
    });

    test('a downsampled answer holds only the range\'s reports, whatever its aligned buckets span (raw, host tier and tenant tiers)', async () => {
      const c = await m.newTenant();
      const at = (ts: number, usage: number) => ingest(m.url, c.token, makeReport({ agentId: 'w1', ts, cpu: { usage } }));
      // 100 % three hours before the range, 0 % inside it (half an hour in), 100 % again just past its end.
      for (const [ts, usage] of [[T0 - 3 * 3_600_000, 100], [T0 + 1_800_000, 0], [T0 + 1_810_000, 0], [T0 + 3_600_000, 100]] as const) {
        assert.equal((await at(ts, usage)).status, 200);
      }
      const q = `from=${T0 - 1}&to=${T0 + 3_599_999}&points=1&minmax=true`;
      const check = async (path: string) => {
        const r = await get(c.token, `${path}?${q}`);
        assert.equal(r.status, 200, path);
        assert.deepEqual(r.body.timestamps, [T0 - 1], `${path}: one bucket, stamped from`);
        assert.deepEqual([r.body.metrics['cpu.usage'], r.body.min['cpu.usage'], r.body.max['cpu.usage']], [[0], [0], [0]], path);
      };
      // From the head, then from sealed blocks and rollups (the grid's one bucket spans hours around the range).
      await check('/api/v1/host/w1');
      await check('/api/v1/aggregate');
      await m.deps.store.flush();
      await check('/api/v1/host/w1');
      await check('/api/v1/aggregate');
      const top = await get(c.token, `/api/v1/top?metric=cpu.usage&from=${T0 - 1}&to=${T0 + 3_599_999}`);
      assert.deepEqual(top.body.map((h: { hostId: string; value: number }) => [h.hostId, h.value]), [['w1', 0]]);
    });

    test('another tenant\'s host answers 404 exactly like a host that does not exist', async () => {
      const other = await get(b.token, '/api/v1/host/h1');
      const none = await get(b.token, '/api/v1/host/zz');
      assert.equal(other.status, 404);
      assert.deepEqual(other.body, { error: 'not_found', details: 'no host h1' });
      assert.deepEqual(none.body, { error: 'not_found', details: 'no host zz' });
      assert.equal((await get(a.token, '/api/v1/host/hb')).status, 404);
    });

    test('a host id of the full 128 characters is read back; any longer id is the 404 of an unknown host; a malformed escape is a 400', async () => {
      const c = await m.newTenant();
      const id = `${'n'.repeat(120)}.example`;
      assert.equal((await ingest(m.url, c.token, makeReport({ agentId: id, ts: T0 }))).status, 200);
      const r = await get(c.token, `/api/v1/host/${id}`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual([r.body.hostId, r.body.timestamps], [id, [T0]]);
      // 129 characters; 128 characters of 4 UTF-8 bytes, each written %XX; and one past any bound the router keeps.
      for (const long of [`${id}x`, encodeURIComponent('\u{1F600}'.repeat(128)), 'a'.repeat(5000)]) {
        const none = await get(c.token, `/api/v1/host/${long}`);
        assert.equal(none.status, 404, `${long.length} characters: ${none.text.slice(0, 200)}`);
        assert.equal(none.body.error, 'not_found');
      }
      for (const bad of ['%ZZ', '%E9']) {
        const r400 = await get(c.token, `/api/v1/host/${bad}`);
        assert.equal(r400.status, 400, bad);
        assert.equal(r400.body.error, 'invalid_request', 'a path that does not decode names no id');
      }
      const withToken = await get(c.token, `/api/v1/host/%E9?token=${c.token}`);
      assert.equal(withToken.status, 400);
      assert.ok(withToken.body.details.includes('token=[REDACTED]') && !withToken.text.includes(c.token), 'a token in the query of such a path is not quoted back');
    });

    test('the aggregate is the mean of every sample of the tenant\'s hosts only, per aligned bucket', async () => {
      const r = await get(a.token, `/api/v1/aggregate?from=${T0}&to=${T0 + 99_999}&points=1`);
      assert.equal(r.status, 200);
      assert.equal(r.body.hosts, 2);
      // 100 s at one point: one 120 s bucket, aligned; it holds only the range's reports, not those of its last 20 s.
      assert.equal(r.body.bucketMs, 120_000);
      assert.deepEqual(r.body.timestamps, [T0]);
      // h1's 10 reports in the range are 0..9 (sum 45), h2's 10 are 50 each: (45 + 500) / 20.
      assert.deepEqual(r.body.metrics['cpu.usage'], [27.25]);
      // Only h1 has disks: the fleet value is h1's own.
      assert.deepEqual(r.body.metrics['disk./.percent'], [50]);
      const rb = await get(b.token, `/api/v1/aggregate?from=${T0}&to=${T0 + 99_999}&points=1`);
      assert.equal(rb.body.hosts, 1);
      assert.deepEqual(rb.body.metrics['cpu.usage'], [99]);
    });

    test('aggregate buckets are never narrower than the 10 s report interval', async () => {
      const r = await get(a.token, `/api/v1/aggregate?from=${T0}&to=${T0 + 59_999}&points=1000`);
      assert.equal(r.body.bucketMs, 10_000);
      assert.deepEqual(r.body.timestamps, Array.from({ length: 6 }, (_, i) => T0 + i * 10_000));
      assert.deepEqual(r.body.metrics['cpu.usage'], [25, 25.5, 26, 26.5, 27, 27.5]);
    });

    test('aggregate buckets are whole multiples of 10 s, so hosts reporting every 10 s at different phases weigh the same in every bucket', async () => {
      const c = await m.newTenant();
      // Three hosts with constant values, 10 s apart each, at phases 0, 3 and 7 s.
      const reports = [[0, 10], [3_000, 20], [7_000, 60]].flatMap(([phase, usage], h) =>
        Array.from({ length: 360 }, (_, i) => makeReport({ agentId: `p${h}`, ts: T0 + phase! + i * 10_000, cpu: { usage: usage! } })));
      assert.equal((await ingestBulk(m.url, c.token, reports)).status, 200);
      // 84 points over the hour ask for 42.9 s buckets, which would hold 4 samples of one host and 5 of another.
      const r = await get(c.token, `/api/v1/aggregate?from=${T0}&to=${T0 + 3_599_999}&points=84&metrics=cpu.usage`);
      assert.equal(r.status, 200);
      assert.equal(r.body.bucketMs, 50_000);
      assert.equal(r.body.timestamps.length, 72);
      assert.deepEqual(r.body.metrics['cpu.usage'], Array.from({ length: 72 }, () => 30), 'every bucket is the mean of the three hosts');
    });

    test('every read path answers 401 without a valid token', async () => {
      for (const path of ['/api/v1/hosts', '/api/v1/host/h1', '/api/v1/aggregate']) {
        for (const token of [undefined, 'mtk_notarealtokennotarealtoken']) {
          const r = await call(m.url, 'GET', path, token ? { token } : {});
          assert.equal(r.status, 401, path);
          assert.equal(r.body.error, 'unauthorized');
        }
      }
    });

    test('unknown routes and methods get JSON 404s', async () => {
      const r = await get(a.token, '/api/v1/nope');
      assert.equal(r.status, 404);
      assert.equal(r.body.error, 'not_found');
      const d = await call(m.url, 'DELETE', '/api/v1/hosts', { token: a.token });
      assert.equal(d.status, 404);
      assert.equal(d.body.error, 'not_found');
    });
  });
}
