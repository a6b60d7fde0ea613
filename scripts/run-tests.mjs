#!/usr/bin/env node
// Runs the whole suite with node's test runner.
// `npm test` runs everything; `npm test -- test/metrics` runs the files under a path.
// src/ and test/ are transpiled once (esbuild, as tsx does per process) into tmp/ and the suite runs from there: each
// test file, spawned service and worker thread then loads plain JavaScript instead of transpiling through tsx hooks,
// which was a fifth of the suite's CPU. `node --import tsx --test <file>` still runs any one file from source.
// Tests that need a missing tool (haproxy, chromium, PostgreSQL, Redis) record it (test/helpers/missing-tool.ts);
// the closing summary names each one, what it skipped and how to install it. Under CI=true a missing tool fails.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { buildSync } from 'esbuild';
import { ensureSqliteAddon } from './native-addon.mjs';

function findFiles(dir, suffix) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...findFiles(p, suffix));
    else if (name.endsWith(suffix)) out.push(p);
  }
  return out;
}

const addonProblem = ensureSqliteAddon(path.resolve('.'), 'npm test');
if (addonProblem) {
  console.error(addonProblem);
  process.exit(1);
}

const filters = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const passThrough = process.argv.slice(2).filter((a) => a.startsWith('--'));
const files = findFiles('test', '.test.ts').filter((f) => !filters.length || filters.some((x) => f.startsWith(path.normalize(x))));
if (!files.length) {
  console.error(`no test files match ${filters.join(' ')}`);
  process.exit(1);
}
// Inside the repository, so the build resolves node_modules and package.json (type, PROJECT_ROOT) as the sources do.
mkdirSync('tmp', { recursive: true });
const buildDir = mkdtempSync(path.join('tmp', 'test-build-'));
buildSync({
  entryPoints: ['src', 'test', 'bench'].flatMap((d) => findFiles(d, '.ts')).filter((f) => !f.endsWith('.d.ts')),
  outdir: buildDir, outbase: '.', format: 'esm', platform: 'node', target: 'node22', sourcemap: 'inline', logLevel: 'warning',
});
// Tests import scripts/*.mjs as they are; Node resolves the link to the real file, which finds the repository from there.
symlinkSync(path.resolve('scripts'), path.join(buildDir, 'scripts'));
const args = [
  '--enable-source-maps',
  '--test',
  '--test-reporter=spec',
  `--test-concurrency=${Math.max(2, availableParallelism())}`,
  '--test-timeout=300000',
  ...passThrough,
  ...files.sort().map((f) => path.join(buildDir, f.replace(/\.ts$/, '.js'))),
];
// Ctrl-C reaches the runner too, which ends the run; this process stays to remove the build (spawnSync returns then).
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => {});
const skipDir = mkdtempSync(path.join(tmpdir(), 'fleetsync-skips-'));
const skipLog = path.join(skipDir, 'skips.ndjson');
const r = spawnSync(process.execPath, args, { stdio: 'inherit', env: { ...process.env, FLEETSYNC_SKIP_LOG: skipLog } });
let skips = [];
try {
  skips = readFileSync(skipLog, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
} catch { /* nothing was skipped */ }
rmSync(skipDir, { recursive: true, force: true });
rmSync(buildDir, { recursive: true, force: true });
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
