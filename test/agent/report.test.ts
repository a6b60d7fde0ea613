import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Value } from 'typebox/value';
import { parseAgentConfigFile } from '../../src/agent/agent-config-file.js';
import { loadAgentOptions } from '../../src/agent/agent-options.js';
import { compileRules, evaluateRules, metricPattern } from '../../src/agent/alerts/threshold-alerts.js';
import { reportBuilder } from '../../src/agent/build-report.js';
import { createCollector } from '../../src/agent/collect/collector.js';
import { linuxHostSource, type HostSource } from '../../src/agent/collect/host-source.js';
import { parseIsActive, isValidUnitName } from '../../src/agent/collect/systemd-services.js';
import { ConfigError } from '../../src/core/config.js';
import { ALERT_LIMITS, SEVERITIES } from '../../src/metrics/alerts/alert.js';
import { AGENT_ALERT_LIMITS, AGENT_SEVERITIES } from '../../src/agent/alerts/alert-limits.js';
import { ReportSchema } from '../../src/metrics/domain/report-schema.js';
import { reportableHostname } from '../../src/agent/report-identity.js';
import { startAgent } from '../../src/agent/start-agent.js';
import { captureLog, tempDir } from './agent-harness.js';
import { FIXTURES } from './fixtures.js';

/** A host made of fixture files: the second /proc/stat and /proc/net/dev reading differs from the first. */
function fixtureHost(): HostSource {
  const reads = new Map<string, number>();
  const files: Record<string, string[]> = {
    stat: ['proc-stat-a.txt', 'proc-stat-b.txt'], 'net/dev': ['net-dev-a.txt', 'net-dev-b.txt'],
    loadavg: ['loadavg.txt'], meminfo: ['meminfo.txt'], 'self/mountinfo': ['mountinfo-host.txt'],
  };
  return {
    readProc: (name) => {
      const n = reads.get(name) ?? 0;
      reads.set(name, n + 1);
      const list = files[name]!;
      return readFile(path.join(FIXTURES, list[Math.min(n, list.length - 1)]!), 'utf8');
    },
    readSys: async (name) => { throw Object.assign(new Error(`no ${name}`), { code: 'ENOENT' }); },
    listSys: async () => [],
    readOwn: async (name) => { throw Object.assign(new Error(`no ${name}`), { code: 'ENOENT' }); },
    mountinfoName: 'self/mountinfo',
    statfs: async (p) => (p === '/boot/efi' ? { bsize: 4096, blocks: 1000, bfree: 50, bavail: 50 } : { bsize: 4096, blocks: 1000, bfree: 500, bavail: 450 }),
    isFile: async () => false,
    serviceStates: async (names) => names.map((name) => ({ name, state: name === 'nginx.service' ? 'active' : 'failed' })),
  };
}

test('a report built from fixture files has every section, in bytes and percent, and fires the configured alerts', async () => {
  const config = parseAgentConfigFile({
    services: ['nginx.service', 'worker@1.service'],
    alerts: [
      { name: 'DiskAlmostFull', metric: 'disk.*.percent', above: 90, severity: 'critical' },
      { name: 'ServiceDown', metric: 'service.*.active', below: 1, severity: 'warning', message: 'a watched unit is not active' },
      { name: 'MemoryHigh', metric: 'memory.percent', above: 80, severity: 'warning' },
    ],
  });
  const collector = createCollector({ source: fixtureHost(), agentId: 'a-1', hostname: 'h', services: config.services, log: captureLog().log });
  await collector.prime(0);
  const r = await reportBuilder(collector, compileRules(config.alerts))(10_000);
  assert.deepEqual(r.cpu, { usage: 45.45, perCore: [0, 50], loadAverage: [0.52, 0.58, 0.59], count: 3, seconds: { user: 13, nice: 0, system: 6, idle: 85, iowait: 6, irq: 0.5, softirq: 0.5, steal: 0 } });
  assert.equal(r.memory.used, 2_000_000 * 1024);
  assert.deepEqual(r.disks.map((d) => [d.path, d.percent]), [['/', 52.63], ['/boot/efi', 95], ['/media/usb\\011tab\\back', 52.63], ['/mnt/backup disk', 52.63]]);
  assert.equal(r.network['eth0']!.rxBytesPerSec, 200_000);
  assert.deepEqual(r.services, [{ name: 'nginx.service', status: 'active', active: 1 }, { name: 'worker@1.service', status: 'failed', active: 0 }]);
  assert.deepEqual(r.alerts, [
    { name: 'DiskAlmostFull', severity: 'critical', message: 'disk./boot/efi.percent is 95, above 90', labels: { metric: 'disk./boot/efi.percent' }, value: 95, threshold: 90 },
    { name: 'ServiceDown', severity: 'warning', message: 'a watched unit is not active', labels: { metric: 'service.worker@1.service.active' }, value: 0, threshold: 1 },
  ]);
  assert.ok(Value.Check(ReportSchema, JSON.parse(JSON.stringify(r))), JSON.stringify([...Value.Errors(ReportSchema, r)]));
});

