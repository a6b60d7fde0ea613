// npm start and npm test check that better-sqlite3 loads before anything opens a database, and rebuild it once when it was built for another Node.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
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
