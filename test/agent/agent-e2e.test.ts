import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { startAgent } from '../../src/agent/start-agent.js';
import type { App } from '../../src/core/http/create-app.js';
import { buildMetricsApp } from '../../src/metrics/app.js';
import { loadMetricsConfig, type MetricsConfig } from '../../src/metrics/config.js';
import { createMetricsDeps, type MetricsDeps } from '../../src/metrics/deps.js';
import { BACKENDS, freshStorage, type TestStorage } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { newTenant } from '../helpers/metrics.js';
import { captureLog, tempDir, waitFor } from './agent-harness.js';

/** The real metrics service over `storage`, on `port` (0: ephemeral), so it can be stopped and started again on the same data. */
async function startService(storage: TestStorage, port: number, extra: Partial<MetricsConfig> = {}): Promise<{ app: App; deps: MetricsDeps; url: string; port: number }> {
  const config: MetricsConfig = {
    ...loadMetricsConfig([], {}), logLevel: 'silent', port, dataDir: storage.dataDir, databaseUrl: storage.databaseUrl, dbSchema: storage.pgSchema, ...extra,
  };
  const deps = await createMetricsDeps(config);
  const app = await buildMetricsApp(config, deps);
  await app.listen({ host: '127.0.0.1', port });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no TCP address');
  return { app, deps, url: `http://127.0.0.1:${addr.port}`, port: addr.port };
}

async function stopService(s: { app: App; deps: MetricsDeps }): Promise<void> {
  await s.app.close();
  await s.deps.close();
}

const FAST = { intervalMs: 200, retryBaseMs: 20, retryMaxMs: 200, requestTimeoutMs: 5_000, shutdownTimeoutMs: 2_000 };

