import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/core/paths.js';

function runner(env: Record<string, string>) {
  const r = spawnSync(process.execPath, [path.join(PROJECT_ROOT, 'scripts/run-tests.mjs'), 'test/fixtures/runner/needs-tool.test.ts'], {
    cwd: PROJECT_ROOT, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '', FLEETSYNC_FAKE_MISSING: '1', ...env },
  });
  return { status: r.status, out: r.stdout + r.stderr };
}

test('outside CI a missing tool skips its tests and the closing summary names the tool, what was skipped and how to install it', () => {
  const r = runner({});
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /# NOT RUN because a tool is missing.*\n# {3}fake-tool: the fake-tool test\. Install: apt-get install fake-tool\n/);
});

test('under CI=true a missing tool fails the run', () => {
  const r = runner({ CI: 'true' });
  assert.notEqual(r.status, 0, r.out);
  assert.match(r.out, /CI=true: fake-tool missing \(apt-get install fake-tool\)/);
});
