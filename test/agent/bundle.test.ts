import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startMetrics, type MetricsHarness } from '../helpers/metrics.js';
import { tempDir } from './agent-harness.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const dirs: string[] = [];
let m: MetricsHarness | undefined;
after(async () => {
  await m?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Builds the bundle into a scratch copy of dist/ so the test never races a developer's build. */
function buildBundle(): string {
  const out = tempDir('agent-bundle-');
  dirs.push(out);
  execFileSync(process.execPath, ['-e', `
    const { build } = await import('esbuild');
    await build({ entryPoints: [${JSON.stringify(path.join(ROOT, 'src/agent/cli.ts'))}], outfile: ${JSON.stringify(path.join(out, 'host-agent.mjs'))},
      bundle: true, platform: 'node', format: 'esm', target: 'node22', logLevel: 'error' });
  `], { cwd: ROOT, input: '', stdio: ['pipe', 'inherit', 'inherit'], env: { ...process.env }, execArgv: [] } as never);
  return path.join(out, 'host-agent.mjs');
}

test('the bundled agent is one file that needs no node_modules: --once from a bare directory delivers to a real service', async () => {
  // Same esbuild settings as scripts/build-agent.mjs (checked below), so the file tested is the file shipped.
  assert.match(readFileSync(path.join(ROOT, 'scripts/build-agent.mjs'), 'utf8'), /bundle: true,\s+platform: 'node',\s+format: 'esm',\s+target: 'node22'/);
  const bundle = buildBundle();
  const text = readFileSync(bundle, 'utf8');
  const imports = new Set([...text.matchAll(/from "([^"]+)"/g)].map((x) => x[1]!));
  assert.ok([...imports].every((i) => i.startsWith('node:')), `only Node built-ins: ${[...imports].join(', ')}`);
  assert.ok(statSync(bundle).size < 512 * 1024, 'small');
  const bare = tempDir('agent-bare-');
  dirs.push(bare);
  copyFileSync(bundle, path.join(bare, 'host-agent.mjs'));
  const machineId = path.join(bare, 'machine-id');
  writeFileSync(machineId, 'aaaabbbbccccddddeeeeffff00001111\n');
  m = await startMetrics('sqlite');
  const t = await m.newTenant();
  // Asynchronously: the service answering it runs in this process.
  const child = spawn(process.execPath, ['host-agent.mjs', '--once', '--url', m.url, '--token', t.token, '--spool-dir', path.join(bare, 'state'), '--machine-id-file', machineId], {
    cwd: bare, env: { PATH: process.env['PATH'] ?? '', HOST_AGENT_LOG_LEVEL: 'warn' },
  });
  const r = { stdout: '', stderr: '', status: null as number | null };
  child.stdout.on('data', (c: Buffer) => { r.stdout += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { r.stderr += c.toString(); });
  [r.status] = await once(child, 'exit') as [number | null];
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^host-agent: delivered 1 report to /);
});

test('install-agent.sh installs the bundle, the unit and a private env file (DESTDIR, no systemd)', () => {
  const dest = tempDir('agent-install-');
  dirs.push(dest);
  const bundle = path.join(dest, 'host-agent.mjs');
  writeFileSync(bundle, '// bundle\n');
  // A `node` of a supported line first on PATH, whatever runs this test.
  const bin = path.join(dest, 'bin');
  mkdirSync(bin);
  writeFileSync(path.join(bin, 'node'), '#!/bin/sh\necho 22\n', { mode: 0o755 });
  const r = spawnSync('sh', [path.join(ROOT, 'scripts/install-agent.sh'), bundle], { encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env['PATH']}`, DESTDIR: path.join(dest, 'root') } });
  assert.equal(r.status, 0, r.stderr);
  const root = path.join(dest, 'root');
  assert.equal(readFileSync(path.join(root, 'usr/local/lib/host-agent/host-agent.mjs'), 'utf8'), '// bundle\n');
  assert.match(readFileSync(path.join(root, 'etc/systemd/system/host-agent.service'), 'utf8'), /ExecStart=\/usr\/bin\/node \/usr\/local\/lib\/host-agent\/host-agent\.mjs/);
  assert.equal(statSync(path.join(root, 'etc/host-agent/env')).mode & 0o777, 0o600);
});
