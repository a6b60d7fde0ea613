// Why: an instance that dies mid-request may already have applied it; deploy/haproxy.cfg sends such a request to
// another instance only where the services recognise it sent twice. Instances here are stand-ins that count what
// reaches them and close the connection without an answer, as a killed process does.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TOPOLOGY_SKIP, startHaproxy, type Proxy, type ServiceName } from '../helpers/topology.js';

/** Two instances that answer the health probe and drop every other request after reading it. */
async function dyingInstances(): Promise<{ addresses: string[]; seen: Map<string, number>; close(): Promise<void> }> {
  const seen = new Map<string, number>();
  const servers = await Promise.all([0, 1].map(() => new Promise<http.Server>((resolve) => {
    const server = http.createServer((req, res) => {
      if (req.url === '/readyz') { res.end('{"status":"ready"}'); return; }
      req.resume();
      req.on('end', () => {
        const key = `${req.method} ${req.url}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
        req.socket.destroy();
      });
    });
    server.listen(0, '127.0.0.1', () => resolve(server));
  })));
  return {
    addresses: servers.map((s) => `127.0.0.1:${(s.address() as AddressInfo).port}`),
    seen,
    close: () => Promise.all(servers.map((s) => new Promise<void>((r) => { s.closeAllConnections(); s.close(() => r()); })))
      .then(() => undefined),
  };
}

for (const service of ['sync', 'metrics'] as const satisfies readonly ServiceName[]) {
  describe(`HAProxy retries after an instance died mid-request (${service})`, { skip: TOPOLOGY_SKIP }, () => {
    let instances: Awaited<ReturnType<typeof dyingInstances>>;
    let proxy: Proxy;
    before(async () => {
      instances = await dyingInstances();
      proxy = await startHaproxy(service, instances.addresses);
    });
    after(async () => {
      await proxy.stop();
      await instances.close();
    });

    // A new connection per request (no pooled one HAProxy may have closed meanwhile).
    const send = (method: string, path: string) => new Promise<{ status: number | undefined; reached: number }>((resolve, reject) => {
      const req = http.request(`${proxy.url}${path}`, { method, agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, reached: instances.seen.get(`${method} ${path}`) ?? 0 }));
      });
      req.on('error', reject);
      req.end(method === 'GET' ? undefined : '{}');
    });

    const once = service === 'sync'
      ? [['POST', '/api/auth/refresh'], ['POST', '/api/auth/register'], ['POST', '/api/business'], ['DELETE', '/api/business/x/members/y']]
      : [['POST', '/signin'], ['POST', '/signout']];
    const again = service === 'sync'
      ? [['GET', '/api/business'], ['POST', '/api/sync/push'], ['POST', '/api/sync/pull']]
      : [['GET', '/api/v1/hosts'], ['POST', '/api/v1/ingest'], ['POST', '/api/v1/ingest/bulk']];

    test('a write the services cannot recognise sent twice reaches one instance once; the client gets the 502', async () => {
      for (const [method, path] of once) assert.deepEqual(await send(method!, path!), { status: 502, reached: 1 }, `${method} ${path}`);
    });

    test('reads, and writes the services recognise sent twice, are tried on the other instances', async () => {
      for (const [method, path] of again) {
        const r = await send(method!, path!);
        assert.equal(r.status, 502, `${method} ${path}`);
        assert.ok(r.reached >= 2, `${method} ${path} reached ${r.reached} time(s)`);
      }
    });
  });
}
