import type { AgentReport } from '../agent-report.js';
import type { Logger } from '../logger.js';
import { cgroupCpuFiles, parseCfsQuota, parseCpuMax } from './cgroup-cpu.js';
import { diskUsage, longestDiskMetricName, type DiskReport } from './disk-usage.js';
import { MAX_METRIC_NAME_LENGTH } from '../../metrics/domain/flatten.js';
import type { HostSource } from './host-source.js';
import { hwmonTemperatures } from './hwmon-temperatures.js';
import { networkReport } from './network-rates.js';
import { parseDiskstats, type DiskIo } from './parse-diskstats.js';
import { parseLoadavg } from './parse-loadavg.js';
import { parseMeminfo } from './parse-meminfo.js';
import { parseMountinfo } from './parse-mountinfo.js';
import { parseNetDev, type InterfaceCounters } from './parse-net-dev.js';
import { parsePressure, type Pressure } from './parse-pressure.js';
import { cpuSeconds, cpuUsage, parseProcStat, round2, type ProcStat } from './parse-proc-stat.js';
import { parseSockstat } from './parse-sockstat.js';
import { parseFileNr, parseUptime } from './parse-system-files.js';
import { bindMountCandidates, selectFilesystems } from './select-filesystems.js';

export interface CollectorOptions {
  source: HostSource;
  agentId: string;
  hostname: string;
  /** systemd units whose state goes into `services`. */
  services: string[];
  /** Also send CPU time per mode for every core (8 metric names per core; off by default so big hosts stay within the service's per-host name limit). */
  perCoreCpuModes?: boolean;
  log: Logger;
}

export interface Collector {
  /** Reads the counters that CPU usage and network rates are computed against; call once before `collect`. */
  prime(now: number): Promise<void>;
  /** A report (without alerts) for `now`, with rates over the time since the previous call. */
  collect(now: number): Promise<Omit<AgentReport, 'alerts'>>;
}

const PRESSURE_RESOURCES = ['cpu', 'memory', 'io'] as const;

/**
 * Builds reports from the host. CPU usage and network rates are deltas, so
 * the collector keeps the previous /proc/stat and /proc/net/dev readings;
 * every other counter (CPU seconds, disk I/O, forks, stall time) is sent as
 * the kernel's cumulative value and turned into a rate by whoever reads it.
 * The core files (stat, meminfo, loadavg, net/dev, mountinfo) must be
 * readable; a file that only some kernels have (pressure, diskstats on a
 * container, hwmon) leaves its section out rather than failing the report,
 * as does a filesystem whose statfs fails (unmounted meanwhile, permission).
 */
