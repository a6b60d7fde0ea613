// Why: a bulk body against a receiver that never answers must cost about one alert timeout, not one per line.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Alert } from '../../src/metrics/alerts/alert.js';
import { BACKENDS } from '../helpers/backends.js';
import { ingestBulk, makeReport, startMetrics, type MetricsHarness } from '../helpers/metrics.js';

const cpu: Alert = { name: 'HighCpu', severity: 'critical' };
const TIMEOUT_MS = 300;
const LINES = 20;

for (const backend of BACKENDS) {
  describe(`bulk alert routing against a dead receiver on ${backend}`, () => {
    let h: MetricsHarness;
    let token: string;
    let dir: string;
    let hang: Server;
    let ok: Server;
    let hangCalls = 0;
    let okCalls = 0;
    const pending: ServerResponse[] = [];

    const serve = async (server: Server) => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const addr = server.address();
      if (!addr || typeof addr === 'string') throw new Error('no address');
      return `http://127.0.0.1:${addr.port}/hook`;
    };

    before(async () => {
      hang = createServer((req, res) => { hangCalls++; req.resume(); pending.push(res); });
      ok = createServer((req, res) => { okCalls++; req.resume(); req.on('end', () => res.writeHead(200).end()); });
      dir = mkdtempSync(path.join(os.tmpdir(), 'fs-routes-'));
      const file = path.join(dir, 'routes.json');
      writeFileSync(file, JSON.stringify({ routes: [{ name: 'dead', url: await serve(hang) }, { name: 'alive', url: await serve(ok) }] }));
      h = await startMetrics(backend, { alertRoutes: file, alertTimeoutMs: TIMEOUT_MS });
      token = (await h.newTenant()).token;
    });

    after(async () => {
      await h.close();
      for (const server of [hang, ok]) await new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
      rmSync(dir, { recursive: true, force: true });
    });

    test('a route that failed is not called again for the rest of the body; every line says what happened to it', async () => {
      const t0 = Date.now() - 3_600_000;
      const lines = Array.from({ length: LINES }, (_, i) => makeReport({ agentId: 'web-1', ts: t0 + i * 10_000, alerts: [cpu] }));
      const started = Date.now();
      const r = await ingestBulk(h.url, token, lines);
      const took = Date.now() - started;
      assert.equal(r.status, 202, r.text);
      // One timeout per line would be 6 s; the bound leaves room for a loaded machine's 20 commits.
      assert.ok(took < 2_000, `${LINES} lines took ${took} ms: about one timeout, not one per line`);
      assert.equal(hangCalls, 1, 'the dead receiver was called once');
      assert.equal(okCalls, 1, 'the live one was notified once (then de-duplicated)');
      const results = r.body.results as Array<{ alertResults: unknown[] }>;
      assert.deepEqual(results[0]!.alertResults, [
        { alert: 'HighCpu', route: 'dead', outcome: 'failed', error: `no answer within ${TIMEOUT_MS} ms` },
        { alert: 'HighCpu', route: 'alive', outcome: 'delivered', status: 200 },
      ]);
      for (const line of results.slice(1)) {
        assert.deepEqual(line.alertResults, [
          { alert: 'HighCpu', route: 'dead', outcome: 'failed', error: `not sent: this route failed earlier in the request (no answer within ${TIMEOUT_MS} ms)` },
        ]);
      }

      // Still due: the next request calls the route again.
      const next = await ingestBulk(h.url, token, [makeReport({ agentId: 'web-1', ts: t0 + LINES * 10_000, alerts: [cpu] })]);
      assert.deepEqual(next.body.results[0].alertResults, [{ alert: 'HighCpu', route: 'dead', outcome: 'failed', error: `no answer within ${TIMEOUT_MS} ms` }]);
      assert.equal(hangCalls, 2);
    });
  });
}
