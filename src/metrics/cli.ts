#!/usr/bin/env node
/**
 * The metrics-service command line. This entry imports almost nothing, so
 * that `serve` can re-execute itself with the service's heap flags before the
 * service's modules are loaded (heap-flags.ts); the commands are in
 * cli-commands.ts.
 */
import { execWithServiceHeapFlags } from '../core/cli/heap-flags.js';

const args = process.argv.slice(2);
if (args[0] === 'serve' && !args.includes('--help') && !args.includes('-h')) execWithServiceHeapFlags();
const { PROGRAM, runCli } = await import('./cli-commands.js');
runCli(args, process.env).then((code) => { if (code !== 0) process.exit(code); }, (e: unknown) => {
  console.error(`${PROGRAM}: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
