import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { BACKENDS, freshStorage, type TestStorage } from './backends.js';
import { REDIS_UP, TEST_REDIS_URL, deletePrefix, testPrefix } from './redis.js';
import type { Reply } from './http.js';
import { skipUnless } from './missing-tool.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { nodeEntry } from './node-entry.js';

/**
 * A real deployment on loopback: N processes of one service
 * (`src/<service>/cli.ts serve`), one PostgreSQL schema and
 * one Redis prefix shared by all, and HAProxy in front running
 * `deploy/haproxy.cfg` unchanged (addresses come from its environment).
 *
 * HAProxy connects to the instances from 127.0.0.2 and the instances trust
 * only that address as a proxy; a test talking to an instance directly comes
 * from 127.0.0.1, an untrusted peer whose X-Forwarded-For must be ignored.
 */
export const HAPROXY_CONFIG = path.join(PROJECT_ROOT, 'deploy', 'haproxy.cfg');
export const PROXY_SOURCE = '127.0.0.2';
export const METRICS_TOKEN = 'scale-test-metrics-token-0123456789';

function haproxyInstalled(): boolean {
  return spawnSync('haproxy', ['-v'], { stdio: 'ignore' }).status === 0;
}

const haproxyUp = haproxyInstalled();
if (!haproxyUp && process.env['REQUIRE_POSTGRES'] === '1') throw new Error('haproxy is required for the scale tests (.ci/run installs it) but is not installed');

const SCALE_SUITES = 'the scale suites (two instances behind HAProxy)';

/** Whether the topology can run here: PostgreSQL, Redis and HAProxy present; else the skip reason names exactly what is missing. */
export const TOPOLOGY_SKIP = skipUnless([
  ...(haproxyUp ? [] : [{ tool: 'haproxy', skipped: SCALE_SUITES, install: 'apt-get install haproxy' }]),
  ...(REDIS_UP ? [] : [{ tool: 'Redis', skipped: SCALE_SUITES, install: 'apt-get install redis-server, listening on 127.0.0.1:6379' }]),
  ...(BACKENDS.includes('postgres') ? [] : [{ tool: 'PostgreSQL', skipped: SCALE_SUITES, install: 'apt-get install postgresql, trust auth on 127.0.0.1:5432, database test' }]),
]);
export const TOPOLOGY_READY = TOPOLOGY_SKIP === false;

export type ServiceName = 'metrics' | 'sync';

