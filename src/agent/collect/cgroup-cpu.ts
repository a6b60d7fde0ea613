import { parseMountinfo } from './parse-mountinfo.js';

/**
 * The CPU limit of the agent's cgroup, in cores: what a container may use,
 * which is what "how many CPUs" means inside one. cgroup v2 `cpu.max`
 * ("max 100000" or "<quota> <period>"), or v1 `cpu.cfs_quota_us` (-1 when
 * unlimited) over `cpu.cfs_period_us`. Undefined when unlimited or unknown.
 */
export function parseCpuMax(text: string): number | undefined {
  const [quota, period] = text.trim().split(/\s+/);
  if (quota === undefined || quota === 'max' || period === undefined) return undefined;
  const q = Number(quota);
  const p = Number(period);
  return q > 0 && p > 0 ? Math.round((q / p) * 100) / 100 : undefined;
}

export function parseCfsQuota(quotaText: string, periodText: string): number | undefined {
  const q = Number(quotaText.trim());
  const p = Number(periodText.trim());
  return q > 0 && p > 0 ? Math.round((q / p) * 100) / 100 : undefined;
}

/**
 * Where the agent's cgroup CPU files are, from /proc/self/cgroup: the v2
 * line `0::/path`, else the v1 controller line naming `cpu`. Paths are
 * relative to /sys/fs/cgroup (inside a cgroup namespace the path is `/`).
 * `ownMountinfo` (the agent's /proc/self/mountinfo) tells where that cgroup is
 * mounted: in a container on a cgroup v1 host, /proc/self/cgroup names the
 * host's path (`/docker/<id>`), while the runtime mounts that very cgroup at
 * /sys/fs/cgroup/cpu,cpuacct (mount root `/docker/<id>`), so the mount's root
 * is taken off the path.
 */
export function cgroupCpuFiles(procSelfCgroup: string, ownMountinfo = ''): { v2?: string; v1Quota?: string; v1Period?: string } {
  let v2: string | undefined;
  let v1: { dir: string; path: string } | undefined;
  for (const line of procSelfCgroup.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, id, controllers, p] = m as unknown as [string, string, string, string];
    if (id === '0' && controllers === '') v2 = p;
    else if (controllers.split(',').includes('cpu')) v1 = { dir: controllers, path: p };
  }
  const join = (...parts: string[]) => parts.join('/').replace(/\/+/g, '/');
  const mounts = parseMountinfo(ownMountinfo);
  /** `path` as seen under the mount at `mountPoint`: less the mount's root when the path lies within it. */
  const within = (mountPoint: string, path: string) => {
    const root = mounts.find((m) => m.mountPoint === mountPoint && m.fsType.startsWith('cgroup'))?.root;
    if (root === undefined || root === '/') return path;
    return path === root ? '/' : path.startsWith(`${root}/`) ? path.slice(root.length) : path;
  };
  if (v1) {
    const dir = join('fs/cgroup', v1.dir, within(`/sys/fs/cgroup/${v1.dir}`, v1.path));
    return { v1Quota: join(dir, 'cpu.cfs_quota_us'), v1Period: join(dir, 'cpu.cfs_period_us') };
  }
  if (v2 !== undefined) return { v2: join('fs/cgroup', within('/sys/fs/cgroup', v2), 'cpu.max') };
  return {};
}
