import type { AgentReport } from '../agent-report.js';
import type { Logger } from '../logger.js';
import { diskUsage, type DiskReport } from './disk-usage.js';
import type { HostSource } from './host-source.js';
import { networkReport } from './network-rates.js';
import { parseLoadavg } from './parse-loadavg.js';
import { parseMeminfo } from './parse-meminfo.js';
import { parseMountinfo } from './parse-mountinfo.js';
import { parseNetDev, type InterfaceCounters } from './parse-net-dev.js';
import { cpuUsage, parseProcStat, type ProcStat } from './parse-proc-stat.js';
import { bindMountCandidates, selectFilesystems } from './select-filesystems.js';

export interface CollectorOptions {
  source: HostSource;
  agentId: string;
  hostname: string;
  /** systemd units whose state goes into `services`. */
  services: string[];
  log: Logger;
}

export interface Collector {
  /** Reads the counters that CPU usage and network rates are computed against; call once before `collect`. */
  prime(now: number): Promise<void>;
  /** A report (without alerts) for `now`, with rates over the time since the previous call. */
  collect(now: number): Promise<Omit<AgentReport, 'alerts'>>;
}

/**
 * Builds reports from the host. CPU usage and network rates are deltas, so
 * the collector keeps the previous /proc/stat and /proc/net/dev readings.
 * A filesystem whose statfs fails (unmounted meanwhile, permission) is left
 * out of this report rather than failing the whole report.
 */
export function createCollector(opts: CollectorOptions): Collector {
  const { source } = opts;
  let prevStat: ProcStat | undefined;
  let prevNet: Map<string, InterfaceCounters> | undefined;
  let prevAt = 0;

  async function disks(): Promise<DiskReport[]> {
    const all = parseMountinfo(await source.readProc('self/mountinfo'));
    const fileMounts = new Set<string>();
    for (const m of bindMountCandidates(all)) {
      if (await source.isFile(m.mountPoint).catch(() => true)) fileMounts.add(m.mountPoint);
    }
    const mounts = selectFilesystems(all, fileMounts);
    const out: DiskReport[] = [];
    for (const m of mounts) {
      try {
        const d = diskUsage(m.mountPoint, await source.statfs(m.mountPoint));
        if (d) out.push(d);
      } catch (e: unknown) {
        opts.log.debug('statfs failed, filesystem left out of this report', { path: m.mountPoint, error: String(e) });
      }
    }
    return out;
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
      const cpu = prevStat ? cpuUsage(prevStat, stat) : { usage: 0, perCore: [] };
      const network = networkReport(prevNet, net, seconds);
      prevStat = stat;
      prevNet = net;
      prevAt = now;
      const states = await source.serviceStates(opts.services);
      return {
        agentId: opts.agentId,
        hostname: opts.hostname,
        platform: 'linux',
        ts: now,
        cpu: { ...cpu, loadAverage: parseLoadavg(await source.readProc('loadavg')) },
        memory: parseMeminfo(await source.readProc('meminfo')),
        disks: await disks(),
        network,
        services: states.map((s) => ({ name: s.name, status: s.state, active: s.state === 'active' ? 1 : 0 })),
      };
    },
  };
}
