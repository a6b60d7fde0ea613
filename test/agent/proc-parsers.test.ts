import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseLoadavg } from '../../src/agent/collect/parse-loadavg.js';
import { parseMeminfo } from '../../src/agent/collect/parse-meminfo.js';
import { parseNetDev } from '../../src/agent/collect/parse-net-dev.js';
import { cpuUsage, parseProcStat } from '../../src/agent/collect/parse-proc-stat.js';
import { isReportedInterface, networkReport } from '../../src/agent/collect/network-rates.js';
import { diskUsage } from '../../src/agent/collect/disk-usage.js';
import { fixture } from './fixtures.js';

test('parses /proc/stat: idle includes iowait, guest time is not counted twice', () => {
  const s = parseProcStat(fixture('proc-stat-b.txt'));
  // user 1300 + system 600 + idle 8500 + iowait 600 + irq 50 + softirq 50; guest 200 is inside user already.
  assert.deepEqual(s.overall, { idle: 9100, total: 11100, modes: { user: 1300, nice: 0, system: 600, idle: 8500, iowait: 600, irq: 50, softirq: 50, steal: 0 } });
  assert.deepEqual([...s.cores.keys()], [0, 1, 3]);
});

test('CPU usage is the busy share of the ticks between two samples, overall and per core', () => {
  const u = cpuUsage(parseProcStat(fixture('proc-stat-a.txt')), parseProcStat(fixture('proc-stat-b.txt')));
  // overall: total 10000 -> 11100, idle 8500 -> 9100: busy 500 of 1100.
  assert.equal(u.usage, 45.45);
  // cpu0 spent all 100 ticks idle; cpu1 busy 500 of 1000; cpu3 came online (hotplug) so has no delta yet.
  assert.deepEqual(u.perCore, [0, 50]);
});

test('per-core usage is keyed by the kernel\'s CPU number: with a CPU offline the later ones keep their index, the offline one reads 0', () => {
  const stat = (busy: number[], idle: number) => parseProcStat(['cpu  0 0 0 0 0 0 0 0', ...[0, 2, 3].map((id, i) => `cpu${id} ${busy[i]} 0 0 ${idle} 0 0 0 0`)].join('\n'));
  // CPU 1 offline; CPU 0 busy 1000 of 2000 ticks, CPU 2 idle, CPU 3 busy 500 of 1500.
  assert.deepEqual(cpuUsage(stat([0, 0, 0], 1000), stat([1000, 0, 500], 2000)).perCore, [50, 0, 0, 33.33]);
});

test('CPU usage is 0, not NaN or negative, when no time elapsed or counters went backwards', () => {
  const a = parseProcStat(fixture('proc-stat-a.txt'));
  const b = parseProcStat(fixture('proc-stat-b.txt'));
  assert.deepEqual(cpuUsage(a, a), { usage: 0, perCore: [0, 0] });
  assert.deepEqual(cpuUsage(b, a), { usage: 0, perCore: [0, 0] });
});

test('old kernels print fewer /proc/stat columns; missing ones count as zero', () => {
  const s = parseProcStat(fixture('proc-stat-old-kernel.txt'));
  assert.deepEqual(s.overall, { idle: 820, total: 978, modes: { user: 100, nice: 5, system: 50, idle: 800, iowait: 20, irq: 1, softirq: 2, steal: 0 } });
});

test('a /proc/stat without the aggregate cpu line is an error, not a report of zeros', () => {
  assert.throws(() => parseProcStat('intr 1 2 3\n'), /no aggregate "cpu" line/);
});

test('parses the three load averages', () => {
  assert.deepEqual(parseLoadavg(fixture('loadavg.txt')), [0.52, 0.58, 0.59]);
  assert.throws(() => parseLoadavg('0.1 x\n'), /unreadable/);
});

test('memory is in bytes and "used" is MemTotal - MemAvailable', () => {
  assert.deepEqual(parseMeminfo(fixture('meminfo.txt')), {
    total: 8_000_000 * 1024,
    used: 2_000_000 * 1024,
    free: 500_000 * 1024,
    available: 6_000_000 * 1024,
    percent: 25,
  });
});

