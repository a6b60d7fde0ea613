#!/usr/bin/env node
// Runs the whole suite with node's test runner (TypeScript through tsx).
// `npm test` runs everything; `npm test -- test/metrics` runs the files under a path.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
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
  '--test-timeout=120000',
  ...passThrough,
  ...files.sort(),
];
const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
process.exit(r.status ?? 1);
