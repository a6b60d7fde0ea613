// Why: a full disk is tested on a real one: a small tmpfs mounted in a mount namespace of the child's own (`unshare -rm`),
// so no test needs root on the host or leaves a mount behind.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/core/paths.js';
import { skipUnless } from './missing-tool.js';

const probeDir = mkdtempSync(path.join(os.tmpdir(), 'tmpfs-probe-'));
const probe = spawnSync('unshare', ['-rm', 'sh', '-c', 'mount -t tmpfs -o size=64k tmpfs "$1"', 'sh', probeDir], { encoding: 'utf8' });
rmSync(probeDir, { recursive: true, force: true });

/** The skip reason for tests that need it (throws under CI when it is missing). */
export function tmpfsSkip(what: string): string | false {
  return skipUnless(probe.status === 0 ? [] : [{
    tool: 'unshare -rm with tmpfs mounts', skipped: what,
    install: `util-linux's unshare and unprivileged user namespaces (${(probe.stderr || String(probe.error)).trim()})`,
  }]);
}

const quote = (a: string) => `'${a.replaceAll("'", "'\\''")}'`;

/**
 * Runs `commands` (each an argv; the last one exec'd, so it keeps the child's pid) in a namespace where `dir` is a tmpfs
 * of `size` (`512k`) holding a file `filler` of `fillerBytes`, which is deleted to free space. That namespace's `dir`
 * is `/proc/<pid>/root<dir>` from here.
 */
export function spawnOnTmpfs(dir: string, size: string, fillerBytes: number, commands: string[][], env: Record<string, string> = {}): ChildProcess {
  const lines = commands.map((argv, i) => `${i === commands.length - 1 ? 'exec ' : ''}${argv.map(quote).join(' ')}`);
  const sh = [`set -e`, `mount -t tmpfs -o size=${size} tmpfs ${quote(dir)}`, `head -c ${fillerBytes} /dev/zero > ${quote(`${dir}/filler`)}`, ...lines].join('\n');
  return spawn('unshare', ['-rm', 'sh', '-c', sh], { cwd: PROJECT_ROOT, env: { PATH: process.env['PATH'] ?? '', ...env } });
}
