import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { Value } from 'typebox/value';
import type { AgentReport } from '../../src/agent/agent-report.js';
import { machineAgentId, appSpecificMachineId } from '../../src/agent/agent-id.js';
import { createCollector } from '../../src/agent/collect/collector.js';
import { linuxHostSource, type HostRoots } from '../../src/agent/collect/host-source.js';
import { cgroupCpuFiles, parseCfsQuota, parseCpuMax } from '../../src/agent/collect/cgroup-cpu.js';
import { isReportedBlockDevice } from '../../src/agent/collect/parse-diskstats.js';
import { parsePressure } from '../../src/agent/collect/parse-pressure.js';
import { parseSockstat } from '../../src/agent/collect/parse-sockstat.js';
import { loadAgentOptions } from '../../src/agent/agent-options.js';
import { flattenReport } from '../../src/metrics/domain/flatten.js';
import { ReportSchema } from '../../src/metrics/domain/report-schema.js';
import { captureLog } from './agent-harness.js';
import { FIXTURES } from './fixtures.js';

const HOSTS = path.join(FIXTURES, 'hosts');

/** A report of a fixture machine: its /proc and /sys trees, statfs answering 40% used with inodes. */
async function reportOf(roots: HostRoots, perCoreCpuModes = false): Promise<AgentReport> {
  const source = {
    ...linuxHostSource(roots),
    statfs: async () => ({ bsize: 4096, blocks: 1000, bfree: 600, bavail: 550, files: 2000, ffree: 1500 }),
    isFile: async () => false,
    serviceStates: async () => [],
  };
  const collector = createCollector({ source, agentId: 'fixture', hostname: 'h', services: [], perCoreCpuModes, log: captureLog().log });
  await collector.prime(0);
  const r = { ...(await collector.collect(10_000)), alerts: [] };
  assert.ok(Value.Check(ReportSchema, r), 'the report is valid for the service');
  return r;
}

function host(name: string): HostRoots {
  const root = path.join(HOSTS, name);
  return { procRoot: path.join(root, 'proc'), sysRoot: path.join(root, 'sys'), ownRoot: root };
}

test('kernel 3.10 (CentOS 7): 14-field diskstats, no PSI, swap, sockets, fds, uptime, processes', async () => {
  const r = await reportOf(host('kernel-3.10-centos7'));
  assert.deepEqual(Object.keys(r.diskio ?? {}), ['dm-0', 'dm-1', 'sda', 'sr0'], 'whole disks and device-mapper; no partitions');
  assert.deepEqual(r.diskio!['sda'], {
    reads: 118734, readBytes: 5474918 * 512, readSeconds: 1247.573, writes: 183916, writeBytes: 9287360 * 512, writeSeconds: 2884.261,
    inProgress: 0, ioSeconds: 1205.614, queueSeconds: 4131.558,
  });
  assert.equal(r.pressure, undefined, 'no /proc/pressure before 4.20: section absent, report still made');
  assert.deepEqual(r.memory.swap, { total: 2097148 * 1024, used: (2097148 - 2061308) * 1024, free: 2061308 * 1024, cached: 1096 * 1024, percent: 1.71 });
  assert.deepEqual(r.system, {
    uptimeSeconds: 226255.63, bootTime: 1062191376, processes: { running: 1, blocked: 0, forks: 2915 }, contextSwitches: 1990473, interrupts: 114930548,
    fds: { allocated: 1632, max: 379532 },
    sockets: { used: 280, tcp: { inuse: 9, orphan: 0, timeWait: 4, alloc: 11, memPages: 2 }, udp: { inuse: 5, memPages: 3 }, udplite: { inuse: 0 }, raw: { inuse: 0 }, frag: { inuse: 0, memory: 0 } },
  });
  assert.deepEqual(r.cpu.seconds, { user: 22.55, nice: 0.34, system: 22.9, idle: 226255.63, iowait: 62.9, irq: 1.27, softirq: 4.56, steal: 0 });
  assert.equal(r.cpu.count, 2);
  assert.equal(r.cpu.limitCores, undefined);
  assert.equal(r.sensors, undefined);
  assert.deepEqual(Object.keys(r.network), ['eth0']);
  assert.deepEqual([r.network['eth0']!.rxErrors, r.network['eth0']!.rxDropped, r.network['eth0']!.txDropped], [3, 17, 2]);
  assert.deepEqual([r.disks[0]!.inodesTotal, r.disks[0]!.inodesUsed, r.disks[0]!.inodesFree, r.disks[0]!.inodesPercent], [2000, 500, 1500, 25]);
});