export function createCollector(opts: CollectorOptions): Collector {
  const { source } = opts;
  let prevStat: ProcStat | undefined;
  let prevNet: Map<string, InterfaceCounters> | undefined;
  let prevAt = 0;

  async function optional<T>(what: string, read: () => Promise<T>): Promise<T | undefined> {
    try {
      return await read();
    } catch (e: unknown) {
      opts.log.debug('optional source unreadable, left out of this report', { source: what, error: String(e) });
      return undefined;
    }
  }

  async function disks(): Promise<DiskReport[]> {
    const all = parseMountinfo(await source.readProc(source.mountinfoName));
    const fileMounts = new Set<string>();
    for (const m of bindMountCandidates(all)) {
      if (await source.isFile(m.mountPoint).catch(() => true)) fileMounts.add(m.mountPoint);
    }
    const mounts = selectFilesystems(all, fileMounts);
    const out: DiskReport[] = [];
    for (const m of mounts) {
      try {
        const d = diskUsage(m.mountPoint, await source.statfs(m.mountPoint));
        // A mount point so long that its metric names would pass the service's limit would fail the whole report.
        if (d && longestDiskMetricName(d.path) > MAX_METRIC_NAME_LENGTH) {
          opts.log.debug('mount point too long for its metric names, filesystem left out', { path: d.path, limit: MAX_METRIC_NAME_LENGTH });
        } else if (d) out.push(d);
      } catch (e: unknown) {
        opts.log.debug('statfs failed, filesystem left out of this report', { path: m.mountPoint, error: String(e) });
      }
    }
    return out;
  }

  async function cpuLimitCores(): Promise<number | undefined> {
    const files = cgroupCpuFiles(await source.readOwn('proc/self/cgroup'), await source.readOwn('proc/self/mountinfo').catch(() => ''));
    if (files.v2) return parseCpuMax(await source.readOwn(`sys/${files.v2}`));
    if (files.v1Quota && files.v1Period) return parseCfsQuota(await source.readOwn(`sys/${files.v1Quota}`), await source.readOwn(`sys/${files.v1Period}`));
    return undefined;
  }

  async function pressure(): Promise<Record<string, Pressure> | undefined> {
    const out: Record<string, Pressure> = {};
    for (const r of PRESSURE_RESOURCES) {
      const p = await optional(`pressure/${r}`, async () => parsePressure(await source.readProc(`pressure/${r}`)));
      if (p && (p.some || p.full)) out[r] = p;
    }
    return Object.keys(out).length ? out : undefined;
  }

  async function sockets(): Promise<Record<string, number | Record<string, number>> | undefined> {
    const v4 = await optional('net/sockstat', async () => parseSockstat(await source.readProc('net/sockstat')));
    if (!v4) return undefined;
    const v6 = (await optional('net/sockstat6', async () => parseSockstat(await source.readProc('net/sockstat6')))) ?? {};
    const { sockets: total, ...protocols } = { ...v4, ...v6 };
    return { ...(total?.['used'] !== undefined ? { used: total['used'] } : {}), ...protocols };
  }

  function cpuSection(stat: ProcStat, usage: { usage: number; perCore: number[] }, limit: number | undefined, loadAverage: [number, number, number]): AgentReport['cpu'] {
    const cpu: AgentReport['cpu'] = { ...usage, loadAverage, count: stat.cores.size, seconds: cpuSeconds(stat.overall) };
    if (limit !== undefined) cpu.limitCores = limit;
    if (opts.perCoreCpuModes) {
      cpu.cores = Object.fromEntries([...stat.cores].sort(([a], [b]) => a - b).map(([id, t]) => [String(id), { seconds: cpuSeconds(t) }]));
    }
    return cpu;
  }

  return {
    async prime(now) {
      prevStat = parseProcStat(await source.readProc('stat'));
      prevNet = parseNetDev(await source.readProc('net/dev'));
      prevAt = now;
    },
    async collect(now) {
      const stat = parseProcStat(await source.readProc('stat'));
      const net = parseNetDev(await source.readProc('net/dev'));
      const seconds = (now - prevAt) / 1000;
      const usage = prevStat ? cpuUsage(prevStat, stat) : { usage: 0, perCore: [] };
      const network = networkReport(prevNet, net, seconds);
      prevStat = stat;
      prevNet = net;
      prevAt = now;
      const states = await source.serviceStates(opts.services);
      const diskio = await optional('diskstats', async () => parseDiskstats(await source.readProc('diskstats')));
      const uptime = await optional('uptime', async () => parseUptime(await source.readProc('uptime')));
      const fds = await optional('sys/fs/file-nr', async () => parseFileNr(await source.readProc('sys/fs/file-nr')));
      const c = stat.counters;
      const system: AgentReport['system'] = {
        ...(uptime !== undefined ? { uptimeSeconds: round2(uptime) } : {}),
        ...(c.bootTime !== undefined ? { bootTime: c.bootTime } : {}),
        processes: {
          ...(c.running !== undefined ? { running: c.running } : {}),
          ...(c.blocked !== undefined ? { blocked: c.blocked } : {}),
          ...(c.forks !== undefined ? { forks: c.forks } : {}),
        },
        ...(c.contextSwitches !== undefined ? { contextSwitches: c.contextSwitches } : {}),
        ...(c.interrupts !== undefined ? { interrupts: c.interrupts } : {}),
        ...(fds ? { fds } : {}),
      };
      const socketCounts = await sockets();
      if (socketCounts) system.sockets = socketCounts;
      const psi = await pressure();
      const sensors = await optional('hwmon', () => hwmonTemperatures(source));
      return {
        agentId: opts.agentId,
        hostname: opts.hostname,
        platform: 'linux',
        ts: now,
        cpu: cpuSection(stat, usage, await optional('cgroup cpu limit', cpuLimitCores), parseLoadavg(await source.readProc('loadavg'))),
        memory: parseMeminfo(await source.readProc('meminfo')),
        disks: await disks(),
        ...(diskio?.size ? { diskio: Object.fromEntries([...diskio].sort(([a], [b]) => (a < b ? -1 : 1))) as Record<string, DiskIo> } : {}),
        network,
        system,
        ...(psi ? { pressure: psi } : {}),
        ...(sensors && Object.keys(sensors).length ? { sensors } : {}),
        services: states.map((s) => ({ name: s.name, status: s.state, active: s.state === 'active' ? 1 : 0 })),
      };
    },
  };
}
