#!/usr/bin/env node
// Bundles the host agent into one file, dist/host-agent.mjs, with no runtime dependency: what a monitored host
// installs (scripts/install-agent.sh) instead of the server's node_modules (native SQLite, Fastify, pg).
import { build } from 'esbuild';
import { statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outfile = path.join(root, 'dist', 'host-agent.mjs');
await build({
  entryPoints: [path.join(root, 'src', 'agent', 'cli.ts')],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  minify: false,
  legalComments: 'none',
  logLevel: 'warning',
});
console.error(`built ${path.relative(root, outfile)} (${Math.round(statSync(outfile).size / 1024)} KiB, no dependencies)`);
