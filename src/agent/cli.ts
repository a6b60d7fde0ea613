#!/usr/bin/env node
import { ConfigError, helpText } from '../core/config.js';
import { agentOptions, loadAgentOptions } from './agent-options.js';
import { jsonLogger } from './logger.js';
import { runOnce, startAgent } from './start-agent.js';

/** EX_TEMPFAIL (sysexits.h): `--once` left reports spooled; a later run will send them. */
const EXIT_SPOOLED = 75;

async function main(): Promise<number | undefined> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(helpText('host-agent: collects this Linux host\'s metrics and delivers them to the metrics service.', agentOptions));
    return 0;
  }
  let options;
  try {
    options = loadAgentOptions(argv, process.env);
  } catch (e: unknown) {
    if (e instanceof ConfigError) {
      console.error(`host-agent: ${e.message}\n(see host-agent --help)`);
      return 2;
    }
    throw e;
  }
  const log = jsonLogger(options.logLevel);
  if (options.once) return (await runOnce({ ...options, log })) ? 0 : EXIT_SPOOLED;

  const agent = await startAgent({ ...options, log });
  const shutdown = (signal: string) => {
    log.info('signal received, stopping', { signal });
    agent.stop().then(() => process.exit(0), (e: unknown) => {
      log.error('error while stopping', { error: String(e) });
      process.exit(1);
    });
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  return undefined;
}

main().then((code) => { if (code !== undefined) process.exitCode = code; }, (e: unknown) => {
  console.error(`host-agent: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
