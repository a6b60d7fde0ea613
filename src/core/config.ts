/**
 * Configuration: each service declares its options once (flag, environment
 * variable, default, documentation, parser). `loadConfig` reads flags first,
 * then the environment, then defaults, validates everything, and throws one
 * `ConfigError` listing every bad value. Nothing else reads `process.env`.
 */
import { isIP } from 'node:net';
import { BEARER_TOKEN } from './auth/tokens.js';

export interface Option<T> {
  /** Long flag name without dashes, e.g. `port` for `--port`. */
  flag: string;
  /** Environment variable consulted when the flag is absent. */
  env: string;
  doc: string;
  /** Parses and validates a raw string; throws an Error with a readable message when invalid. */
  parse: (raw: string) => T;
  /** Used when neither flag nor environment is set. `undefined` with `required` means the option must be given. */
  default: T;
  required?: boolean;
  /** Boolean options take no value on the command line (`--flag`). */
  isBoolean?: boolean;
  /** Never printed back (help shows no default, errors show no value). */
  secret?: boolean;
  /** What a valid value is, e.g. `must be at least 16 characters`: a refused secret is told this, never its own fault. */
  rule?: string;
  /** The default as a rule, for one computed from the machine: help shows it with this machine's value, not the value alone. */
  defaultRule?: string;
}

export type OptionsSpec = Record<string, Option<unknown>>;
export type ConfigOf<S extends OptionsSpec> = { [K in keyof S]: S[K] extends Option<infer T> ? T : never };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Common = { flag: string; env: string; doc: string; secret?: boolean; rule?: string };

/** A PostgreSQL schema name the services put in `search_path` and DDL unquoted: a plain lower-case identifier. */
export const SCHEMA_NAME = /^(?!pg_)[a-z_][a-z0-9_]{0,62}$/;

function splitList(text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter(Boolean);
}

/** What proxy-addr (Fastify's trustProxy) accepts: an IP, an IP/prefix or IPv4/netmask, or one of its named ranges. */
function isProxyAddress(text: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(text)) return true;
  const [ip = '', range, ...rest] = text.split('/');
  const family = isIP(ip);
  if (!family || rest.length) return false;
  if (range === undefined) return true;
  if (/^\d{1,3}$/.test(range)) return Number(range) <= (family === 4 ? 32 : 128);
  return family === 4 && isIP(range) === 4;
}

/** The longest delay setTimeout and setInterval keep (2^31 - 1 ms, about 24.8 days). */
export const MAX_TIMER_MS = 2_147_483_647;

export const opt = {
  string(o: Common & { default: string }): Option<string> {
    return { ...o, parse: (r) => r };
  },
  optionalString(o: Common): Option<string | undefined> {
    return { ...o, default: undefined, parse: (r) => (r === '' ? undefined : r) };
  },
  requiredString(o: Common): Option<string> {
    return { ...o, default: '', required: true, parse: (r) => { if (!r) throw new Error('must not be empty'); return r; } };
  },
  int(o: Common & { default: number; min?: number; max?: number }): Option<number> {
    return {
      ...o,
      parse: (r) => {
        if (!/^-?\d+$/.test(r.trim())) throw new Error(`"${r}" is not an integer`);
        const n = Number(r);
        if (!Number.isSafeInteger(n)) throw new Error(`${r.trim().slice(0, 40)} is too large`);
        if (o.min !== undefined && n < o.min) throw new Error(`${n} is below the minimum ${o.min}`);
        if (o.max !== undefined && n > o.max) throw new Error(`${n} is above the maximum ${o.max}`);
        return n;
      },
    };
  },
  /** A delay a timer waits: above MAX_TIMER_MS Node.js fires it after 1 ms, so larger values are refused. */
  ms(o: Common & { default: number; min?: number; max?: number }): Option<number> {
    return opt.int({ ...o, max: Math.min(o.max ?? MAX_TIMER_MS, MAX_TIMER_MS) });
  },
  bool(o: Common & { default: boolean }): Option<boolean> {
    return {
      ...o,
      isBoolean: true,
      parse: (r) => {
        const v = r.trim().toLowerCase();
        if (['1', 'true', 'yes', 'on', ''].includes(v)) return true;
        if (['0', 'false', 'no', 'off'].includes(v)) return false;
        throw new Error(`"${r}" is not a boolean (true/false)`);
      },
    };
  },
  oneOf<const V extends string>(o: Common & { default: V; values: readonly V[] }): Option<V> {
    return {
      ...o,
      parse: (r) => {
        if (!(o.values as readonly string[]).includes(r)) throw new Error(`"${r}" is not one of ${o.values.join(', ')}`);
        return r as V;
      },
    };
  },
  list(o: Common & { default: string[] }): Option<string[]> {
    return { ...o, parse: splitList };
  },
  url(o: Common & { protocols: string[] }): Option<string | undefined> {
    const rule = `must be a URL starting with ${o.protocols.map((p) => `${p}//`).join(' or ')}`;
    return {
      ...o,
      rule,
      default: undefined,
      parse: (r) => {
        if (r === '') return undefined;
        let u: URL;
        try { u = new URL(r); } catch { throw new Error(rule); }
        if (!o.protocols.includes(u.protocol)) throw new Error(rule);
        return r;
      },
    };
  },
};