test('kernel 5.4: 18-field diskstats (discards), PSI without cpu "full", IPv6 sockets, hwmon labels, battery without temperatures', async () => {
  const r = await reportOf(host('kernel-5.4-ubuntu'));
  assert.deepEqual(Object.keys(r.diskio ?? {}), ['nvme0n1', 'sda']);
  assert.equal(r.diskio!['nvme0n1']!.discards, 12345);
  assert.equal(r.diskio!['nvme0n1']!.discardBytes, 2469120 * 512);
  assert.equal(r.diskio!['nvme0n1']!.flushes, undefined, 'flush counters came in 5.5');
  assert.deepEqual(r.pressure, {
    cpu: { some: { avg10: 2.04, avg60: 1.52, avg300: 0.98, totalSeconds: 123.456789 } },
    memory: { some: { avg10: 0, avg60: 0.1, avg300: 0.05, totalSeconds: 4.56789 }, full: { avg10: 0, avg60: 0.02, avg300: 0.01, totalSeconds: 1.234567 } },
    io: { some: { avg10: 5.5, avg60: 3.25, avg300: 1.1, totalSeconds: 987.654321 }, full: { avg10: 4, avg60: 2.5, avg300: 0.9, totalSeconds: 876.54321 } },
  });
  assert.deepEqual(r.sensors, { acpitz: { temp1: 27.8 }, coretemp: { package_id_0: 52, core_0: 49, core_1: 51, core_2: 50, core_3: 53 } });
  assert.deepEqual((r.system.sockets as Record<string, Record<string, number>>)['tcp6'], { inuse: 12 });
  assert.equal(r.system.fds?.max, Number("9223372036854775807"), "LONG_MAX (no limit) arrives as the nearest double");
  assert.deepEqual(Object.keys(r.network), ['docker0', 'enp3s0', 'wlp2s0']);
  const m = flattenReport(r);
  for (const name of ['pressure.io.full.totalSeconds', 'sensors.coretemp.core_3', 'diskio.sda.ioSeconds', 'system.sockets.tcp.timeWait', 'memory.swap.used', 'cpu.seconds.iowait', 'system.processes.forks', 'system.uptimeSeconds']) {
    assert.ok(m.has(name), `${name} is a metric`);
  }
});

test('kernel 6.8 storage server: 17 of 34 block devices, 11 interfaces, 16 cores, 20-field diskstats, duplicate hwmon chip names; within the default 1000 names per host', async () => {
  const r = await reportOf(host('kernel-6.8-storage'));
  assert.deepEqual(Object.keys(r.diskio ?? {}), ['dm-0', 'dm-1', 'dm-2', 'md0', 'md1', 'nvme0n1', 'nvme1n1', 'nvme2n1', 'nvme3n1', 'sda', 'sdb', 'sdc', 'sdd', 'sde', 'sdf', 'sdg', 'sdh']);
  assert.ok(Object.values(r.diskio!).every((d) => typeof d.flushes === 'number' && typeof d.discards === 'number'));
  assert.equal(Object.keys(r.network).length, 11);
  assert.ok(!Object.keys(r.network).some((n) => n === 'lo' || n.startsWith('veth')));
  assert.equal(r.cpu.count, 16);
  assert.deepEqual(r.sensors, {
    nvme: { composite: 38.9, sensor_1: 45.9 }, 'nvme-2': { composite: 41.9 }, k10temp: { tctl: 61.3, tccd1: 48.5, tccd2: 47.3 }, drivetemp: { temp1: 34 },
  });
  assert.equal(r.memory.swap, undefined, 'no swap configured: no swap metrics');
  assert.deepEqual(r.pressure?.['cpu']?.full, { avg10: 0, avg60: 0, avg300: 0, totalSeconds: 0 });
  const names = flattenReport(r).size;
  assert.ok(names > 400 && names < 500, `about 460 names, as docs/host-agent.md says: ${names}`);
  assert.ok(names < 1000, `${names} metric names`);
  const withCores = await reportOf(host('kernel-6.8-storage'), true);
  assert.equal(flattenReport(withCores).size, names + 16 * 8, 'per-core modes: 8 names per core, only when asked');
  assert.equal(withCores.cpu.cores?.['15']?.seconds.user !== undefined, true);
});

