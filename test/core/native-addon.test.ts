// npm start and npm test check that better-sqlite3 loads before anything opens a database, and rebuild it once when it was built for another Node.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/core/paths.js';
// @ts-expect-error -- a plain ESM script without type declarations
import { builtForAnotherNode, ensureSqliteAddon, runningNodeDir } from '../../scripts/native-addon.mjs';

test('an addon built for another Node.js is told from other load failures by its dlopen error', () => {
  const mismatch = Object.assign(new Error('The module was compiled against a different Node.js version using NODE_MODULE_VERSION 115. This version of Node.js requires NODE_MODULE_VERSION 127.'), { code: 'ERR_DLOPEN_FAILED' });
  assert.equal(builtForAnotherNode(mismatch), true);
  assert.equal(builtForAnotherNode(Object.assign(new Error('libfoo.so: cannot open shared object file'), { code: 'ERR_DLOPEN_FAILED' })), false);
  assert.equal(builtForAnotherNode(Object.assign(new Error('Cannot find module'), { code: 'MODULE_NOT_FOUND' })), false);
  assert.equal(runningNodeDir(), path.resolve(process.execPath, '../..'));
});

test('the installed addon loads in this Node.js: nothing to rebuild, nothing printed', () => {
  assert.equal(ensureSqliteAddon(PROJECT_ROOT, 'test'), undefined);
});

/**
 * A project whose better-sqlite3 fails as an addon built for another Node.js does, until `npm rebuild` (a fake npm,
 * run through npm_execpath as npm start runs it) leaves the marker that makes it load; or, with `rebuildFails`, never.
 */
function mismatchedProject(rebuildFails: boolean): { root: string; npm: string } {
  const root = mkdtempSync(path.join(tmpdir(), 'native-addon-'));
  const pkg = path.join(root, 'node_modules', 'better-sqlite3');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(path.join(root, 'package.json'), '{"name":"p"}');
  writeFileSync(path.join(pkg, 'index.js'), `
    const fs = require('node:fs');
    module.exports = class { constructor() {
      if (!fs.existsSync(${JSON.stringify(path.join(root, 'rebuilt'))})) throw Object.assign(new Error('compiled against a different Node.js version using NODE_MODULE_VERSION 115'), { code: 'ERR_DLOPEN_FAILED' });
    } close() {} };`);
  const npm = path.join(root, 'fake-npm.js');
  writeFileSync(npm, rebuildFails ? 'process.exit(1)' : `require('node:fs').writeFileSync(${JSON.stringify(path.join(root, 'rebuilt'))}, process.env.npm_config_nodedir)`);
  return { root, npm };
}

test('an addon built for another Node.js is rebuilt once, with the running Node.js\'s headers, and then loads; a failed rebuild says what to run', { skip: !existsSync(path.join(runningNodeDir(), 'include', 'node', 'node_version.h')) && 'this Node.js ships no headers' }, (t) => {
  const saved = process.env['npm_execpath'];
  t.after(() => { if (saved === undefined) delete process.env['npm_execpath']; else process.env['npm_execpath'] = saved; });
  const write = process.stderr.write.bind(process.stderr);
  t.after(() => { process.stderr.write = write; });
  process.stderr.write = (() => true) as typeof process.stderr.write;

  const ok = mismatchedProject(false);
  process.env['npm_execpath'] = ok.npm;
  assert.equal(ensureSqliteAddon(ok.root, 'test'), undefined);
  assert.equal(readFileSync(path.join(ok.root, 'rebuilt'), 'utf8'), runningNodeDir(), 'rebuilt with this Node.js\'s headers');

  const broken = mismatchedProject(true);
  process.env['npm_execpath'] = broken.npm;
  assert.match(ensureSqliteAddon(broken.root, 'test'), /^test: better-sqlite3 still does not load \(npm rebuild exited with 1\): run npm_config_nodedir=\S+ npm rebuild better-sqlite3$/);
  for (const dir of [ok.root, broken.root]) rmSync(dir, { recursive: true, force: true });
});
