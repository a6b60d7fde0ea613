import { readFileSync } from 'node:fs';
import { readdir, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import type { StatfsResult } from './disk-usage.js';
import { systemdServiceStates, type ServiceState } from './systemd-services.js';

/**
 * Everything the collector reads from the host. The real one reads /proc and
 * /sys (or the host's, mounted elsewhere, in container mode), calls statfs and
 * systemctl; tests point it at fixture trees or substitute it whole.
 */
export interface HostSource {
  /** Reads a file under the proc root, e.g. `stat`, `meminfo`, `self/mountinfo`, `net/dev`. */
  readProc(name: string): Promise<string>;
  /** Reads a file under the sys root, e.g. `class/hwmon/hwmon0/temp1_input`. */
  readSys(name: string): Promise<string>;
  /** Entries of a directory under the sys root (`[]` when it does not exist). */
  listSys(name: string): Promise<string[]>;
  /** Reads a file of the agent's own view (`proc/self/cgroup`, `sys/fs/cgroup/...`): its cgroup limits, never the host's roots. */
  readOwn(name: string): Promise<string>;
  /** The mount table of the host: /proc/self/mountinfo, or PID 1's when the host's /proc is mounted elsewhere. */
  mountinfoName: string;
  /** statfs of a mount point of the host (under the root-fs prefix in container mode). */
  statfs(mountPoint: string): Promise<StatfsResult>;
  /** Whether a mount point is a regular file (a file bind mount), not a directory. */
  isFile(mountPoint: string): Promise<boolean>;
  serviceStates(names: string[]): Promise<ServiceState[]>;
}

export interface HostRoots {
  /** Where the host's /proc is (default /proc). */
  procRoot?: string;
  /** Where the host's /sys is (default /sys). */
  sysRoot?: string;
  /** Where the host's / is, for statfs of its mount points (default /). */
  rootFs?: string;
  /** Root of the agent's own /proc and /sys, for its cgroup (default /; tests point it at fixtures). */
  ownRoot?: string;
  serviceTimeoutMs?: number;
}

export function linuxHostSource(opts: HostRoots = {}): HostSource {
  const procRoot = opts.procRoot ?? '/proc';
  const sysRoot = opts.sysRoot ?? '/sys';
  const rootFs = opts.rootFs ?? '/';
  const onHost = (mountPoint: string) => path.join(rootFs, mountPoint);
  // Pseudo-files are read synchronously: the kernel answers from memory in microseconds, and readFileSync reads
  // through one small native buffer, where fs.promises.readFile gives every file whose stat size is 0 (all of
  // /proc) a fresh 64 KiB Buffer: 20 of those per report left the native heap megabytes larger.
  return {
    readProc: async (name) => readFileSync(path.join(procRoot, name), 'utf8'),
    readSys: async (name) => readFileSync(path.join(sysRoot, name), 'utf8'),
    listSys: (name) => readdir(path.join(sysRoot, name)).catch(() => []),
    readOwn: async (name) => readFileSync(path.join(opts.ownRoot ?? '/', name), 'utf8'),
    // Seen from a container, "self" is the agent's own mount namespace; PID 1's table is the host's.
    mountinfoName: path.resolve(procRoot) === '/proc' ? 'self/mountinfo' : '1/mountinfo',
    statfs: (mountPoint) => statfs(onHost(mountPoint)),
    isFile: async (mountPoint) => (await stat(onHost(mountPoint))).isFile(),
    serviceStates: (names) => systemdServiceStates(names, opts.serviceTimeoutMs ?? 5_000),
  };
}
