#!/usr/bin/env node
import { ConfigError } from '../core/config.js';
import { loadSyncConfig, syncHelpText } from './config.js';
import { startSyncServer } from './server.js';

const USAGE = `Usage: sync-service serve [options]
       sync-service serve --help

Commands:
  serve   Run the business data sync service (HTTP API, attachments, WebSocket change feed).`;

async function main(): Promise<number | undefined> {
  const [command, ...argv] = process.argv.slice(2);
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command !== 'serve') {
    console.error(`sync-service: unknown command "${command}"\n\n${USAGE}`);
    return 2;
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
      console.error(`sync-service: ${e.message}\n(see sync-service serve --help)`);
      return 2;
    }
    throw e;
  }
  await startSyncServer(config);
  return undefined;
}

main().then((code) => { if (code !== undefined) process.exitCode = code; }, (e: unknown) => {
  console.error(`sync-service: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
