#!/usr/bin/env node
// Runs the whole suite with node's test runner (TypeScript through tsx).
// `npm test` runs everything; `npm test -- test/metrics` runs the files under a path.
// Tests that need a missing tool (haproxy, chromium, PostgreSQL, Redis) record it (test/helpers/missing-tool.ts);
// the closing summary names each one, what it skipped and how to install it. Under CI=true a missing tool fails.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';

function findTests(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...findTests(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

const filters = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const passThrough = process.argv.slice(2).filter((a) => a.startsWith('--'));
const files = findTests('test').filter((f) => !filters.length || filters.some((x) => f.startsWith(path.normalize(x))));
if (!files.length) {
  console.error(`no test files match ${filters.join(' ')}`);
  process.exit(1);
}
const args = [
  '--import', 'tsx',
  '--test',
  '--test-reporter=spec',
  `--test-concurrency=${Math.max(2, availableParallelism())}`,
  '--test-timeout=300000',
  ...passThrough,
  ...files.sort(),
];
const skipDir = mkdtempSync(path.join(tmpdir(), 'fleetsync-skips-'));
const skipLog = path.join(skipDir, 'skips.ndjson');
const r = spawnSync(process.execPath, args, { stdio: 'inherit', env: { ...process.env, FLEETSYNC_SKIP_LOG: skipLog } });
let skips = [];
try {
  skips = readFileSync(skipLog, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
} catch { /* nothing was skipped */ }
rmSync(skipDir, { recursive: true, force: true });
const byTool = new Map();
for (const s of skips) {
  const entry = byTool.get(s.tool) ?? { install: s.install, skipped: new Set() };
  entry.skipped.add(s.skipped);
  byTool.set(s.tool, entry);
}
if (byTool.size) {
  console.log('\n# NOT RUN because a tool is missing (CI=true turns this into a failure):');
  for (const [tool, e] of byTool) console.log(`#   ${tool}: ${[...e.skipped].join('; ')}. Install: ${e.install}`);
} else {
  console.log('\n# every tool the suite drives was present: nothing skipped for a missing tool');
}
process.exit(r.status ?? 1);