/** Splits `--name value`, `--name=value` and bare boolean `--name` into a map; unknown flags are problems. */
function parseArgv(spec: OptionsSpec, argv: string[], problems: string[]): Map<string, string> {
  const byFlag = new Map(Object.values(spec).map((o) => [o.flag, o]));
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) { problems.push(`unexpected argument "${arg}"`); continue; }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const o = byFlag.get(name);
    if (!o) {
      problems.push(`unknown option --${name}`);
      if (eq === -1 && i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) i++;
      continue;
    }
    if (eq !== -1) out.set(name, arg.slice(eq + 1));
    else if (o.isBoolean) out.set(name, 'true');
    // The next flag is not this one's value (`--data-dir --metrics-token x`); a value that starts with -- takes `=`.
    else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) out.set(name, argv[++i]!);
    else problems.push(`--${name} needs a value`);
  }
  return out;
}

export function loadConfig<S extends OptionsSpec>(
  spec: S,
  source: { argv?: string[]; env?: Record<string, string | undefined> } = {},
): ConfigOf<S> {
  const problems: string[] = [];
  const flags = parseArgv(spec, source.argv ?? [], problems);
  const env = source.env ?? {};
  const out: Record<string, unknown> = {};
  for (const [key, o] of Object.entries(spec)) {
    const raw = flags.get(o.flag) ?? env[o.env];
    if (raw === undefined) {
      if (o.required) problems.push(`--${o.flag} / ${o.env} is required`);
      out[key] = o.default;
      continue;
    }
    try {
      out[key] = o.parse(raw);
    } catch (e: unknown) {
      const msg = e instanceof Error ? e.message : String(e);
      // A secret's value is never echoed, nor is why it was refused (the reason can hint at it), only the whole rule it
      // broke; an empty one has nothing to hide.
      problems.push(`--${o.flag} / ${o.env}: ${o.secret && raw !== '' ? `invalid value${o.rule ? `: ${o.rule}` : ''}` : msg}`);
    }
  }
  if (problems.length) throw new ConfigError(problems);
  return out as ConfigOf<S>;
}

/** `--help` text: one line per option with its flag, variable, default and purpose. */
export function helpText(title: string, spec: OptionsSpec): string {
  const lines = [title, '', 'Options (flag, environment variable, default):'];
  for (const o of Object.values(spec)) {
    const value = Array.isArray(o.default) ? o.default.join(',') : String(o.default);
    const def = o.secret || o.default === undefined || o.default === '' ? '' : ` [default: ${o.defaultRule ? `${o.defaultRule}; ${value} on this machine` : value}]`;
    const req = o.required ? ' (required)' : '';
    lines.push(`  --${o.flag}${o.isBoolean ? '' : ' <value>'}  (${o.env})${req}${def}`, `      ${o.doc}`);
  }
  return lines.join('\n');
}

