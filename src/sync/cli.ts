#!/usr/bin/env node
/** The sync-service command line: one command, serve, whose options are in config.ts. */
import { EXIT_USAGE, isAddressInUse, portInUseMessage, usageError } from '../core/cli/cli-error.js';
import { exitWithParent } from '../core/cli/exit-with-parent.js';
import { ConfigError } from '../core/config.js';
import { loadSyncConfig, syncHelpText } from './config.js';
import { startSyncServer } from './server.js';

const PROGRAM = 'sync-service';

const USAGE = `Usage: sync-service serve [options]
       sync-service serve --help

Commands:
  serve   Run the business data sync service (HTTP API, attachments, WebSocket change feed).`;

async function main(): Promise<number | undefined> {
  const [command, ...argv] = process.argv.slice(2);
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    // Asked for, the usage is the output; given for a missing command (exit 2), it is the error.
    if (command === undefined) console.error(USAGE);
    else console.log(USAGE);
    return command === undefined ? EXIT_USAGE : 0;
  }
  if (command !== 'serve') {
    // Options come after the command: `--port 8081 serve` lacks one rather than naming --port.
    console.error(usageError(PROGRAM, [command.startsWith('-') ? 'missing command (serve) before the options' : `unknown command "${command}"`]));
    return EXIT_USAGE;
  }
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(syncHelpText());
    return 0;
  }
  let config;
  try {
    config = loadSyncConfig({ argv, env: process.env });
  } catch (e: unknown) {
    if (e instanceof ConfigError) {
      console.error(usageError(PROGRAM, e.problems, `${PROGRAM} serve --help`));
      return EXIT_USAGE;
    }
    throw e;
  }
  exitWithParent();
  try {
    await startSyncServer(config);
  } catch (e: unknown) {
    if (!isAddressInUse(e)) throw e;
    console.error(portInUseMessage(PROGRAM, `${config.host}:${config.port}`, '--port', 'is the sync service already running (npm start runs one on 8081)?'));
    return 1;
  }
  return undefined;
}

// Exit outright on a failure: a half-opened database or Redis client must not keep the process alive.
main().then((code) => { if (code === 0) process.exitCode = 0; else if (code !== undefined) process.exit(code); }, (e: unknown) => {
  console.error(`${PROGRAM}: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