test('a report of the machine running the tests is valid against the service\'s published schema', async () => {
  const collector = createCollector({ source: linuxHostSource(), agentId: 'self', hostname: 'self', services: [], log: captureLog().log });
  await collector.prime(Date.now());
  const r = await reportBuilder(collector, compileRules([{ name: 'Always', metric: 'cpu.usage', above: -1, severity: 'info' }]))(Date.now());
  assert.ok(Value.Check(ReportSchema, JSON.parse(JSON.stringify(r))), JSON.stringify([...Value.Errors(ReportSchema, r)]));
  assert.equal(r.alerts.length, 1);
  assert.ok(r.memory.total > 0 && r.memory.percent >= 0 && r.memory.percent <= 100);
});

test('alerts are capped at the service\'s per-report limit', () => {
  const metrics = new Map(Array.from({ length: 100 }, (_, i) => [`cpu.perCore.${i}`, 99] as const));
  const alerts = evaluateRules(compileRules([{ name: 'HotCore', metric: 'cpu.perCore.*', above: 90, severity: 'warning' }]), metrics);
  assert.equal(alerts.length, ALERT_LIMITS.maxAlerts);
});

test('the agent\'s alert bounds and severities equal the service\'s', () => {
  for (const [k, v] of Object.entries(AGENT_ALERT_LIMITS)) assert.equal(v, ALERT_LIMITS[k as keyof typeof ALERT_LIMITS], k);
  assert.deepEqual([...AGENT_SEVERITIES], [...SEVERITIES]);
});

test('metric patterns: * spans dots and slashes, everything else is literal', () => {
  assert.ok(metricPattern('disk.*.percent').test('disk./var/lib.percent'));
  assert.ok(!metricPattern('disk.*.percent').test('disk./var.used'));
  assert.ok(!metricPattern('cpu.usage').test('cpuXusage'));
});

test('the config file is validated: unknown keys, rules without exactly one threshold, bad unit names', () => {
  assert.throws(() => parseAgentConfigFile({ alert: [] }), /\/alert is not a config field/);
  assert.throws(() => parseAgentConfigFile({ alerts: [{ name: 'x', metric: 'cpu.usage', above: '90', severity: 'warning' }] }), /above must be a number/);
  assert.throws(() => parseAgentConfigFile([]), /must be a JSON object/);
  assert.throws(() => parseAgentConfigFile({ alerts: [{ name: 'x', metric: 'cpu.usage', severity: 'warning' }] }), /exactly one of "above" or "below"/);
  assert.throws(() => parseAgentConfigFile({ alerts: [{ name: 'x', metric: 'cpu.usage', above: 1, below: 2, severity: 'warning' }] }), /exactly one/);
  assert.throws(() => parseAgentConfigFile({ alerts: [{ name: 'x', metric: 'cpu.usage', above: 1, severity: 'page-me' }] }), /severity/);
  assert.throws(() => parseAgentConfigFile({ services: ['nginx; rm -rf /'] }), /not a systemd unit name/);
  assert.throws(() => parseAgentConfigFile({ services: ['cron.service', 'cron.service'] }), /"cron.service" is named twice/);
  assert.deepEqual(parseAgentConfigFile({}), { services: [], alerts: [] });
});

