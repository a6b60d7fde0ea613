// `metrics-service serve` re-executes itself with the service's V8 heap flags: same process, the operator's own
// choice of a flag kept, and not when an IPC channel (the npm start launcher's lifeline) would be lost by the exec.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SERVICE_ENV, SERVICE_V8_FLAGS } from '../../src/core/cli/heap-flags.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { nodeEntry } from '../helpers/node-entry.js';

const unsupported = process.platform !== 'linux' ? 'reads the process command line from /proc (Linux)'
  : typeof process.execve !== 'function' ? 'process.execve needs Node.js 22.15 or later' : false;

/** Starts serve with `nodeArgs` before the script; resolves with the command line and environment of the process that listens. */
async function serveProcess(nodeArgs: string[], ipc: boolean, env: Record<string, string> = {}): Promise<{ argv: string[]; env: string[] }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'heap-flags-'));
  const child = spawn(process.execPath, [...nodeArgs, ...nodeEntry('src/metrics/cli.ts'), 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'info'], {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env['PATH'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc' as const] : [])],
  });
  try {
    let out = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => { out += chunk.toString(); if (/Server listening at/.test(out)) resolve(); });
      child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
    });
    // The pid spawned is the pid that listens: the exec replaced the program, not the process.
    const read = (file: string) => readFileSync(`/proc/${child.pid}/${file}`, 'utf8').split('\0').filter(Boolean);
    return { argv: read('cmdline'), env: read('environ') };
  } finally {
    child.kill('SIGKILL');
    await once(child, 'exit').catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('serve heap flags', { skip: unsupported }, () => {
  test('serve runs with the service heap flags and malloc arenas, in the process that was started', async () => {
    const { argv, env } = await serveProcess([], false);
    for (const flag of SERVICE_V8_FLAGS) assert.ok(argv.includes(flag), `${flag} in ${argv.join(' ')}`);
    assert.ok(argv.includes('serve') && argv.includes('--port'), 'the arguments are kept');
    for (const [k, v] of Object.entries(SERVICE_ENV)) assert.ok(env.includes(`${k}=${v}`), `${k}=${v} in the environment`);
    assert.ok(env.some((e) => e.startsWith('PATH=')), 'the rest of the environment is kept');
  });

  test('an operator\'s own MALLOC_ARENA_MAX is kept; with every flag given, a missing variable alone re-executes', async () => {
    const own = await serveProcess([], false, { MALLOC_ARENA_MAX: '4' });
    assert.ok(own.env.includes('MALLOC_ARENA_MAX=4') && !own.env.includes('MALLOC_ARENA_MAX=1'));
    const flagsGiven = await serveProcess([...SERVICE_V8_FLAGS], false);
    assert.ok(flagsGiven.env.includes('MALLOC_ARENA_MAX=1'), flagsGiven.env.join(' '));
  });

  test('an operator\'s own value of a flag is kept, and only the missing flag is added', async () => {
    const { argv } = await serveProcess(['--max-semi-space-size=8'], false);
    assert.ok(argv.includes('--max-semi-space-size=8'));
    assert.ok(!argv.includes('--max-semi-space-size=4'));
    assert.ok(argv.includes('--heap-growing-percent=30'));
  });

  test('a process with an IPC channel is not re-executed (its launcher passes the flags)', async () => {
    const { argv, env } = await serveProcess([], true);
    for (const flag of SERVICE_V8_FLAGS) assert.ok(!argv.includes(flag), `${flag} not added: ${argv.join(' ')}`);
    assert.ok(!env.some((e) => e.startsWith('MALLOC_ARENA_MAX=')), 'nor the environment');
  });
});
