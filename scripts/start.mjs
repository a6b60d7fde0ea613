#!/usr/bin/env node
// `npm start`: one process from npm to the services (no `sh -c "build && node"` chain), so a SIGTERM from
// npm, a process manager or a closed terminal reaches the launcher, which stops its children.
// Help never waits for a build; a start builds only when a source is newer than the last good build, and that
// build only transpiles (esbuild, about a second): type checking is `npm run typecheck`'s job, not the quick start's.
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureSqliteAddon } from './native-addon.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stamp = path.join(root, 'dist', '.build-complete');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function listTs(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? listTs(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

function buildIsCurrent() {
  if (!existsSync(stamp)) return false;
  const inputs = Math.max(newestMtime(path.join(root, 'src')), ...['package.json', 'tsconfig.json', 'tsconfig.build.json'].map((f) => statSync(path.join(root, f)).mtimeMs));
  return statSync(stamp).mtimeMs >= inputs;
}

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  // Help from the sources through tsx: instant, whatever the state of dist/.
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(path.join(root, 'src', 'start.ts')).href);
} else {
  const addonProblem = ensureSqliteAddon(root, 'npm start');
  if (addonProblem) {
    process.stderr.write(`${addonProblem}\n`);
    process.exit(1);
  }
  if (!buildIsCurrent()) {
    const started = Date.now();
    process.stderr.write('npm start: building dist/ (first start or sources changed)...\n');
    const { build, stop } = await import('esbuild');
    const entryPoints = listTs(path.join(root, 'src'));
    try {
      await build({ entryPoints, outdir: path.join(root, 'dist'), outbase: path.join(root, 'src'), platform: 'node', format: 'esm', target: 'node22', logLevel: 'error' });
    } catch {
      process.stderr.write('npm start: the build failed (see above)\n');
      process.exit(1);
    }
    // esbuild's service process would otherwise stay beside the launcher for as long as the services run.
    await stop();
    mkdirSync(path.dirname(stamp), { recursive: true });
    writeFileSync(stamp, `${new Date().toISOString()}\n`);
    process.stderr.write(`npm start: built ${entryPoints.length} files in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }
  await import(pathToFileURL(path.join(root, 'dist', 'start.js')).href);
}
