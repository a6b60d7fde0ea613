// Why: concurrent reports of one host, in one service or in two on one database, open one incident and notify once.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { App } from '../../src/core/http/create-app.js';
import type { Alert } from '../../src/metrics/alerts/alert.js';
import type { WebhookPayload } from '../../src/metrics/alerts/webhook-payload.js';
import { buildMetricsApp } from '../../src/metrics/app.js';
import { createMetricsDeps, type MetricsDeps } from '../../src/metrics/deps.js';
import { BACKENDS } from '../helpers/backends.js';
import { call, listen } from '../helpers/http.js';
import { ingest, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';

const cpu: Alert = { name: 'HighCpu', severity: 'critical' };
const N = 8;

for (const backend of BACKENDS) {
  describe(`concurrent reports of one host on ${backend}${backend === 'postgres' ? ', over two instances' : ''}`, () => {
    let h: MetricsHarness;
    let token: string;
    let clock = Date.now();
    const received: WebhookPayload[] = [];
    let hook: Server;
    let dir: string;
    // PostgreSQL: a second service on the same schema takes every other report, as behind a load balancer.
    let second: { deps: MetricsDeps; app: App; url: string } | undefined;
    const urls = () => (second ? [h.url, second.url] : [h.url]);

    before(async () => {
      hook = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => { received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as WebhookPayload); res.writeHead(200).end(); });
      });
      await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
      const addr = hook.address();
      if (!addr || typeof addr === 'string') throw new Error('no address');
      dir = mkdtempSync(path.join(os.tmpdir(), 'fs-routes-'));
      const file = path.join(dir, 'routes.json');
      writeFileSync(file, JSON.stringify({ routes: [{ name: 'pager', url: `http://127.0.0.1:${addr.port}/hook`, repeat_interval: '1h' }] }));
      h = await startMetrics(backend, { alertRoutes: file, now: () => clock });
      token = (await h.newTenant()).token;
      if (backend === 'postgres') {
        const deps = await createMetricsDeps(h.config, { now: () => clock });
        const app = await buildMetricsApp(h.config, deps, { logStream: new Writable({ write(_c, _e, cb) { cb(); } }) });
        second = { deps, app, url: await listen(app) };
      }
    });

    after(async () => {
      if (second) { await second.app.close(); await second.deps.close(); }
      await h.close();
      await new Promise<void>((resolve) => { hook.closeAllConnections(); hook.close(() => resolve()); });
      rmSync(dir, { recursive: true, force: true });
    });

    /** N reports of `agentId` at once, at ts `from`, `from + 1`..., spread over the instances. */
    async function burst(agentId: string, from: number, alerts: Alert[]) {
      const answers = await Promise.all(Array.from({ length: N }, (_, i) =>
        ingest(urls()[i % urls().length]!, token, makeReport({ agentId, ts: from + i, alerts }))));
      for (const a of answers) assert.equal(a.status, 200, a.text);
      return answers.flatMap((a) => a.body.alertResults as unknown[]);
    }

    const incidents = async (host: string) => (await call(h.url, 'GET', `/api/v1/alerts?host=${host}&from=0&to=${clock}`, { token })).body as
      Array<{ lastSeenAt: number; resolvedAt: number | null; routes: Array<{ outcome: string }> }>;

    test('a new alert in concurrent reports opens one incident and is notified once; its end is notified once', async () => {
      const before = received.length;
      const t0 = clock - 60_000;
      assert.deepEqual(await burst('web-1', t0, [cpu]), [{ alert: 'HighCpu', route: 'pager', outcome: 'delivered', status: 200 }], 'one report notified, the others found it claimed');
      assert.equal(received.length, before + 1, 'one firing POST');
      let listed = await incidents('web-1');
      assert.deepEqual(listed.map((a) => [a.lastSeenAt, a.resolvedAt, a.routes.map((r) => r.outcome)]), [[t0 + N - 1, null, ['delivered']]], 'one incident, refreshed by every report');

      assert.deepEqual(await burst('web-1', t0 + 1_000, []), [{ alert: 'HighCpu', route: 'pager', resolved: true, outcome: 'delivered', status: 200 }]);
      assert.equal(received.length, before + 2, 'one resolved POST');
      assert.equal(received.at(-1)!.status, 'resolved');
      listed = await incidents('web-1');
      assert.equal(listed.length, 1);
      assert.ok(listed[0]!.resolvedAt! >= t0 + 1_000);
    });

    test('a repeat that falls due in concurrent reports is sent once', async () => {
      const t0 = clock - 60_000;
      await ingest(h.url, token, makeReport({ agentId: 'web-2', ts: t0, alerts: [cpu] }));
      const before = received.length;
      clock += 2 * 3_600_000;
      assert.deepEqual(await burst('web-2', t0 + 1_000, [cpu]), [{ alert: 'HighCpu', route: 'pager', outcome: 'delivered', status: 200 }]);
      assert.equal(received.length, before + 1);
      assert.equal((await incidents('web-2')).length, 1);
    });
  });
}
