import { readFile, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import type { StatfsResult } from './disk-usage.js';
import { systemdServiceStates, type ServiceState } from './systemd-services.js';

/**
 * Everything the collector reads from the host. The real one reads /proc,
 * calls statfs and systemctl; tests point `procRoot` at fixture files and
 * substitute statfs and the service lookup.
 */
export interface HostSource {
  /** Reads a file under the proc root, e.g. `stat`, `meminfo`, `self/mountinfo`, `net/dev`. */
  readProc(name: string): Promise<string>;
  statfs(mountPoint: string): Promise<StatfsResult>;
  /** Whether a mount point is a regular file (a file bind mount), not a directory. */
  isFile(mountPoint: string): Promise<boolean>;
  serviceStates(names: string[]): Promise<ServiceState[]>;
}

export function linuxHostSource(opts: { procRoot?: string; serviceTimeoutMs?: number } = {}): HostSource {
  const root = opts.procRoot ?? '/proc';
  return {
    readProc: (name) => readFile(path.join(root, name), 'utf8'),
    statfs: (mountPoint) => statfs(mountPoint),
    isFile: async (mountPoint) => (await stat(mountPoint)).isFile(),
    serviceStates: (names) => systemdServiceStates(names, opts.serviceTimeoutMs ?? 5_000),
  };
}
