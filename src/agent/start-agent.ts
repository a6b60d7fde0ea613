import { readdir } from 'node:fs/promises';
import os from 'node:os';
import { agentOptions, type AgentOptions } from './agent-options.js';
import { loadAgentConfigFile, type AgentConfigFile } from './agent-config-file.js';
import { machineAgentId } from './agent-id.js';
import { compileRules } from './alerts/threshold-alerts.js';
import { reportBuilder } from './build-report.js';
import { createCollector, type Collector } from './collect/collector.js';
import { linuxHostSource, type HostSource } from './collect/host-source.js';
import { destinationSpoolDir, destinationUrl, otherSpoolDirs } from './delivery/destination.js';
import { drainSpool, startDeliveryLoop, type DeliveryOptions, type DrainSummary } from './delivery/delivery-loop.js';
import { sendBatch } from './delivery/post-batch.js';
import { Spool } from './delivery/spool.js';
import { jsonLogger, type Logger } from './logger.js';
import { agentIdProblem, hostnameProblem, reportableHostname } from './report-identity.js';

/** Options of an embedded or CLI agent: the CLI options, plus what a host program may substitute. */
export type AgentConfig = Partial<AgentOptions> & Pick<AgentOptions, 'url' | 'token'> & {
  /** Alert rules and services given directly instead of through a `config` file. */
  rules?: AgentConfigFile;
  log?: Logger;
  source?: HostSource;
};

export interface AgentHandle {
  readonly agentId: string;
  readonly spool: Spool;
  /** Stops collecting, lets the POST in flight finish (bounded), leaves the rest spooled. */
  stop(): Promise<void>;
}

const DEFAULTED = [
  'intervalMs', 'spoolDir', 'spoolMaxBytes', 'spoolMinFreeBytes', 'spoolMaxAgeMs', 'requestTimeoutMs', 'retryBaseMs', 'retryMaxMs', 'serviceTimeoutMs', 'shutdownTimeoutMs',
  'machineIdFile', 'procRoot', 'sysRoot', 'rootFs', 'batchMaxReports', 'perCoreCpuModes',
] as const;

/** An embedded agent gets the CLI's defaults for whatever it leaves out. */
const DEFAULTS = Object.fromEntries(
  DEFAULTED.map((k) => [k, agentOptions[k].default]),
) as Pick<AgentOptions, (typeof DEFAULTED)[number]>;

/** Uncompressed bytes per batch: well under the service's default bulk limit (32 MiB); a smaller limit is met by halving on 413. */
const BATCH_MAX_BYTES = 8 * 1024 * 1024;

interface Prepared {
  c: AgentConfig & typeof DEFAULTS;
  log: Logger;
  spool: Spool;
  agentId: string;
  collector: Collector;
  report: (now: number) => Promise<Buffer>;
  delivery: DeliveryOptions;
}

async function prepare(config: AgentConfig): Promise<Prepared> {
  const c = { ...DEFAULTS, ...stripUndefined(config) };
  const log = config.log ?? jsonLogger(config.logLevel ?? 'info');
  // The CLI checks these with its options; an embedded agent's are checked here, before anything is spooled.
  const idProblem = config.agentId === undefined ? undefined : agentIdProblem(config.agentId);
  const nameProblem = config.hostname === undefined ? undefined : hostnameProblem(config.hostname);
  if (idProblem || nameProblem) throw new Error([idProblem && `agentId ${idProblem}`, nameProblem && `hostname ${nameProblem}`].filter(Boolean).join('; '));
  const file = config.rules ?? (config.config ? await loadAgentConfigFile(config.config) : { services: [], alerts: [] });
  const rules = compileRules(file.alerts);
  const spoolDir = await destinationSpoolDir(c.spoolDir, c.url, c.token, (e) => log.warn('the spool directory could not be labelled with its URL (destination.json); a later start labels it', {
    error: e instanceof Error ? e.message : String(e),
  }));
  await warnAboutUnaddressedReports(c.spoolDir, log);
  await warnAboutOtherSpools(c.spoolDir, spoolDir, log);
  const spool = await Spool.open({ dir: spoolDir, maxBytes: c.spoolMaxBytes, maxAgeMs: c.spoolMaxAgeMs, minFreeBytes: c.spoolMinFreeBytes, log });
  const agentId = config.agentId ?? (await machineAgentId(c.machineIdFile, c.spoolDir));
  const collector = createCollector({
    source: config.source ?? linuxHostSource({ procRoot: c.procRoot, sysRoot: c.sysRoot, rootFs: c.rootFs, serviceTimeoutMs: c.serviceTimeoutMs }),
    agentId, hostname: config.hostname ?? systemHostname(log), services: file.services, perCoreCpuModes: c.perCoreCpuModes, log,
  });
  const build = reportBuilder(collector, rules);
  const report = async (now: number) => Buffer.from(JSON.stringify(await build(now)));
  const target = { url: c.url, token: c.token, secret: c.secret, timeoutMs: c.requestTimeoutMs };
  const delivery: DeliveryOptions = {
    spool, log, retryBaseMs: c.retryBaseMs, retryMaxMs: c.retryMaxMs, batchMaxReports: c.batchMaxReports, batchMaxBytes: BATCH_MAX_BYTES,
    send: (batch, signal) => sendBatch(target, batch, signal),
  };
  return { c, log, spool, agentId, collector, report, delivery };
}

