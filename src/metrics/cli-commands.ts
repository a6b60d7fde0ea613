/** The metrics-service commands (serve and the token commands), run by the entry point cli.ts. */
import { EXIT_USAGE, isAddressInUse, portInUseMessage, usageError } from '../core/cli/cli-error.js';
import { exitWithParent } from '../core/cli/exit-with-parent.js';
import { ConfigError, helpText } from '../core/config.js';
import { isAppError } from '../core/errors.js';
import { loadMetricsConfig, metricsOptions } from './config.js';
import { createMetricsStore, openMetricsDatabase } from './deps.js';
import { issueToken, listTokens, revokeToken } from './domain/tenant-tokens.js';
import { startMetricsServer } from './server.js';

export const PROGRAM = 'metrics-service';

const USAGE = `Usage:
  metrics-service serve [options]                 run the service
  metrics-service token create <tenant> [options] issue a token (creates the tenant if new); printed once
  metrics-service token list [options]            list tokens (never their secret)
  metrics-service token revoke <token-id> [options]
  metrics-service --help

The token commands use the same storage options as serve (--data-dir, DATABASE_URL, --db-schema).`;

/**
 * Runs one command line; returns the exit code (serve keeps running until a
 * signal). `print` receives stdout lines, `fail` stderr lines.
 */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  io: { print: (line: string) => void; fail: (line: string) => void } = { print: (l) => console.log(l), fail: (l) => console.error(l) },
): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) {
    // Asked for, the help is the output; given for a missing command (exit 2), it is the error.
    (argv.length === 0 ? io.fail : io.print)(`${USAGE}\n\n${helpText('metrics-service', metricsOptions)}`);
    return argv.length === 0 ? 2 : 0;
  }
  const firstFlag = argv.findIndex((a) => a.startsWith('--'));
  const words = firstFlag === -1 ? argv : argv.slice(0, firstFlag);
  const flags = firstFlag === -1 ? [] : argv.slice(firstFlag);
  try {
    const config = loadMetricsConfig(flags, env);
    const [command, sub, arg, ...rest] = words;
    if (command === 'serve' && words.length === 1) {
      exitWithParent();
      try {
        const address = await startMetricsServer(config);
        io.fail(`metrics service listening on ${address}`);
      } catch (e: unknown) {
        if (!isAddressInUse(e)) throw e;
        io.fail(portInUseMessage(PROGRAM, `${config.host}:${config.port}`, '--port', 'is the metrics service already running (npm start runs one on 8080)?'));
        return 1;
      }
      return 0;
    }
    if (command !== 'token' || rest.length || !sub) return usage(io, `unknown command: ${words.join(' ')}`);
    const database = await openMetricsDatabase(config);
    const store = createMetricsStore(database, config);
    try {
      if (sub === 'create' && arg) {
        const t = await issueToken(store, arg);
        io.print(`tenant:   ${t.tenantName}${t.createdTenant ? ' (created)' : ''}`);
        io.print(`token id: ${t.tokenId}`);
        io.print(`token:    ${t.token}`);
        io.print('The token is shown only now; the service keeps just its SHA-256 hash.');
        return 0;
      }
      if (sub === 'list' && !arg) {
        const tokens = await listTokens(store);
        io.print(['TOKEN ID', 'TENANT', 'CREATED', 'STATUS'].join('\t'));
        for (const t of tokens) {
          io.print([t.id, t.tenantName, new Date(t.createdAt).toISOString(), t.revokedAt === null ? 'active' : `revoked ${new Date(t.revokedAt).toISOString()}`].join('\t'));
        }
        return 0;
      }
      if (sub === 'revoke' && arg) {
        await revokeToken(store, arg);
        io.print(`revoked ${arg}`);
        return 0;
      }
      return usage(io, `unknown command: ${words.join(' ')}`);
    } finally {
      await store.close();
      await database.close();
    }
  } catch (e: unknown) {
    if (e instanceof ConfigError) { io.fail(usageError(PROGRAM, e.problems)); return EXIT_USAGE; }
    if (isAppError(e)) { io.fail(`${PROGRAM}: ${e.details ?? e.code}`); return 1; }
    throw e;
  }
}

function usage(io: { fail: (line: string) => void }, problem: string): number {
  io.fail(usageError(PROGRAM, [problem]));
  return EXIT_USAGE;
}
