#!/usr/bin/env node
// Bundles the client library (src/client/index.ts) for browsers into dist/browser/fleetsync-client.js,
// which the sync service serves beside its example page (/example/). platform=browser makes any Node built-in fail the build.
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Builds the bundle into `outfile` (default dist/browser/fleetsync-client.js) and returns its path. */
export async function buildBrowserClient(outfile = path.join(root, 'dist/browser/fleetsync-client.js')) {
  await build({
    entryPoints: [path.join(root, 'src/client/index.ts')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    sourcemap: true,
    outfile,
    logLevel: 'warning',
  });
  return outfile;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(`wrote ${path.relative(root, await buildBrowserClient())}`);
}