test('container mode: the host\'s /proc and /sys mounted elsewhere, the host\'s mount table (PID 1), the agent\'s own cgroup CPU limit', async () => {
  const root = path.join(HOSTS, 'container-6.1');
  const o = loadAgentOptions(['--url', 'http://m:8080', '--token', 't', '--proc-root', `${root}/host/proc`, '--sys-root', `${root}/host/sys`, '--root-fs', '/host/root'], {});
  assert.deepEqual([o.procRoot, o.sysRoot, o.rootFs], [`${root}/host/proc`, `${root}/host/sys`, '/host/root']);
  const source = linuxHostSource({ procRoot: o.procRoot, sysRoot: o.sysRoot, rootFs: o.rootFs, ownRoot: root });
  assert.equal(source.mountinfoName, '1/mountinfo');
  assert.equal(linuxHostSource({}).mountinfoName, 'self/mountinfo');
  const statfsOf: string[] = [];
  const collector = createCollector({
    source: { ...source, statfs: async (p) => { statfsOf.push(p); return { bsize: 4096, blocks: 100, bfree: 50, bavail: 50 }; }, isFile: async () => false, serviceStates: async () => [] },
    agentId: 'c', hostname: 'h', services: [], log: captureLog().log,
  });
  await collector.prime(0);
  const r = await collector.collect(10_000);
  assert.deepEqual(r.disks.map((d) => d.path), ['/', '/var/lib/docker'], 'the host\'s filesystems, not the container overlay');
  assert.deepEqual(statfsOf, ['/', '/var/lib/docker'], 'statfs is asked for host paths; the source adds the root-fs prefix');
  assert.equal(r.cpu.count, 4);
  assert.equal(r.cpu.limitCores, 2.5);
  assert.deepEqual(Object.keys(r.diskio ?? {}), ['xvda', 'xvdb']);
  assert.equal(r.diskio!['xvda']!.flushes, 456789);
  assert.deepEqual(Object.keys(r.network), ['docker0', 'eth0']);
  const id = await machineAgentId(`${root}/host/etc/machine-id`, '/nonexistent-state-dir');
  assert.equal(id, appSpecificMachineId('4c4c4544003957108052b4c04f4e4c32'));
});

test('cgroup CPU limits: v2 cpu.max, v1 CFS quota, unlimited', () => {
  assert.equal(parseCpuMax('250000 100000\n'), 2.5);
  assert.equal(parseCpuMax('max 100000\n'), undefined);
  assert.equal(parseCfsQuota('-1\n', '100000\n'), undefined);
  assert.equal(parseCfsQuota('50000\n', '100000\n'), 0.5);
  assert.deepEqual(cgroupCpuFiles('0::/system.slice/host-agent.service\n'), { v2: 'fs/cgroup/system.slice/host-agent.service/cpu.max' });
  assert.deepEqual(cgroupCpuFiles('4:memory:/x\n2:cpu,cpuacct:/docker/abc\n0::/\n'), {
    v1Quota: 'fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us', v1Period: 'fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us',
  });
  assert.deepEqual(cgroupCpuFiles(''), {});
  // In a container on a cgroup v1 host: the cgroup is named by its host path, and mounted with that path as its root.
  const dockerV1 = '36 25 0:31 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime master:13 - cgroup cgroup rw,cpu,cpuacct\n'
    + '37 25 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n';
  assert.deepEqual(cgroupCpuFiles('4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n', dockerV1), {
    v1Quota: 'fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us', v1Period: 'fs/cgroup/cpu,cpuacct/cpu.cfs_period_us',
  });
  // On the host the mount's root is `/`: the path is taken as it is.
  const hostV1 = '36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n';
  assert.deepEqual(cgroupCpuFiles('2:cpu,cpuacct:/system.slice/host-agent.service\n', hostV1), {
    v1Quota: 'fs/cgroup/cpu,cpuacct/system.slice/host-agent.service/cpu.cfs_quota_us', v1Period: 'fs/cgroup/cpu,cpuacct/system.slice/host-agent.service/cpu.cfs_period_us',
  });
  // cgroup v2 with the host's namespace, mounted with the container's cgroup as root.
  assert.deepEqual(cgroupCpuFiles('0::/docker/abc\n', '30 25 0:27 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n'), { v2: 'fs/cgroup/cpu.max' });
});