/** Options every HTTP service shares; services spread this into their own spec. */
export function httpOptions(prefix: string, defaultPort: number) {
  return {
    host: {
      ...opt.string({ flag: 'host', env: `${prefix}_HOST`, default: '127.0.0.1', doc: 'Address to listen on.' }),
      // Node takes an empty address for every interface: a blank line in an env file must not open the service up.
      parse: (r: string) => { if (r.trim() === '') throw new Error('is empty: give 0.0.0.0 or :: to listen on every interface'); return r; },
    },
    port: opt.int({ flag: 'port', env: `${prefix}_PORT`, default: defaultPort, min: 0, max: 65535, doc: 'TCP port to listen on (0 = ephemeral).' }),
    dataDir: {
      ...opt.string({ flag: 'data-dir', env: 'DATA_DIR', default: './data', doc: 'Directory for the embedded SQLite database and local files.' }),
      parse: (r: string) => { if (r.trim() === '') throw new Error('is empty'); return r; },
    },
    databaseUrl: opt.url({ flag: 'database-url', env: 'DATABASE_URL', protocols: ['postgres:', 'postgresql:'], secret: true, doc: 'PostgreSQL connection URL; when set, PostgreSQL replaces the embedded SQLite database.' }),
    dbSchema: {
      ...opt.string({ flag: 'db-schema', env: `${prefix}_DB_SCHEMA`, default: prefix.toLowerCase(), doc: 'PostgreSQL schema holding this service\'s tables (created when absent): a-z, 0-9 and _, not starting with a digit or pg_.' }),
      parse: (r: string) => { if (!SCHEMA_NAME.test(r)) throw new Error(`"${r}" is not a plain lower-case identifier (a-z, 0-9, _; at most 63; pg_ is PostgreSQL's)`); return r; },
    },
    redisUrl: opt.url({ flag: 'redis-url', env: 'REDIS_URL', protocols: ['redis:', 'rediss:'], secret: true, doc: 'Redis URL for shared rate limits and cross-instance notifications.' }),
    trustProxy: {
      ...opt.list({ flag: 'trust-proxy', env: 'TRUST_PROXY', default: [], doc: 'Comma-separated addresses/CIDRs of proxies whose X-Forwarded-For is believed (or loopback, linklocal, uniquelocal).' }),
      parse: (r: string) => {
        const list = splitList(r);
        const bad = list.filter((a) => !isProxyAddress(a));
        if (bad.length) throw new Error(`${bad.map((a) => `"${a}"`).join(', ')} is not an IP address, CIDR range or named range`);
        return list;
      },
    },
    logLevel: opt.oneOf({ flag: 'log-level', env: 'LOG_LEVEL', default: 'info', values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, doc: 'Minimum level of the JSON logs.' }),
    bodyLimit: opt.int({ flag: 'body-limit', env: `${prefix}_BODY_LIMIT`, default: 1_048_576, min: 1024, doc: 'Largest accepted JSON request body, in bytes.' }),
    minFreeDiskBytes: opt.int({
      flag: 'min-free-disk-bytes', env: `${prefix}_MIN_FREE_DISK_BYTES`, default: 64 * 1_048_576, min: 0,
      doc: 'Bulk writes (ingest; sync pushes and uploads) get 503 while the disk under the SQLite data directory (or a local attachment directory) has less free, so it never fills and the storage keeps room to compact; reads go on. 0: never.',
    }),
    shutdownTimeoutMs: opt.ms({ flag: 'shutdown-timeout-ms', env: 'SHUTDOWN_TIMEOUT_MS', default: 10_000, min: 0, doc: 'How long SIGTERM waits for in-flight requests before exiting.' }),
  };
}

export type HttpConfig = ConfigOf<ReturnType<typeof httpOptions>>;

/**
 * Options for running several instances and watching them; services spread
 * this next to `httpOptions`. `REDIS_URL` and `TRUST_PROXY` live in `httpOptions`.
 */
export function opsOptions(prefix: string) {
  return {
    metricsToken: {
      ...opt.optionalString({ flag: 'metrics-token', env: `${prefix}_METRICS_TOKEN`, secret: true, doc: 'Bearer token Prometheus presents to scrape /metrics (at least 16 characters); /metrics is not served without it.' }),
      rule: 'must be 16-512 characters of A-Z, a-z, 0-9 and . _ ~ + / = -',
      parse: (r: string) => {
        if (r === '') return undefined;
        if (r.length < 16) throw new Error('must be at least 16 characters');
        // Any other could never be presented in an Authorization header.
        if (!BEARER_TOKEN.test(r)) throw new Error('may hold only A-Z, a-z, 0-9 and . _ ~ + / = -, at most 512 characters');
        return r;
      },
    },
    redisPrefix: {
      ...opt.string({ flag: 'redis-prefix', env: `${prefix}_REDIS_PREFIX`, default: `${prefix.toLowerCase()}:`, doc: 'Prefix of this service\'s Redis keys and channels, so services (or deployments) can share one Redis.' }),
      parse: (r: string) => {
        if (!/^[A-Za-z0-9_:.-]{1,64}$/.test(r)) throw new Error(`"${r}" must be 1-64 characters of letters, digits, _ : . -`);
        return r;
      },
    },
    maxExpensiveInFlight: opt.int({
      flag: 'max-expensive-in-flight', env: `${prefix}_MAX_EXPENSIVE_IN_FLIGHT`, default: 16, min: 1, max: 10_000,
      doc: 'Expensive requests (series, aggregates, push, pull) one instance runs at once; the next gets 503 with Retry-After.',
    }),
    maxExpensivePerPrincipal: opt.int({
      flag: 'max-expensive-per-principal', env: `${prefix}_MAX_EXPENSIVE_PER_PRINCIPAL`, default: 8, min: 1, max: 10_000,
      doc: 'Expensive requests one tenant (metrics) or user (sync) runs at once on one instance; the next gets 503 with Retry-After.',
    }),
    maxEventLoopDelayMs: opt.int({
      flag: 'max-event-loop-delay-ms', env: `${prefix}_MAX_EVENT_LOOP_DELAY_MS`, default: 500, min: 0, max: 60_000,
      doc: 'Expensive requests get 503 while the event loop stalled longer than this in the last half second (0 = off).',
    }),
  };
}

export type OpsConfig = ConfigOf<ReturnType<typeof opsOptions>>;
