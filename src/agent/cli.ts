#!/usr/bin/env node
import { ConfigError, helpText } from '../core/config.js';
import { EXIT_USAGE, usageError } from '../core/cli/cli-error.js';
import { exitWithParent } from '../core/cli/exit-with-parent.js';
import { loadAgentConfigFile, type AgentConfigFile } from './agent-config-file.js';
import { agentOptions, loadAgentOptions } from './agent-options.js';
import { jsonLogger } from './logger.js';
import { runOnce, startAgent } from './start-agent.js';

const PROGRAM = 'host-agent';
/** EX_TEMPFAIL (sysexits.h): `--once` left reports spooled; a later run will send them. */
const EXIT_SPOOLED = 75;
const EXIT_REFUSED = 1;

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
      console.error(usageError(PROGRAM, e.problems));
      return EXIT_USAGE;
    }
    throw e;
  }
  let rules: AgentConfigFile | undefined;
  try {
    rules = options.config === undefined ? undefined : await loadAgentConfigFile(options.config);
  } catch (e: unknown) {
    // Its file is one of the options: a bad one is a usage error like a bad flag.
    console.error(usageError(PROGRAM, [`--config / HOST_AGENT_CONFIG: ${e instanceof Error ? e.message : String(e)}`]));
    return EXIT_USAGE;
  }
  // Before anything slow: a launcher that dies during our start must still take us with it.
  exitWithParent();
  const log = jsonLogger(options.logLevel);
  if (options.once) {
    const r = await runOnce({ ...options, rules, log });
    const reports = (n: number) => `${n} report${n === 1 ? '' : 's'}`;
    // Not the service's doing, and not what the exit status is about: said, and logged with each file's fault.
    if (r.unsendable.length) console.error(`${PROGRAM}: dropped ${reports(r.unsendable.length)} from the spool unsent, their files damaged or gone: ${r.unsendable[0]}`);
    if (r.rejected.length) {
      const first = r.rejected[0]!;
      console.error(`${PROGRAM}: the metrics service at ${options.url} refused ${reports(r.rejected.length)}: ${first.status} ${first.error}${first.details ? `: ${first.details}` : ''}`);
      return EXIT_REFUSED;
    }
    if (r.spooled) {
      const why = `the metrics service at ${options.url} is unavailable (${r.retryReason ?? 'no answer'})`;
      const kept = r.spooled - r.lost;
      console.error(r.lost
        ? `${PROGRAM}: ${reports(r.spooled)} not delivered, ${why}; ${r.lost} could not be written to the spool (its disk full?) and ${r.lost === 1 ? 'is' : 'are'} lost${kept ? `, a later run sends the other ${kept}` : ''}`
        : `${PROGRAM}: ${reports(r.spooled)} left spooled, ${why}; a later run sends them`);
      return EXIT_SPOOLED;
    }
    console.log(`${PROGRAM}: delivered ${reports(r.delivered)} to ${options.url} as host ${r.agentId}`);
    return 0;
  }

  const agent = await startAgent({ ...options, rules, log });
  const shutdown = (signal: string) => {
    log.info('signal received, stopping', { signal });
    agent.stop().then(() => process.exit(0), (e: unknown) => {
      log.error('error while stopping', { error: String(e) });
      process.exit(1);
    });
  };
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(signal, () => shutdown(signal));
  return undefined;
}

main().then((code) => { if (code !== undefined) process.exitCode = code; }, (e: unknown) => {
  console.error(`${PROGRAM}: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