test('parsers skip what they cannot read instead of inventing numbers', () => {
  assert.deepEqual(parsePressure('some avg10=x\ngarbage\n'), {});
  assert.deepEqual(parseSockstat('TCP: inuse 3 orphan\nnonsense\n'), { tcp: { inuse: 3 } });
  for (const d of ['sda', 'vdb', 'xvdc', 'nvme0n1', 'dm-3', 'md127', 'mmcblk0', 'zd0', 'nbd0', 'rbd12']) assert.equal(isReportedBlockDevice(d), true, d);
  for (const d of ['sda1', 'vdb2', 'nvme0n1p3', 'mmcblk0p1', 'zd0p1', 'zd16p2', 'md127p1', 'nbd0p1', 'rbd12p3', 'loop7', 'ram0', 'zram0', 'fd0']) assert.equal(isReportedBlockDevice(d), false, d);
});

test('the agent id is the machine\'s: one machine id gives one UUID; no machine id falls back to a file in the state directory', async () => {
  const a = appSpecificMachineId('3d1219c7c4c5404aaa1f6d2a48adfda4\n');
  assert.match(a ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(appSpecificMachineId('3D1219C7C4C5404AAA1F6D2A48ADFDA4'), a);
  assert.notEqual(a?.replace(/-/g, ''), '3d1219c7c4c5404aaa1f6d2a48adfda4', 'the raw machine id is not sent');
  assert.equal(appSpecificMachineId('00000000000000000000000000000000'), undefined);
  assert.equal(appSpecificMachineId('uninitialized'), undefined);
});

test('a mount over another at the same point is reported once, as the top one; a mount point too long for its metric names is left out, not the report', async () => {
  const long = `/srv/${'d'.repeat(240)}`;
  const mountinfo = [
    '22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw',
    '30 22 8:1 / /work rw,relatime shared:2 - ext4 /dev/sda1 rw',
    '31 30 8:2 / /work rw,relatime shared:3 - ext4 /dev/sdb1 rw',
    '32 22 8:3 / /data rw,relatime shared:4 - ext4 /dev/sdc1 rw',
    '33 32 0:40 / /data rw,relatime shared:5 - tmpfs tmpfs rw',
    `34 22 8:4 / ${long} rw,relatime shared:6 - ext4 /dev/sdd1 rw`,
  ].join('\n') + '\n';
  const base = linuxHostSource(host('kernel-6.8-storage'));
  const statfsOf: string[] = [];
  const collector = createCollector({
    source: {
      ...base,
      readProc: async (name: string) => (name === base.mountinfoName ? mountinfo : base.readProc(name)),
      statfs: async (p: string) => { statfsOf.push(p); return { bsize: 4096, blocks: 100, bfree: 50, bavail: 50 }; },
      isFile: async () => false,
      serviceStates: async () => [],
    },
    agentId: 'm', hostname: 'h', services: [], log: captureLog().log,
  });
  await collector.prime(0);
  const r = { ...(await collector.collect(10_000)), alerts: [] };
  // Two filesystems at /work once gave "metric disk./work.total is reported twice" at every interval; the long one,
  // "metric name is longer than 256 characters": no report at all from the host.
  assert.deepEqual(r.disks.map((d) => d.path), ['/', '/work'], 'the top mount of /work once; /data hidden under a tmpfs');
  assert.deepEqual(statfsOf.sort(), ['/', long, '/work'].sort());
  assert.ok(flattenReport(r).size > 0, 'the report flattens');
  assert.ok(Value.Check(ReportSchema, r));
});
