import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { makeReport } from '../helpers/metrics.js';
import { call } from '../helpers/http.js';
import { METRICS_TOKEN, TOPOLOGY_SKIP, promSample, rawRequest, runCli, scrape, startTopology, type Topology } from '../helpers/topology.js';
import { TOKEN_CACHE_MS } from '../../src/metrics/storage/engine-metrics-store.js';

/**
 * Two metrics-service processes on one PostgreSQL schema behind HAProxy
 * (deploy/haproxy.cfg): whatever instance a request lands on, it sees the
 * same tenants, tokens and samples.
 */
describe('metrics service: two instances behind HAProxy', { skip: TOPOLOGY_SKIP }, () => {
  let topo: Topology;
  const secrets: string[] = [METRICS_TOKEN];

  async function createToken(tenant: string): Promise<{ id: string; token: string }> {
    const r = await runCli('metrics', ['token', 'create', tenant, ...topo.sharedArgs]);
    assert.equal(r.status, 0, r.stderr);
    const token = /token:\s+(\S+)/.exec(r.stdout)![1]!;
    secrets.push(token);
    return { id: /token id:\s+(\S+)/.exec(r.stdout)![1]!, token };
  }

  before(async () => { topo = await startTopology({ service: 'metrics' }); });
  after(async () => { await topo?.stop(); });

  test('a report ingested through one instance reads back through the other', async () => {
    const { token } = await createToken('acme');
    const [a, b] = topo.instances;
    const ts = Date.now() - 1000;
    const r = await call(a!.url, 'POST', '/api/v1/ingest', { token, json: makeReport({ agentId: 'agent-x', hostname: 'db-1', ts }) });
    assert.equal(r.status, 200, r.text);
    const hosts = await call(b!.url, 'GET', '/api/v1/hosts', { token });
    assert.equal(hosts.status, 200);
    assert.ok(JSON.stringify(hosts.body).includes('agent-x'), hosts.text);
    const series = await call(b!.url, 'GET', `/api/v1/host/agent-x?from=${ts - 1}&to=${ts + 1}`, { token });
    assert.equal(series.status, 200, series.text);
    assert.ok(series.text.includes('cpu.usage'), series.text);
  });

  test('through the proxy, series come gzipped to a client that accepts it, the same JSON; dashboard pages do not', async () => {
    const { token } = await createToken('zipped');
    const t0 = Date.now() - 3_600_000;
    for (let i = 0; i < 60; i++) {
      const r = await rawRequest(topo.proxyUrl, 'POST', '/api/v1/ingest', { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'accept-encoding': 'gzip' },
        JSON.stringify(makeReport({ agentId: 'agent-z', hostname: 'zip-1', ts: t0 + i * 60_000 })));
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(r.headers['content-encoding'], undefined, 'an ingest answer is sent as it is');
    }
    const path = `/api/v1/host/agent-z?from=${t0 - 1}&to=${t0 + 3_600_000}`;
    const plain = await rawRequest(topo.proxyUrl, 'GET', path, { authorization: `Bearer ${token}` });
    assert.equal(plain.status, 200);
    assert.equal(plain.headers['content-encoding'], undefined);
    const zipped = await rawRequest(topo.proxyUrl, 'GET', path, { authorization: `Bearer ${token}`, 'accept-encoding': 'gzip' });
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.deepEqual(JSON.parse(gunzipSync(zipped.body).toString()), JSON.parse(plain.body.toString()));
    const page = await rawRequest(topo.proxyUrl, 'GET', '/', { authorization: `Bearer ${token}`, 'accept-encoding': 'gzip' });
    assert.equal(page.status, 200);
    assert.equal(page.headers['content-encoding'], undefined, 'HTML is not compressed');
  });

  test('reports ingested through the proxy, spread over both instances, are all counted once', async () => {
    const { token } = await createToken('fleet');
    const base = Date.now() - 60_000;
    const replies = await Promise.all(Array.from({ length: 40 }, (_, i) =>
      call(topo.proxyUrl, 'POST', '/api/v1/ingest', { token, json: makeReport({ agentId: `agent-${i % 4}`, hostname: `h-${i % 4}`, ts: base + i * 10 }) })));
    assert.deepEqual(replies.map((r) => r.status), Array(40).fill(200));
    // Re-sent reports are duplicates whichever instance sees them.
    const again = await Promise.all(replies.slice(0, 8).map((_, i) =>
      call(topo.proxyUrl, 'POST', '/api/v1/ingest', { token, json: makeReport({ agentId: `agent-${i % 4}`, hostname: `h-${i % 4}`, ts: base + i * 10 }) })));
    assert.ok(again.every((r) => r.status === 200 && r.body.duplicate === true));
    const stored = await Promise.all(topo.instances.map(async (i) => promSample(await scrape(i.url), 'metrics_ingested_reports_total', { result: 'stored' }) ?? 0));
    assert.ok(stored.every((n) => n > 0), `both instances ingested: ${stored}`);
    const hosts = await call(topo.proxyUrl, 'GET', '/api/v1/hosts', { token });
    assert.equal(hosts.body.hosts?.length ?? hosts.body.length, 4, hosts.text);
  });

  test('a token revoked with the CLI is refused by every instance within the token cache time', async () => {
    const { id, token } = await createToken('revokee');
    for (const i of topo.instances) assert.equal((await call(i.url, 'GET', '/api/v1/hosts', { token })).status, 200);
    const r = await runCli('metrics', ['token', 'revoke', id, ...topo.sharedArgs]);
    assert.equal(r.status, 0, r.stderr);
    const deadline = Date.now() + TOKEN_CACHE_MS + 1_000;
    for (const i of topo.instances) {
      let status = 200;
      while (status !== 401 && Date.now() < deadline) {
        status = (await call(i.url, 'GET', '/api/v1/hosts', { token })).status;
        if (status !== 401) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      assert.equal(status, 401, i.url);
    }
  });

  test('/healthz and /readyz answer through the proxy without credentials; /metrics needs the token', async () => {
    assert.deepEqual((await call(topo.proxyUrl, 'GET', '/healthz')).body, { status: 'ok' });
    assert.deepEqual((await call(topo.proxyUrl, 'GET', '/readyz')).body, { status: 'ready' });
    assert.equal((await call(topo.proxyUrl, 'GET', '/metrics')).status, 401);
    const m = await call(topo.proxyUrl, 'GET', '/metrics', { token: METRICS_TOKEN });
    assert.equal(m.status, 200);
    assert.ok((promSample(m.text, 'http_requests_total', { route: '/api/v1/ingest', status: '200' }) ?? 0) > 0);
    assert.ok(promSample(m.text, 'metrics_ingested_samples_total') !== undefined);
  });

  test('instance logs are JSON with a request id on every request line and never a token', async () => {
    const lines = topo.instances.flatMap((i) => i.logs).filter((l) => l.startsWith('{'));
    assert.ok(lines.length > 0);
    for (const line of lines) {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if ('req' in entry || 'res' in entry) assert.ok(typeof entry['reqId'] === 'string', line);
      for (const s of secrets) assert.ok(!line.includes(s), `a secret reached the log: ${line}`);
    }
  });
});
