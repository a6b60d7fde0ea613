// `metrics-service serve` re-executes itself with the service's V8 heap flags: same process, the operator's own
// choice of a flag kept, and not when an IPC channel (the npm start launcher's lifeline) would be lost by the exec.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVICE_V8_FLAGS } from '../../src/core/cli/heap-flags.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const unsupported = process.platform !== 'linux' ? 'reads the process command line from /proc (Linux)'
  : typeof process.execve !== 'function' ? 'process.execve needs Node.js 22.15 or later' : false;

/** Starts serve with `nodeArgs` before the script; resolves with the command line of the process that listens. */
async function serveCommandLine(nodeArgs: string[], ipc: boolean): Promise<string[]> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'heap-flags-'));
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/metrics/cli.ts', 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'info'], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '' },
    stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc' as const] : [])],
  });
  try {
    let out = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => { out += chunk.toString(); if (/Server listening at/.test(out)) resolve(); });
      child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
    });
    // The pid spawned is the pid that listens: the exec replaced the program, not the process.
    return readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } finally {
    child.kill('SIGKILL');
    await once(child, 'exit').catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('serve heap flags', { skip: unsupported }, () => {
  test('serve runs with the service heap flags, in the process that was started', async () => {
    const argv = await serveCommandLine([], false);
    for (const flag of SERVICE_V8_FLAGS) assert.ok(argv.includes(flag), `${flag} in ${argv.join(' ')}`);
    assert.ok(argv.includes('serve') && argv.includes('--port'), 'the arguments are kept');
  });

  test('an operator\'s own value of a flag is kept, and only the missing flag is added', async () => {
    const argv = await serveCommandLine(['--max-semi-space-size=8'], false);
    assert.ok(argv.includes('--max-semi-space-size=8'));
    assert.ok(!argv.includes('--max-semi-space-size=4'));
    assert.ok(argv.includes('--heap-growing-percent=50'));
  });

  test('a process with an IPC channel is not re-executed (its launcher passes the flags)', async () => {
    const argv = await serveCommandLine([], true);
    for (const flag of SERVICE_V8_FLAGS) assert.ok(!argv.includes(flag), `${flag} not added: ${argv.join(' ')}`);
  });
});