test('systemctl is-active output maps to units in order; missing lines are unknown; option-like names are refused', () => {
  assert.deepEqual(parseIsActive(['a.service', 'b.service', 'c.service'], 'active\ninactive\n'), [
    { name: 'a.service', state: 'active' }, { name: 'b.service', state: 'inactive' }, { name: 'c.service', state: 'unknown' },
  ]);
  assert.equal(isValidUnitName('--now'), false);
  assert.equal(isValidUnitName('getty@tty1.service'), true);
});

test('options: url and token required, every problem listed, secrets never echoed', () => {
  try {
    loadAgentOptions(['--interval-ms', '5', '--url', 'ftp://x'], { HOST_AGENT_SECRET: '' });
    assert.fail('expected ConfigError');
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    assert.equal(e.problems.length, 3, e.message);
  }
  const o = loadAgentOptions(['--url', 'http://m:8080'], { HOST_AGENT_TOKEN: 'hunter2' });
  assert.equal(o.intervalMs, 10_000);
  assert.equal(o.token, 'hunter2');
  assert.throws(() => loadAgentOptions(['--url', 'http://m', '--retry-base-ms', '5000', '--retry-max-ms', '10'], { HOST_AGENT_TOKEN: 't' }), /retry-base-ms/);
});

test('an agent id or hostname the service would refuse in every report stops the start, every problem listed', () => {
  for (const [flag, value] of [['--agent-id', 'web 1'], ['--agent-id', 'hôte-1'], ['--agent-id', 'a/b'], ['--agent-id', '..x'], ['--hostname', 'h'.repeat(256)], ['--hostname', 'web\u202e1']] as const) {
    assert.throws(() => loadAgentOptions(['--url', 'http://m', '--token', 't', flag, value], {}), (e: unknown) => e instanceof ConfigError && e.problems.length === 1 && e.problems[0]!.startsWith(flag), `${flag} ${value}`);
  }
  try {
    loadAgentOptions(['--url', 'http://m', '--token', 't', '--agent-id', 'a/b', '--hostname', 'h'.repeat(300)], {});
    assert.fail('expected ConfigError');
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    assert.deepEqual(e.problems.map((p) => p.split(':')[0]), ['--hostname / HOST_AGENT_HOSTNAME', '--agent-id / HOST_AGENT_ID']);
  }
  const o = loadAgentOptions(['--url', 'http://m', '--token', 't', '--agent-id', 'web-1.example:a@b_c', '--hostname', `hôte ${'h'.repeat(250)}`], {});
  assert.equal(o.agentId, 'web-1.example:a@b_c');
  assert.equal([...o.hostname!].length, 255);
});

test('an embedded agent given an agent id or hostname the service would refuse does not start', async () => {
  const spoolDir = tempDir();
  const start = async (extra: { agentId?: string; hostname?: string }) => {
    const agent = await startAgent({ url: 'http://127.0.0.1:9', token: 't', spoolDir, log: captureLog().log, ...extra });
    await agent.stop();
  };
  await assert.rejects(start({ agentId: 'web 1' }), /agentId "web 1" is not an agent id/);
  await assert.rejects(start({ hostname: '' }), /hostname must be 1-255 characters/);
});

test('a system hostname the service would refuse is cleaned up rather than stopping the agent', () => {
  assert.equal(reportableHostname('web-1'), 'web-1');
  assert.equal(reportableHostname('we\u0007b\u200b-1'), 'web-1');
  assert.equal(reportableHostname('h'.repeat(300)), 'h'.repeat(255));
  assert.equal(reportableHostname('\u0000'), 'localhost');
});
