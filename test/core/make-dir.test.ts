import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { makeDir } from '../../src/core/make-dir.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';

function scratch(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'make-dir-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('makeDir creates the missing parents with the mode given and leaves what exists as it is', (t) => {
  const root = scratch(t);
  mkdirSync(path.join(root, 'kept'), { mode: 0o755 });
  const target = path.join(root, 'kept', 'a', 'b');
  makeDir(target, 0o700);
  assert.equal(statSync(path.join(root, 'kept')).mode & 0o777, 0o755);
  for (const d of [path.join(root, 'kept', 'a'), target]) assert.equal(statSync(d).mode & 0o777, 0o700, d);
  makeDir(target, 0o700);
  makeDir(path.relative(process.cwd(), target));
  assert.ok(statSync(target).isDirectory());
});

test('makeDir refuses a file or a dangling link in the path, and creates nothing past it', (t) => {
  const root = scratch(t);
  writeFileSync(path.join(root, 'file'), 'x');
  assert.throws(() => makeDir(path.join(root, 'file')), { code: 'EEXIST' });
  assert.throws(() => makeDir(path.join(root, 'file', 'sub')), { code: 'ENOTDIR' });
  symlinkSync(path.join(root, 'nowhere'), path.join(root, 'dangling'));
  assert.throws(() => makeDir(path.join(root, 'dangling', 'sub')), { code: 'ENOENT' });
  assert.equal(existsSync(path.join(root, 'nowhere')), false);
});

// Node's recursive mkdir spins for ever there (procfs answers ENOENT to any new name); a child process, so that a
// regression fails this test by its timeout instead of hanging the run.
test('makeDir under /proc fails at once with ENOENT', { skip: process.platform !== 'linux' && 'procfs is Linux\'s' }, () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '-e',
    "const { makeDir } = await import('./src/core/make-dir.ts'); try { makeDir('/proc/fleetsync-make-dir/x'); } catch (e) { console.log(e.code); }"],
  { cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 20_000 });
  assert.equal(r.signal, null, 'makeDir did not return within 20 s');
  assert.equal(r.stdout.trim(), 'ENOENT', r.stderr);
});

test('makeDir with what the directory is for names it and the whole path, and keeps the system\'s code', (t) => {
  const root = scratch(t);
  writeFileSync(path.join(root, 'file'), 'x');
  const target = path.join(root, 'file', 'spool', 'a');
  assert.throws(() => makeDir(target, 0o700, 'the spool directory'), (e: Error & { code?: string }) =>
    e.code === 'ENOTDIR' && e.message.startsWith(`cannot create the spool directory ${target}: ENOTDIR: not a directory, `));
});

// Two processes starting together (two instances on one shared --attachment-dir) both find a directory missing; the
// second mkdir meets the first one's. Played here by creating it between makeDir's look and its mkdir.
test('makeDir: a directory another process made between the look and the mkdir is fine; a file made there is not', (t) => {
  const root = scratch(t);
  const realMkdir = fs.mkdirSync;
  let race: ((d: string) => void) | undefined;
  t.mock.method(fs, 'mkdirSync', (d: string, options?: fs.MakeDirectoryOptions) => {
    const before = race;
    race = undefined;
    before?.(d);
    return realMkdir(d, options);
  });
  syncBuiltinESMExports();
  t.after(() => { t.mock.restoreAll(); syncBuiltinESMExports(); });

  race = (d) => realMkdir(d);
  makeDir(path.join(root, 'a', 'b'), 0o700);
  assert.ok(statSync(path.join(root, 'a', 'b')).isDirectory());

  race = (d) => writeFileSync(d, 'x');
  assert.throws(() => makeDir(path.join(root, 'c', 'd')), { code: 'EEXIST' });
  assert.equal(statSync(path.join(root, 'c')).isFile(), true);
  assert.equal(existsSync(path.join(root, 'c', 'd')), false);
});