for (const backend of BACKENDS) {
  describe(`host agent against the real metrics service (${backend})`, () => {
    const cleanups: (() => Promise<void> | void)[] = [];
    after(async () => { for (const c of cleanups.reverse()) await c(); });

    async function setup(extra: Partial<MetricsConfig> = {}) {
      const storage = await freshStorage(backend);
      cleanups.push(() => storage.cleanup());
      const service = await startService(storage, 0, extra);
      const tenant = await newTenant(service.deps.store);
      const spoolDir = tempDir();
      cleanups.push(() => rmSync(spoolDir, { recursive: true, force: true }));
      return { storage, service, token: tenant.token, spoolDir };
    }

    test('reports of this host land and appear in its series, under its agent id', async () => {
      const { service, token, spoolDir } = await setup();
      cleanups.push(() => stopService(service));
      const cap = captureLog();
      const agent = await startAgent({ ...FAST, url: service.url, token, spoolDir, log: cap.log, hostname: 'agent-e2e-host' });
      try {
        await waitFor('three delivered reports', () => cap.find('report delivered').length >= 3);
      } finally {
        await agent.stop();
      }
      const delivered = cap.find('report delivered').map((l) => l.reportTs as number);
      const hosts = await call<string[]>(service.url, 'GET', '/api/v1/hosts', { token });
      assert.deepEqual(hosts.body, [agent.agentId]);
      const series = await call(service.url, 'GET', `/api/v1/host/${encodeURIComponent(agent.agentId)}?from=${delivered[0]}&to=${Date.now()}&points=10000`, { token });
      assert.equal(series.status, 200, series.text);
      assert.deepEqual(series.body.timestamps, delivered);
      for (const name of ['cpu.usage', 'cpu.loadAverage.0', 'memory.percent', 'memory.used']) {
        assert.equal(series.body.metrics[name]?.length, delivered.length, name);
      }
      assert.ok(Object.keys(series.body.metrics).some((n) => /^disk\..+\.percent$/.test(n)), 'at least one filesystem reported');
      assert.ok(series.body.metrics['cpu.usage'].every((v: number) => v >= 0 && v <= 100));
    });

    test('with the service stopped for several intervals, every spooled report is delivered exactly once and in order', async () => {
      const { storage, service, token, spoolDir } = await setup();
      const cap = captureLog();
      const agent = await startAgent({ ...FAST, url: service.url, token, spoolDir, log: cap.log });
      let restarted: Awaited<ReturnType<typeof startService>> | undefined;
      try {
        await waitFor('a first delivery', () => cap.find('report delivered').length >= 1);
        await stopService(service);
        const deliveredBefore = cap.find('report delivered').length;
        await waitFor('five reports spooled while the service is down', () => agent.spool.length >= 5);
        assert.equal(cap.find('report delivered').length, deliveredBefore, 'nothing is delivered while the service is down');
        assert.ok(cap.find('metrics service unavailable, reports stay spooled').length >= 1);
        restarted = await startService(storage, service.port);
        await waitFor('the spool drained and two fresh reports delivered', () => cap.find('report delivered').length >= deliveredBefore + 7 && agent.spool.length === 0);
      } finally {
        await agent.stop();
      }
      const collected = cap.find('report collected').map((l) => l.reportTs as number);
      const delivered = cap.find('report delivered').map((l) => l.reportTs as number);
      // Everything collected was delivered except what stop() left spooled, once each, in collection order.
      assert.deepEqual(delivered, collected.slice(0, delivered.length));
      assert.equal(new Set(delivered).size, delivered.length);
      assert.ok(collected.length - delivered.length <= agent.spool.length, 'only reports still spooled are undelivered');
      assert.ok(cap.find('metrics service reachable again, sending spooled reports').length >= 1);
      const series = await call(restarted.url, 'GET', `/api/v1/host/${encodeURIComponent(agent.agentId)}?from=${collected[0]}&to=${Date.now()}&points=10000`, { token });
      assert.deepEqual(series.body.timestamps, delivered, 'the service holds each report once, none missing');
      await stopService(restarted);
    });

    test('an agent restarted on the same spool sends what the previous run left, first and in order, under the same id', async () => {
      const { storage, service, token, spoolDir } = await setup();
      await stopService(service);
      const first = captureLog();
      const a = await startAgent({ ...FAST, url: service.url, token, spoolDir, log: first.log });
      try {
        await waitFor('three reports spooled', () => a.spool.length >= 3);
      } finally {
        await a.stop();
      }
      const leftover = first.find('report collected').map((l) => l.reportTs as number);
      const restarted = await startService(storage, service.port);
      cleanups.push(() => stopService(restarted));
      const second = captureLog();
      const b = await startAgent({ ...FAST, url: service.url, token, spoolDir, log: second.log });
      try {
        await waitFor('the leftovers and one new report delivered', () => second.find('report delivered').length > leftover.length);
      } finally {
        await b.stop();
      }
      assert.equal(b.agentId, a.agentId);
      assert.deepEqual(second.find('report delivered').slice(0, leftover.length).map((l) => l.reportTs), leftover);
    });

    test('a 401 is logged with the service\'s details and not retried', async () => {
      const { service, spoolDir } = await setup();
      cleanups.push(() => stopService(service));
      const cap = captureLog();
      const agent = await startAgent({ ...FAST, url: service.url, token: 'not-a-real-token', spoolDir, log: cap.log });
      try {
        await waitFor('three refusals', () => cap.find('metrics service refused a report; not retrying it').length >= 3);
      } finally {
        await agent.stop();
      }
      const refused = cap.find('metrics service refused a report; not retrying it');
      assert.ok(refused.every((l) => l.status === 401 && l.error === 'unauthorized' && typeof l.details === 'string' && l.details.length > 0), JSON.stringify(refused[0]));
      const ts = refused.map((l) => l.reportTs);
      assert.equal(new Set(ts).size, ts.length, 'each report is sent once');
      assert.equal(cap.find('metrics service unavailable, reports stay spooled').length, 0, 'a 401 is never treated as retryable');
      assert.equal(agent.spool.counters.rejected, refused.length);
    });

    test('a service started with a secret accepts the agent\'s signature, and refuses a wrong one', async () => {
      const { service, token, spoolDir } = await setup({ secret: 'shared-hmac-secret' });
      cleanups.push(() => stopService(service));
      const good = captureLog();
      const agent = await startAgent({ ...FAST, url: service.url, token, secret: 'shared-hmac-secret', spoolDir, log: good.log });
      try {
        await waitFor('a signed report delivered', () => good.find('report delivered').length >= 1);
      } finally {
        await agent.stop();
      }
      const bad = captureLog();
      const otherSpool = tempDir();
      cleanups.push(() => rmSync(otherSpool, { recursive: true, force: true }));
      const forger = await startAgent({ ...FAST, url: service.url, token, secret: 'wrong-secret', spoolDir: otherSpool, log: bad.log });
      try {
        await waitFor('a refusal', () => bad.find('metrics service refused a report; not retrying it').length >= 1);
      } finally {
        await forger.stop();
      }
      assert.equal(bad.find('metrics service refused a report; not retrying it')[0]!.status, 401);
      assert.equal(bad.find('report delivered').length, 0);
    });
  });
}