test('without MemAvailable (Linux < 3.14) available is estimated from free, buffers, cache and reclaimable slab', () => {
  const m = parseMeminfo(fixture('meminfo-no-available.txt'));
  assert.equal(m.available, 2_000_000 * 1024);
  assert.equal(m.used, 2_000_000 * 1024);
  assert.equal(m.percent, 50);
});

test('a meminfo without MemTotal is an error', () => {
  assert.throws(() => parseMeminfo('MemFree: 10 kB\n'), /MemTotal/);
});

test('parses /proc/net/dev counters and skips malformed lines', () => {
  const n = parseNetDev(fixture('net-dev-b.txt'));
  assert.deepEqual([...n.keys()], ['lo', 'eth0', 'docker0', 'wlan0', 'eth1']);
  assert.deepEqual(n.get('eth0'), { rxBytes: 3_000_000, rxPackets: 1500, rxErrors: 1, rxDropped: 2, txBytes: 900_000, txPackets: 1000, txErrors: 3, txDropped: 4 });
});

test('network report: loopback and veth skipped, per-second rates, no rate across a counter reset or for a new interface', () => {
  const r = networkReport(parseNetDev(fixture('net-dev-a.txt')), parseNetDev(fixture('net-dev-b.txt')), 10);
  assert.deepEqual(Object.keys(r), ['docker0', 'eth0', 'eth1', 'wlan0']);
  assert.equal(r['eth0']!.rxBytesPerSec, 200_000);
  assert.equal(r['eth0']!.txBytesPerSec, 40_000);
  assert.equal(r['eth0']!.rxPacketsPerSec, 50);
  assert.equal(r['wlan0']!.rxBytesPerSec, 0, 'wlan0 rx went backwards');
  assert.equal(r['wlan0']!.txBytesPerSec, 50);
  assert.equal(r['eth1']!.rxBytesPerSec, 0, 'eth1 appeared in the second sample');
  assert.equal(r['eth1']!.rxBytes, 42);
});

test('interfaces made per container, compose network, pod or VM are left out; stable uplinks, bridges, bonds, VLANs and tunnels are reported', () => {
  const ephemeral = ['veth1a2b3c4', 'br-0123456789ab', 'br-fedcba987654', 'tap100i0', 'tapa1b2c3d4-e5', 'vnet12', 'fwbr100i0', 'fwln100i0', 'fwpr100p0', 'cali1234567890a', 'lxc0a1b2c3d4e5f', 'lxc_health'];
  const stable = ['eth0', 'ens3', 'enp0s31f6', 'wlan0', 'bond0', 'eth0.100', 'br0', 'br-lan', 'docker0', 'cni0', 'flannel.1', 'virbr0', 'virbr0-nic', 'lxcbr0', 'lxdbr0', 'wg0', 'tun0', 'cilium_host'];
  assert.deepEqual(ephemeral.filter(isReportedInterface), []);
  assert.deepEqual(stable.filter(isReportedInterface), stable);
  // A CI runner's compose networks: each run brings new names, none of which reaches the report.
  const netDev = (names: string[]) => parseNetDev(['Inter-|   Receive', ' face |bytes', ...names.map((n) => ` ${n}: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0`)].join('\n'));
  const run = (k: number) => netDev(['lo', 'eth0', ...Array.from({ length: 8 }, (_, i) => `br-${(k * 100 + i).toString(16).padStart(12, '0')}`)]);
  assert.deepEqual(Object.keys(networkReport(run(1), run(2), 10)), ['eth0']);
});

test('disk usage in bytes; percent as df computes it, counting the root reserve as unavailable', () => {
  const d = diskUsage('/data', { bsize: 4096, blocks: 1000, bfree: 300, bavail: 250 });
  assert.deepEqual(d, { path: '/data', total: 4_096_000, used: 2_867_200, available: 1_024_000, percent: 73.68 });
  assert.equal(diskUsage('/empty', { bsize: 4096, blocks: 0, bfree: 0, bavail: 0 }), undefined);
});
