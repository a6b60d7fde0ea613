import { ConfigError, loadConfig, opt, type ConfigOf } from '../core/config.js';
import { LOG_LEVELS } from './logger.js';

/** Every option of `host-agent`: flag, environment variable, default. Read once by `loadAgentOptions`. */
export const agentOptions = {
  url: { ...opt.url({ flag: 'url', env: 'HOST_AGENT_URL', protocols: ['http:', 'https:'], doc: 'Base URL of the metrics service; reports go to <url>/api/v1/ingest.' }), required: true },
  token: opt.requiredString({ flag: 'token', env: 'HOST_AGENT_TOKEN', secret: true, doc: 'Tenant bearer token for ingest (metrics-service token create).' }),
  secret: opt.optionalString({ flag: 'secret', env: 'HOST_AGENT_SECRET', secret: true, doc: 'HMAC-SHA256 key; when set every report carries x-collector-signature. Must equal the service\'s --secret.' }),
  intervalMs: opt.int({ flag: 'interval-ms', env: 'HOST_AGENT_INTERVAL_MS', default: 10_000, min: 100, max: 3_600_000, doc: 'Collection interval.' }),
  spoolDir: opt.string({ flag: 'spool-dir', env: 'HOST_AGENT_SPOOL_DIR', default: './data/agent-spool', doc: 'Directory of the on-disk queue of unsent reports (and the agent id). Survives restarts.' }),
  spoolMaxBytes: opt.int({ flag: 'spool-max-bytes', env: 'HOST_AGENT_SPOOL_MAX_BYTES', default: 100 * 1024 * 1024, min: 64 * 1024, doc: 'Bound on the spool\'s total size; past it the oldest reports are dropped (and counted).' }),
  spoolMaxAgeMs: opt.int({ flag: 'spool-max-age-ms', env: 'HOST_AGENT_SPOOL_MAX_AGE_MS', default: 7 * 24 * 3_600_000, min: 1_000, doc: 'Spooled reports older than this are dropped (and counted).' }),
  config: opt.optionalString({ flag: 'config', env: 'HOST_AGENT_CONFIG', doc: 'JSON file: systemd units to watch ("services") and local threshold alert rules ("alerts").' }),
  hostname: opt.optionalString({ flag: 'hostname', env: 'HOST_AGENT_HOSTNAME', doc: 'Hostname to report instead of the system\'s.' }),
  agentId: opt.optionalString({ flag: 'agent-id', env: 'HOST_AGENT_ID', doc: 'Agent identifier; by default a random UUID created on first start and kept in the spool directory.' }),
  once: opt.bool({ flag: 'once', env: 'HOST_AGENT_ONCE', default: false, doc: 'Collect one report (over a 1 s window), send it with whatever is spooled, exit (status 75 if some stay spooled).' }),
  requestTimeoutMs: opt.int({ flag: 'request-timeout-ms', env: 'HOST_AGENT_REQUEST_TIMEOUT_MS', default: 10_000, min: 100, doc: 'Bound on one POST, connection included; past it the report is retried.' }),
  retryBaseMs: opt.int({ flag: 'retry-base-ms', env: 'HOST_AGENT_RETRY_BASE_MS', default: 1_000, min: 1, doc: 'First backoff ceiling; doubles per failed attempt (full jitter).' }),
  retryMaxMs: opt.int({ flag: 'retry-max-ms', env: 'HOST_AGENT_RETRY_MAX_MS', default: 60_000, min: 1, doc: 'Largest backoff ceiling between attempts.' }),
  serviceTimeoutMs: opt.int({ flag: 'service-timeout-ms', env: 'HOST_AGENT_SERVICE_TIMEOUT_MS', default: 5_000, min: 100, doc: 'Bound on the systemctl call that reads service states.' }),
  shutdownTimeoutMs: opt.int({ flag: 'shutdown-timeout-ms', env: 'HOST_AGENT_SHUTDOWN_TIMEOUT_MS', default: 5_000, min: 0, doc: 'On SIGTERM, how long a POST in flight may finish before it is aborted (the report stays spooled).' }),
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
