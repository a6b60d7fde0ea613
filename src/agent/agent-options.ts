import { ConfigError, loadConfig, opt, type ConfigOf } from '../core/config.js';
import { LOG_LEVELS } from './logger.js';
import { agentIdProblem, hostnameProblem } from './report-identity.js';

/** An optional text option the service must accept in every report: refused at start, not report by report. */
function checked(problem: (value: string) => string | undefined) {
  return (r: string) => {
    if (r === '') return undefined;
    const why = problem(r);
    if (why) throw new Error(why);
    return r;
  };
}

/** Every option of `host-agent`: flag, environment variable, default. Read once by `loadAgentOptions`. */
export const agentOptions = {
  url: { ...opt.url({ flag: 'url', env: 'HOST_AGENT_URL', protocols: ['http:', 'https:'], doc: 'Base URL of the metrics service; reports go to <url>/api/v1/ingest/bulk.' }), required: true },
  token: opt.requiredString({ flag: 'token', env: 'HOST_AGENT_TOKEN', secret: true, doc: 'Tenant bearer token for ingest (metrics-service token create).' }),
  secret: opt.optionalString({ flag: 'secret', env: 'HOST_AGENT_SECRET', secret: true, doc: 'HMAC-SHA256 key; when set every report carries x-collector-signature. Must equal the service\'s --secret.' }),
  intervalMs: opt.int({ flag: 'interval-ms', env: 'HOST_AGENT_INTERVAL_MS', default: 10_000, min: 100, max: 3_600_000, doc: 'Collection interval.' }),
  spoolDir: opt.string({ flag: 'spool-dir', env: 'HOST_AGENT_SPOOL_DIR', default: './data/agent-spool', doc: 'State directory: one on-disk queue of unsent reports per destination (URL and token), and the agent id when the machine has no machine id. Survives restarts.' }),
  spoolMinFreeBytes: opt.int({
    flag: 'spool-min-free-bytes', env: 'HOST_AGENT_SPOOL_MIN_FREE_BYTES', default: 100 * 1024 * 1024, min: 0,
    doc: 'While the spool\'s filesystem has less free than this, new reports are held in memory (8 MiB at most) instead of written, so the agent never fills the disk of the host it watches; 0: never.',
  }),
  spoolMaxBytes: opt.int({ flag: 'spool-max-bytes', env: 'HOST_AGENT_SPOOL_MAX_BYTES', default: 512 * 1024 * 1024, min: 64 * 1024, doc: 'Bound on each spool\'s total size (512 MiB holds the 7 days of --spool-max-age-ms at 10 s for reports up to 8 KiB); past it the oldest reports are dropped (and counted).' }),
  spoolMaxAgeMs: opt.int({ flag: 'spool-max-age-ms', env: 'HOST_AGENT_SPOOL_MAX_AGE_MS', default: 7 * 24 * 3_600_000, min: 1_000, doc: 'Spooled reports older than this are dropped (and counted).' }),
  config: opt.optionalString({ flag: 'config', env: 'HOST_AGENT_CONFIG', doc: 'JSON file: systemd units to watch ("services") and local threshold alert rules ("alerts").' }),
  hostname: { ...opt.optionalString({ flag: 'hostname', env: 'HOST_AGENT_HOSTNAME', doc: 'Hostname to report instead of the system\'s (1-255 characters, no control or invisible ones).' }), parse: checked(hostnameProblem) },
  agentId: { ...opt.optionalString({ flag: 'agent-id', env: 'HOST_AGENT_ID', doc: 'Agent identifier (1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit); by default derived from the machine id (the same for every agent on the machine), else a random UUID kept in the state directory.' }), parse: checked(agentIdProblem) },
  machineIdFile: opt.string({ flag: 'machine-id-file', env: 'HOST_AGENT_MACHINE_ID_FILE', default: '/etc/machine-id', doc: 'machine-id(5) file the agent id is derived from (in a container: the host\'s, mounted read-only).' }),
  procRoot: opt.string({ flag: 'proc-root', env: 'HOST_AGENT_PROC_ROOT', default: '/proc', doc: 'Where the host\'s /proc is mounted (container mode: e.g. /host/proc).' }),
  sysRoot: opt.string({ flag: 'sys-root', env: 'HOST_AGENT_SYS_ROOT', default: '/sys', doc: 'Where the host\'s /sys is mounted (container mode: e.g. /host/sys).' }),
  rootFs: opt.string({ flag: 'root-fs', env: 'HOST_AGENT_ROOT_FS', default: '/', doc: 'Where the host\'s root filesystem is mounted, for disk usage (container mode: e.g. /host/root).' }),
  perCoreCpuModes: opt.bool({ flag: 'per-core-cpu-modes', env: 'HOST_AGENT_PER_CORE_CPU_MODES', default: false, doc: 'Also send CPU time per mode for every core (8 metric names per core: mind the service\'s --max-metrics-per-host on big machines).' }),
  batchMaxReports: opt.int({ flag: 'batch-max-reports', env: 'HOST_AGENT_BATCH_MAX_REPORTS', default: 1_000, min: 1, max: 10_000, doc: 'Most spooled reports sent in one gzip-compressed bulk request.' }),
  once: opt.bool({ flag: 'once', env: 'HOST_AGENT_ONCE', default: false, doc: 'Collect one report (over a 1 s window), send it with whatever is spooled, print one line, exit: 0 delivered, 1 refused by the service, 75 left spooled (service unavailable).' }),
  requestTimeoutMs: opt.ms({ flag: 'request-timeout-ms', env: 'HOST_AGENT_REQUEST_TIMEOUT_MS', default: 10_000, min: 100, doc: 'Longest pause in sending one POST (connection included), and longest wait for its answer once sent; past either it is retried, a batch at half the size.' }),
  retryBaseMs: opt.ms({ flag: 'retry-base-ms', env: 'HOST_AGENT_RETRY_BASE_MS', default: 1_000, min: 1, doc: 'First backoff ceiling; doubles per failed attempt (full jitter).' }),
  retryMaxMs: opt.ms({ flag: 'retry-max-ms', env: 'HOST_AGENT_RETRY_MAX_MS', default: 60_000, min: 1, doc: 'Largest backoff ceiling between attempts.' }),
  serviceTimeoutMs: opt.ms({ flag: 'service-timeout-ms', env: 'HOST_AGENT_SERVICE_TIMEOUT_MS', default: 5_000, min: 100, doc: 'Bound on the systemctl call that reads service states.' }),
  shutdownTimeoutMs: opt.ms({ flag: 'shutdown-timeout-ms', env: 'HOST_AGENT_SHUTDOWN_TIMEOUT_MS', default: 5_000, min: 0, doc: 'On SIGTERM, how long a POST in flight may finish before it is aborted (the report stays spooled).' }),
  logLevel: opt.oneOf({ flag: 'log-level', env: 'HOST_AGENT_LOG_LEVEL', default: 'info', values: LOG_LEVELS, doc: 'Minimum level of the JSON log lines on stderr.' }),
};

export type AgentOptions = Omit<ConfigOf<typeof agentOptions>, 'url'> & { url: string };

/** Reads flags and environment once; throws a ConfigError listing every problem. */
export function loadAgentOptions(argv: string[], env: Record<string, string | undefined>): AgentOptions {
  const c = loadConfig(agentOptions, { argv, env });
  if (!c.url) throw new ConfigError(['--url / HOST_AGENT_URL must not be empty']);
  if (c.retryBaseMs > c.retryMaxMs) throw new ConfigError([`--retry-base-ms (${c.retryBaseMs}) is above --retry-max-ms (${c.retryMaxMs})`]);
  return { ...c, url: c.url };
}
