import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { agentLaunch } from '../../bench/agent-unit.js';
import { startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { skipUnless } from '../helpers/missing-tool.js';
import { tempDir } from './agent-harness.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';

const dirs: string[] = [];
let m: MetricsHarness | undefined;
after(async () => {
  await m?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Builds the bundle with scripts/build-agent.mjs itself into a scratch directory, so the test never races a developer's build. */
function buildBundle(): string {
  const out = tempDir('agent-bundle-');
  dirs.push(out);
  const bundle = path.join(out, 'host-agent.cjs');
  execFileSync(process.execPath, [path.join(PROJECT_ROOT, 'scripts/build-agent.mjs'), '--outfile', bundle], { cwd: PROJECT_ROOT, stdio: ['ignore', 'ignore', 'pipe'], execArgv: [] } as never);
  return bundle;
}

/** Runs `host-agent.cjs --once` from `cwd` as the systemd unit starts it (its node flags and environment), nothing else on the environment but `env`. */
async function runOnce(cwd: string, args: string[], env: Record<string, string> = {}, nodeFlags: string[] = []) {
  const launch = agentLaunch();
  const child = spawn(process.execPath, [...launch.nodeFlags, ...nodeFlags, 'host-agent.cjs', '--once', ...args], {
    cwd, env: { PATH: process.env['PATH'] ?? '', HOST_AGENT_LOG_LEVEL: 'warn', ...launch.env, ...env },
  });
  const r = { stdout: '', stderr: '', status: null as number | null };
  child.stdout.on('data', (c: Buffer) => { r.stdout += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { r.stderr += c.toString(); });
  [r.status] = await once(child, 'exit') as [number | null];
  return r;
}

/** A directory holding only the bundle and a machine id: what a monitored host has. */
function bareHost(bundle: string): { dir: string; machineId: string } {
  const dir = tempDir('agent-bare-');
  dirs.push(dir);
  copyFileSync(bundle, path.join(dir, 'host-agent.cjs'));
  const machineId = path.join(dir, 'machine-id');
  writeFileSync(machineId, 'aaaabbbbccccddddeeeeffff00001111\n');
  return { dir, machineId };
}

let built: string | undefined;
const bundleOnce = () => (built ??= buildBundle());

test('the bundled agent is one file that needs no node_modules: --once from a bare directory, as the unit starts it, delivers to a real service', async () => {
  const bundle = bundleOnce();
  const text = readFileSync(bundle, 'utf8');
  const required = new Set([...text.matchAll(/require\("([^"]+)"\)|getBuiltinModule\("([^"]+)"\)/g)].map((x) => (x[1] ?? x[2])!));
  assert.ok([...required].every((i) => i.startsWith('node:')), `only Node built-ins: ${[...required].join(', ')}`);
  assert.doesNotMatch(text, /\bimport\(|^import /m, 'CommonJS throughout: no ESM loader at run time');
  assert.ok(statSync(bundle).size < 512 * 1024, 'small');
  // The service's schema library stays with the service: the agent shares only the flattening and text rules.
  assert.doesNotMatch(text, /node_modules\/typebox\//, 'TypeBox is not bundled');
  const host = bareHost(bundle);
  m = await startMetrics('sqlite');
  const t = await m.newTenant();
  // Which built-in modules the agent loaded, written when it exits: what it does not load, it does not keep in memory.
  const loaded = path.join(host.dir, 'modules.txt');
  writeFileSync(path.join(host.dir, 'record-modules.cjs'), `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(loaded)}, process.moduleLoadList.join('\\n')));`);
  // Asynchronously: the service answering it runs in this process.
  const r = await runOnce(host.dir, ['--url', m.url, '--token', t.token, '--spool-dir', path.join(host.dir, 'state'), '--machine-id-file', host.machineId], {}, ['--require', './record-modules.cjs']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^host-agent: delivered 1 report to /);
  const modules = readFileSync(loaded, 'utf8').split('\n');
  assert.ok(modules.includes('NativeModule http') && modules.includes('NativeModule zlib'), 'sanity: the list is the agent\'s');
  // No TLS for an http URL, no child_process without watched units, no ESM loader, and none of undici (which the
  // ESM view of node:http would load, WebAssembly HTTP parser included).
  for (const unused of ['NativeModule https', 'NativeModule tls', 'NativeModule child_process', 'NativeModule internal/modules/esm/module_job', 'NativeModule internal/deps/undici/undici']) {
    assert.ok(!modules.includes(unused), `${unused} loaded`);
  }
});

test('an https URL is delivered over TLS by the bundle (TLS is loaded only for it)', { skip: skipUnless(spawnSync('openssl', ['version']).error ? [{ tool: 'openssl', skipped: 'the host agent\'s https delivery test', install: 'apt-get install openssl' }] : []) }, async () => {
  const host = bareHost(bundleOnce());
  const key = path.join(host.dir, 'key.pem');
  const cert = path.join(host.dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const received: string[] = [];
  const server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const reports = gunzipSync(Buffer.concat(chunks)).toString('utf8').split('\n').filter(Boolean);
      received.push(...reports);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: reports.map((_, i) => ({ line: i + 1, status: 'stored' })) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // The certificate is trusted the way an operator would trust a private CA.
    const r = await runOnce(host.dir, ['--url', url, '--token', 't', '--spool-dir', path.join(host.dir, 'state'), '--machine-id-file', host.machineId], { NODE_EXTRA_CA_CERTS: cert });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(received.length, 1);
    assert.equal((JSON.parse(received[0]!) as { platform: string }).platform, 'linux');
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

/** A scratch install: a bundle to install, a `node` of a supported line first on PATH (whatever runs the test), a root. */
function installScratch(prefix: string): { dest: string; bundle: string; bin: string; root: string } {
  const dest = tempDir(prefix);
  dirs.push(dest);
  const bundle = path.join(dest, 'host-agent.cjs');
  writeFileSync(bundle, '// bundle\n');
  const bin = path.join(dest, 'bin');
  mkdirSync(bin);
  writeFileSync(path.join(bin, 'node'), '#!/bin/sh\necho 22\n', { mode: 0o755 });
  return { dest, bundle, bin, root: path.join(dest, 'root') };
}

test('install-agent.sh installs the bundle, the unit and a private env file (DESTDIR, no systemd)', () => {
  const { dest, bundle, bin, root } = installScratch('agent-install-');
  mkdirSync(path.join(root, 'usr/local/lib/host-agent'), { recursive: true });
  writeFileSync(path.join(root, 'usr/local/lib/host-agent/host-agent.mjs'), '// the ES module bundle of an earlier install\n');
  const r = spawnSync('sh', [path.join(PROJECT_ROOT, 'scripts/install-agent.sh'), bundle], { encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env['PATH']}`, DESTDIR: path.join(dest, 'root') } });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(readdirSync(path.join(root, 'usr/local/lib/host-agent')), ['host-agent.cjs'], 'an upgrade leaves no stale bundle');
  assert.equal(readFileSync(path.join(root, 'usr/local/lib/host-agent/host-agent.cjs'), 'utf8'), '// bundle\n');
  const unit = readFileSync(path.join(root, 'etc/systemd/system/host-agent.service'), 'utf8');
  // The unit runs the node the script checked (the first on PATH), not whatever /usr/bin/node is.
  assert.equal(unit, readFileSync(path.join(PROJECT_ROOT, 'deploy/host-agent.service'), 'utf8').replace('ExecStart=/usr/bin/node ', `ExecStart=${path.join(bin, 'node')} `));
  // The memory flags the benchmark measured are the ones installed: node flags before the installed bundle, malloc tuning in Environment=.
  const launch = agentLaunch(unit);
  assert.match(unit, /ExecStart=\S+\/node (--\S+ )+\/usr\/local\/lib\/host-agent\/host-agent\.cjs /);
  assert.ok(launch.nodeFlags.includes('--jitless'), launch.nodeFlags.join(' '));
  assert.equal(launch.env['MALLOC_ARENA_MAX'], '1');
  assert.equal(statSync(path.join(root, 'etc/host-agent/env')).mode & 0o777, 0o600);
  // The agent runs as a DynamicUser: its configuration must be readable by it, whatever umask the script runs with.
  assert.equal(statSync(path.join(root, 'etc/host-agent/config.json')).mode & 0o777, 0o644);
});

test('install-agent.sh enables the unit but starts it only once the env file has a token; a private config of an earlier install is made readable', () => {
  const { dest, bundle, bin, root } = installScratch('agent-install-systemd-');
  const calls = path.join(dest, 'systemctl.log');
  writeFileSync(path.join(bin, 'fake-systemctl'), `#!/bin/sh\necho "$*" >> ${calls}\n`, { mode: 0o755 });
  mkdirSync(path.join(root, 'etc/host-agent'), { recursive: true });
  writeFileSync(path.join(root, 'etc/host-agent/config.json'), '{ "services": [], "alerts": [] }\n', { mode: 0o600 });
  const install = () => spawnSync('sh', [path.join(PROJECT_ROOT, 'scripts/install-agent.sh'), bundle], {
    encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env['PATH']}`, DESTDIR: root, SYSTEMCTL: path.join(bin, 'fake-systemctl') },
  });
  let r = install();
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(readFileSync(calls, 'utf8').trim().split('\n'), ['daemon-reload', 'enable host-agent.service'], 'no token yet: not started');
  assert.match(r.stdout, /not started: set HOST_AGENT_URL and HOST_AGENT_TOKEN/);
  assert.equal(statSync(path.join(root, 'etc/host-agent/config.json')).mode & 0o777, 0o644);
  writeFileSync(path.join(root, 'etc/host-agent/env'), 'HOST_AGENT_URL=https://metrics.example.com\nHOST_AGENT_TOKEN=mtk_x\n', { mode: 0o600 });
  writeFileSync(calls, '');
  r = install();
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(readFileSync(calls, 'utf8').trim().split('\n'), ['daemon-reload', 'enable host-agent.service', 'restart host-agent.service'], 'an upgrade with a token restarts it');
});
