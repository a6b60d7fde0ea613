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

const TOKEN_USAGE = `  metrics-service token create <tenant> [options] issue a token (creates the tenant if new); printed once
  metrics-service token list [options]            list tokens (never their secret)
  metrics-service token revoke <token-id> [options]`;

const USAGE = `Usage:
  metrics-service serve [options]                 run the service
${TOKEN_USAGE}
  metrics-service --help

The token commands use the same storage options as serve (--data-dir, DATABASE_URL, --db-schema).`;

/** What the token commands read of serve's options, the only ones `token --help` lists (they accept the others, as serve's command line is often reused). */
const tokenOptions = { dataDir: metricsOptions.dataDir, databaseUrl: metricsOptions.databaseUrl, dbSchema: metricsOptions.dbSchema };

/** Each token command's words after `token <command>`, as its usage line names them. */
const TOKEN_ARGS = new Map<string, string[]>([['create', ['<tenant>']], ['list', []], ['revoke', ['<token-id>']]]);
const TOKEN_HELP = `${PROGRAM} token --help`;

/**
 * Runs one command line; returns the exit code (serve keeps running until a
 * signal). `print` receives stdout lines, `fail` stderr lines.
 */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  io: { print: (line: string) => void; fail: (line: string) => void } = { print: (l) => console.log(l), fail: (l) => console.error(l) },
): Promise<number> {
  const firstFlag = argv.findIndex((a) => a.startsWith('--'));
  const words = firstFlag === -1 ? argv : argv.slice(0, firstFlag);
  const flags = firstFlag === -1 ? [] : argv.slice(firstFlag);
  const [command, sub, ...args] = words;
  const help = argv.includes('--help') || argv.includes('-h');
  if (help && command === 'token') {
    const title = 'metrics-service token: issue, list and revoke tenant tokens in the service\'s database. They read the storage options\nbelow; serve\'s other options are accepted and checked, but not used.';
    io.print(`Usage:\n${TOKEN_USAGE}\n\n${helpText(title, tokenOptions)}`);
    return 0;
  }
  if (help || argv.length === 0) {
    // Asked for, the help is the output; given for a missing command (exit 2), it is the error.
    (argv.length === 0 ? io.fail : io.print)(`${USAGE}\n\n${helpText('metrics-service', metricsOptions)}`);
    return argv.length === 0 ? 2 : 0;
  }
  const helpCommand = command === 'token' ? TOKEN_HELP : undefined;
  try {
    if (command === 'serve' && words.length === 1) {
      const config = loadMetricsConfig(flags, env);
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
    if (command === undefined) return usage(io, ['missing command (serve or token) before the options']);
    if (command !== 'token') return usage(io, [`unknown command: ${words.join(' ')}`]);
    if (sub === undefined) return usage(io, ['token: missing command (create, list or revoke)'], TOKEN_HELP);
    const expected = TOKEN_ARGS.get(sub);
    if (!expected) return usage(io, [`unknown command: ${words.join(' ')}`]);
    const usageLine = `usage: ${PROGRAM} token ${[sub, ...expected].join(' ')} [options]`;
    if (args.length < expected.length) return usage(io, [`token ${sub}: missing ${expected[args.length]}`, usageLine], TOKEN_HELP);
    if (args.length > expected.length) return usage(io, [`token ${sub}: unexpected argument "${args[expected.length]}"`, usageLine], TOKEN_HELP);
    const config = loadMetricsConfig(flags, env);
    const database = await openMetricsDatabase(config);
    const store = createMetricsStore(database, config);
    const [arg = ''] = args;
    try {
      if (sub === 'create') {
        const t = await issueToken(store, arg);
        io.print(`tenant:   ${t.tenantName}${t.createdTenant ? ' (created)' : ''}`);
        io.print(`token id: ${t.tokenId}`);
        io.print(`token:    ${t.token}`);
        io.print('The token is shown only now; the service keeps just its SHA-256 hash.');
        return 0;
      }
      if (sub === 'list') {
        const tokens = await listTokens(store);
        io.print(['TOKEN ID', 'TENANT', 'CREATED', 'STATUS'].join('\t'));
        for (const t of tokens) {
          io.print([t.id, t.tenantName, new Date(t.createdAt).toISOString(), t.revokedAt === null ? 'active' : `revoked ${new Date(t.revokedAt).toISOString()}`].join('\t'));
        }
        return 0;
      }
      await revokeToken(store, arg);
      io.print(`revoked ${arg}`);
      return 0;
    } finally {
      await store.close();
      await database.close();
    }
  } catch (e: unknown) {
    if (e instanceof ConfigError) { io.fail(usageError(PROGRAM, e.problems, helpCommand)); return EXIT_USAGE; }
    if (isAppError(e)) { io.fail(`${PROGRAM}: ${e.details ?? e.code}`); return 1; }
    throw e;
  }
}

function usage(io: { fail: (line: string) => void }, problems: string[], helpCommand?: string): number {
  io.fail(usageError(PROGRAM, problems, helpCommand));
  return EXIT_USAGE;
}