export interface Instance {
  readonly name: string;
  /** Direct address of this instance (bypassing the proxy). */
  readonly url: string;
  readonly process: ChildProcess;
  /** Every line the process wrote to stdout and stderr. */
  readonly logs: string[];
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface Topology {
  /** The load balancer's address: what a client uses. */
  readonly proxyUrl: string;
  readonly instances: Instance[];
  readonly storage: TestStorage;
  readonly redisPrefix: string;
  /** What HAProxy printed (server state changes, alerts). */
  readonly proxyOutput: string[];
  /** Arguments every instance was started with (to start another one, or a CLI command, on the same storage). */
  readonly sharedArgs: string[];
  stop(): Promise<void>;
}

export interface TopologyOptions {
  service: ServiceName;
  /** Extra `serve` arguments for every instance (limits, secrets). */
  args?: string[];
  instances?: number;
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Runs `<service> <args>` (src/<service>/cli.ts) to completion (admin commands).
 * Asynchronous on purpose: a blocked event loop keeps HTTP clients from seeing
 * that HAProxy closed their idle keep-alive connections, and the next request fails.
 */
export async function runCli(service: ServiceName, args: string[], env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...nodeEntry(`src/${service}/cli.ts`), ...args], {
    cwd: PROJECT_ROOT, env: { PATH: process.env['PATH'] ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
  const status = await new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { status, stdout, stderr };
}

/** Starts one instance and resolves once it logs the address it listens on. */
export function startInstance(service: ServiceName, name: string, args: string[]): Promise<Instance> {
  const child = spawn(process.execPath, [...nodeEntry(`src/${service}/cli.ts`), 'serve', ...args], {
    cwd: PROJECT_ROOT,
    // A clean environment: only what the flags say configures the instance.
    env: { PATH: process.env['PATH'] ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise<Instance>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        logs.push(line);
        const m = /listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
        if (m) {
          resolve({
            name,
            url: m[1]!,
            process: child,
            logs,
            exited,
            async kill(signal: NodeJS.Signals = 'SIGTERM') {
              if (child.exitCode === null && child.signalCode === null) child.kill(signal);
              return exited;
            },
          });
        }
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => reject(new Error(`${name} exited (${code}) before listening:\n${logs.join('\n')}`)));
  });
}

export interface Proxy { url: string; output: string[]; stop(): Promise<void> }

/** HAProxy on `deploy/haproxy.cfg` with `backends` (host:port) as the instances of `service`. */
export async function startHaproxy(service: ServiceName, backends: string[]): Promise<Proxy> {
  const bind = await freePort();
  const unused = `127.0.0.1:${await freePort()}`;
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '',
    METRICS_BIND: `127.0.0.1:${service === 'metrics' ? bind : await freePort()}`,
    SYNC_BIND: `127.0.0.1:${service === 'sync' ? bind : await freePort()}`,
    BACKEND_SOURCE: PROXY_SOURCE,
  };
  for (const s of ['metrics', 'sync'] as const) {
    // With a single instance both server lines name it: the same proxy path, one process behind it.
    for (let i = 1; i <= 2; i++) env[`${s.toUpperCase()}_${i}`] = s === service ? backends[(i - 1) % backends.length]! : unused;
  }
  const child = spawn('haproxy', ['-db', '-f', HAPROXY_CONFIG], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  child.stdout.on('data', (c: Buffer) => output.push(c.toString()));
  child.stderr.on('data', (c: Buffer) => output.push(c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${bind}`;
  // The instances already listen, so HAProxy starts with them in rotation: ready once it answers for each.
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`haproxy exited:\n${output.join('')}`);
    const healthy = await Promise.all(backends.map(() => fetch(`${url}/readyz`).then((r) => r.status === 200, () => false)));
    if (healthy.every(Boolean)) break;
    if (Date.now() > deadline) throw new Error(`haproxy did not see the instances healthy:\n${output.join('')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    output,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

export async function startTopology(opts: TopologyOptions): Promise<Topology> {
  const storage = await freshStorage('postgres');
  const redisPrefix = testPrefix();
  const sharedArgs = [
    '--host', '127.0.0.1',
    '--database-url', storage.databaseUrl!,
    '--db-schema', storage.pgSchema,
    '--redis-url', TEST_REDIS_URL,
    '--redis-prefix', redisPrefix,
    '--trust-proxy', PROXY_SOURCE,
    '--metrics-token', METRICS_TOKEN,
    ...(opts.args ?? []),
  ];
  const dirs: string[] = [];
  const instances: Instance[] = [];
  let proxy: Proxy | undefined;
  const stop = async () => {
    await proxy?.stop();
    await Promise.all(instances.map((i) => i.kill('SIGKILL')));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    const redis = new Redis(TEST_REDIS_URL);
    try { await deletePrefix(redis, redisPrefix); } finally { redis.disconnect(); }
    await storage.cleanup();
  };
  try {
    // The first instance runs the migrations alone; the others then start together.
    const count = opts.instances ?? 2;
    const start = (i: number) => {
      const dir = mkdtempSync(path.join(os.tmpdir(), `scale-${opts.service}-${i}-`));
      dirs.push(dir);
      return startInstance(opts.service, `${opts.service}${i}`, [...sharedArgs, '--port', '0', '--data-dir', dir]);
    };
    instances.push(await start(1));
    instances.push(...(await Promise.all(Array.from({ length: count - 1 }, (_, i) => start(i + 2)))));
    proxy = await startHaproxy(opts.service, instances.map((i) => i.url.replace('http://', '')));
    return { proxyUrl: proxy.url, proxyOutput: proxy.output, instances, storage, redisPrefix, sharedArgs, stop };
  } catch (e: unknown) {
    await stop();
    throw e;
  }
}

/**
 * Like `call()` from test/helpers/http.ts, but from a chosen loopback source
 * address (127.0.0.0/8 is all local on Linux): lets a test act as several
 * distinct clients, as HAProxy sees them, or as an untrusted direct peer.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read loosely shaped JSON bodies
export async function callFrom<T = any>(
  source: string,
  baseUrl: string,
  method: string,
  urlPath: string,
  opts: { token?: string; json?: unknown; body?: Buffer | FormData; headers?: Record<string, string> } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
  let body: Buffer | undefined;
  if (opts.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = Buffer.from(JSON.stringify(opts.json));
  } else if (opts.body instanceof FormData) {
    // Let fetch's Request encode the multipart body, then send its bytes ourselves.
    const encoded = new Request('http://encode.invalid/', { method: 'POST', body: opts.body });
    headers['content-type'] = encoded.headers.get('content-type')!;
    body = Buffer.from(await encoded.arrayBuffer());
  } else if (opts.body) {
    body = opts.body;
  }
  if (body) headers['content-length'] = String(body.length);
  const u = new URL(baseUrl + urlPath);
  return new Promise<Reply<T>>((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, localAddress: source, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        const text = raw.toString('utf8');
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        let parsed: unknown = text;
        if ((res.headers['content-type'] ?? '').includes('json') && text) parsed = JSON.parse(text);
        resolve({ status: res.statusCode ?? 0, headers: h, body: parsed as T, text, raw } as Reply<T> & { raw: Buffer });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The value of one Prometheus sample whose labels include `labels`, or undefined. */
export function promSample(body: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of body.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** Scrapes one instance's /metrics with the topology's token. */
export async function scrape(instanceUrl: string): Promise<string> {
  const r = await fetch(`${instanceUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
  return r.text();
}

export interface RawAnswer { status: number; headers: http.IncomingHttpHeaders; body: Buffer }

/**
 * One request with node:http, its body returned as it came (fetch would decompress it out of sight), from the loopback
 * address `from` (as `callFrom`).
 */
export function rawRequest(url: string, method: string, path: string, headers: Record<string, string>, body?: string | Buffer, from = '127.0.0.1'): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, url), { method, headers, localAddress: from }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
