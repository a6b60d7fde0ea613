#!/usr/bin/env node
// Bundles the host agent into one file, dist/host-agent.cjs, with no runtime dependency: what a monitored host
// installs (scripts/install-agent.sh) instead of the server's node_modules (native SQLite, Fastify, pg).
//   node scripts/build-agent.mjs [--outfile path]   (the bundle test builds a scratch copy with exactly these settings)
import { build } from 'esbuild';
import { statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { outfile: { type: 'string', default: path.join(root, 'dist', 'host-agent.cjs') } } });
const outfile = path.resolve(values.outfile);
await build({
  entryPoints: [path.join(root, 'src', 'agent', 'cli.ts')],
  outfile,
  bundle: true,
  platform: 'node',
  // CommonJS, not ESM: Node's ESM loader, and the ESM view of a built-in (which reads every export, so importing
  // node:http compiles undici's WebAssembly HTTP parser), cost the agent several MiB of resident memory.
  format: 'cjs',
  target: 'node22',
  minify: false,
  legalComments: 'none',
  logLevel: 'warning',
});
console.error(`built ${path.relative(root, outfile)} (${Math.round(statSync(outfile).size / 1024)} KiB, no dependencies)`);