/**
 * Agents before the per-destination spools kept reports directly in the state directory, with nothing saying where
 * they were going: they are never sent (they could belong to another service or tenant), and the operator is told.
 */
async function warnAboutUnaddressedReports(stateDir: string, log: Logger): Promise<void> {
  const left = (await readdir(stateDir)).filter((n) => /^r-\d+-\d+\.json$/.test(n)).length;
  if (left) log.warn('reports spooled by an older agent for an unknown destination are left unsent', { dir: stateDir, reports: left });
}

/**
 * Nothing sends another destination's reports (they may belong to another service or tenant), and nothing here may
 * remove them either: that spool may be another agent's, live or to be started again, with its own age bound. So the
 * operator is told what each one holds, to remove it by hand if no agent will ever send it.
 */
async function warnAboutOtherSpools(stateDir: string, current: string, log: Logger): Promise<void> {
  for (const dir of await otherSpoolDirs(stateDir, current)) {
    try {
      const { reports, bytes, oldestAgeMs } = Spool.survey(dir, Date.now());
      if (!reports) continue;
      const url = await destinationUrl(dir);
      log.warn('a spool of another destination (an earlier --url or --token, or another agent) holds reports only an agent for that destination sends', {
        dir, url, reports, bytes, oldestAgeMs,
      });
    } catch (e: unknown) {
      log.warn('could not read the spool of another destination', { dir, error: String(e) });
    }
  }
}

/** The system's hostname, made acceptable to the service if it is not (and the operator told: --hostname sets one). */
function systemHostname(log: Logger): string {
  const system = os.hostname();
  const hostname = reportableHostname(system);
  if (hostname !== system) log.warn('the system hostname is not one the metrics service accepts; reporting it cleaned up (--hostname sets one)', { system, hostname });
  return hostname;
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Starts the agent: a collection loop that appends a report to the spool every
 * interval, and a delivery loop that sends the spool in order. The two share
 * only the spool, so a slow or absent service never delays a collection.
 * Ticks follow a fixed schedule (start + k * interval) on the monotonic clock,
 * so a step of the system clock (NTP, a VM resumed) neither stops nor floods
 * collection; a tick that finds the previous collection still running is
 * skipped, not queued. Reports carry the wall-clock time.
 */
export async function startAgent(config: AgentConfig): Promise<AgentHandle> {
  const { c, log, spool, agentId, collector, report, delivery } = await prepare(config);
  const loop = startDeliveryLoop(delivery);
  const startedMono = performance.now();
  await collector.prime(Date.now());
  log.info('host agent started', { agentId, url: c.url, intervalMs: c.intervalMs, spoolDir: spool.dir, spooled: spool.length, signed: Boolean(c.secret) });

  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let collecting: Promise<void> = Promise.resolve();
  let tick = 0;

  const collectOnce = async () => {
    const now = Date.now();
    try {
      const body = await report(now);
      await spool.append(body, now);
      log.debug('report collected', { reportTs: now, spooled: spool.length });
      loop.notify();
    } catch (e: unknown) {
      log.error('collection failed, no report for this interval', { error: e instanceof Error ? e.message : String(e) });
    }
  };
  const schedule = () => {
    if (stopped) return;
    tick = Math.max(tick + 1, Math.ceil((performance.now() - startedMono) / c.intervalMs));
    timer = setTimeout(() => {
      collecting = collectOnce();
      void collecting.then(schedule);
    }, startedMono + tick * c.intervalMs - performance.now());
  };
  schedule();

  return {
    agentId,
    spool,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      await collecting;
      await loop.stop(c.shutdownTimeoutMs);
      await spool.writeHeld();
      if (spool.inMemory) log.error('stopping with reports the spool could not take (its disk full?): they are lost', { lost: spool.inMemory });
      log.info('host agent stopped', { spooled: spool.length });
    },
  };
}

/**
 * `--once`: one report over a short sampling window (CPU usage and network
 * rates need two readings), appended to the spool, then the spool is sent.
 * Returns what the drain did (what was not sent stays spooled), the agent id, and how many unsent reports could not
 * be written to the spool (a full disk) and so are lost.
 */
export async function runOnce(config: AgentConfig, windowMs = 1_000): Promise<DrainSummary & { agentId: string; lost: number }> {
  const { collector, report, spool, delivery, agentId } = await prepare(config);
  await collector.prime(Date.now());
  await new Promise((r) => setTimeout(r, windowMs));
  const now = Date.now();
  await spool.append(await report(now), now);
  const summary = await drainSpool(delivery);
  await spool.writeHeld();
  return { ...summary, agentId, lost: spool.inMemory };
}
