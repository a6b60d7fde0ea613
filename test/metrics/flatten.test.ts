import { test } from 'node:test';
import assert from 'node:assert/strict';
import { flattenInto, flattenReport, flattenWellFormed, MAX_FLATTEN_DEPTH } from '../../src/metrics/domain/flatten.js';
import type { Report } from '../../src/metrics/domain/report-schema.js';
import { AppError } from '../../src/core/errors.js';
import { makeReport } from '../helpers/metrics.js';

const invalid = (pattern: RegExp) => (e: unknown) => e instanceof AppError && e.code === 'invalid_request' && pattern.test(e.details ?? '');

test('every numeric leaf of the known sections becomes a dotted name', () => {
  const m = flattenReport(makeReport());
  assert.deepEqual([...m.keys()], [
    'cpu.usage', ...Array.from({ length: 8 }, (_, i) => `cpu.perCore.${i}`), 'cpu.loadAverage.0', 'cpu.loadAverage.1', 'cpu.loadAverage.2',
    'memory.total', 'memory.used', 'memory.free', 'memory.percent',
    'disk./.total', 'disk./.used', 'disk./.available', 'disk./.percent',
    'disk./data.total', 'disk./data.used', 'disk./data.available', 'disk./data.percent',
    'network.rxBytes', 'network.txBytes', 'network.rxPackets', 'network.txPackets',
  ]);
  assert.equal(m.get('cpu.perCore.3'), 14);
  assert.equal(m.get('disk./data.percent'), 10);
});

test('nested network objects, arrays and services flatten; strings and booleans never do', () => {
  const m = flattenReport(makeReport({
    network: { eth0: { rxBytes: 5, up: true, name: 'eth0' }, errors: [1, 2] },
    services: [{ name: 'nginx', status: 'active', restarts: 3, memory: { rss: 1024 } }, { name: 'cron', status: 'failed' }] as Report['services'],
    extra: { ignored: 1 },
  }));
  assert.equal(m.get('network.eth0.rxBytes'), 5);
  assert.equal(m.get('network.errors.1'), 2);
  assert.equal(m.get('service.nginx.restarts'), 3);
  assert.equal(m.get('service.nginx.memory.rss'), 1024);
  assert.ok(![...m.keys()].some((k) => k.includes('status') || k.includes('name') || k.includes('up') || k.startsWith('extra') || k.startsWith('service.cron')));
});

test('a non-finite number (JSON 1e400 parses to Infinity) is refused, naming the field', () => {
  const r = makeReport();
  (r.network as Record<string, unknown>)['rxBytes'] = Infinity;
  assert.throws(() => flattenReport(r), invalid(/^body network\.rxBytes: must be a finite number/));
  const r2 = makeReport({ cpu: { usage: 1, perCore: [1, Number.NaN] } });
  assert.throws(() => flattenReport(r2), invalid(/cpu\.perCore\.1: must be a finite number/));
});

test('nesting deeper than the bound is refused', () => {
  let deep: Record<string, unknown> = { v: 1 };
  for (let i = 0; i < MAX_FLATTEN_DEPTH + 2; i++) deep = { d: deep };
  assert.throws(() => flattenReport(makeReport({ network: deep })), invalid(/nested deeper than/));
});

test('two disks with the same path are refused rather than merged', () => {
  const d = { path: '/', total: 1, used: 1, available: 0, percent: 100 };
  assert.throws(() => flattenReport(makeReport({ disks: [d, d] })), invalid(/disks\.1\.total: metric disk\.\/\.total is reported twice/));
});

test('a name reported twice is refused however many names come between, before and after the remembered names start over', () => {
  const between: Record<string, unknown> = { 'x.y': 1 };
  for (let i = 0; i < 20_000; i++) between[`k${i}`] = i;
  between['x'] = { y: 2 };
  assert.throws(() => flattenReport(makeReport({ network: between })), invalid(/network\.x\.y is reported twice/));
  const nginx = { name: 'nginx', restarts: 1 };
  const many: Record<string, number> = {};
  for (let i = 0; i < 20_000; i++) many[`m${i}`] = i;
  assert.throws(() => flattenReport(makeReport({ network: many, services: [nginx, nginx] })), invalid(/service\.nginx\.restarts is reported twice/));
  // And the next report, with the same names once each, is whole.
  const m = flattenReport(makeReport({ network: many, services: [nginx] }));
  assert.equal(m.get('network.m19999'), 19_999);
  assert.equal(m.get('service.nginx.restarts'), 1);
  assert.equal(new Set(m.keys()).size, m.size);
});

test('overlong metric names are refused', () => {
  assert.throws(() => flattenReport(makeReport({ network: { ['k'.repeat(300)]: 1 } })), invalid(/longer than/));
});

test('a "__proto__" key is an ordinary name and pollutes nothing', () => {
  const r = JSON.parse('{"network": {"__proto__": {"polluted": 1}, "constructor": {"prototype": 2}}}') as Partial<Report>;
  const m = flattenReport(makeReport(r));
  assert.equal(m.get('network.__proto__.polluted'), 1);
  assert.equal(m.get('network.constructor.prototype'), 2);
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
});

test('errors name the field in the body as sent, for names and text checked a key at a time', () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ network: { eth0: { 'rx\u200b': 1 } } }, /^body network\.eth0\.rx\u200b: metric name holds a control or invisible character$/],
    [{ services: [{ name: 'nginx', 're\tstarts': 1 }] }, /^body services\.0\.re\tstarts: metric name holds a control or invisible character$/],
    [{ disks: [{ path: '/', total: 1, used: 1, available: 0, percent: 100 }, { path: '/data', total: 1, used: 1, available: 0, percent: 100, inodes: [1, Infinity] }] }, /^body disks\.1\.inodes\.1: must be a finite number$/],
    [{ network: { eth0: { rx: [1, { 'bad\ud800': 1 }] } } }, /^body network\.eth0\.rx\.1\.\(key\): a key holds a lone UTF-16 surrogate or a NUL character$/],
    [{ extra: ['ok', 'a\u0000'] }, /^body extra\.1: text holds a lone UTF-16 surrogate or a NUL character$/],
  ];
  for (const [override, pattern] of cases) assert.throws(() => flattenReport(makeReport(override as Partial<Report>)), invalid(pattern), pattern.source);
});

test('a key with a control character that holds no number is no metric name and is not refused', () => {
  const m = flattenReport(makeReport({ network: { 'eth\n0': 'up', eth1: { 'note\t': true, rx: 5 } } } as Partial<Report>));
  assert.equal(m.get('network.eth1.rx'), 5);
  assert.ok(![...m.keys()].some((k) => k.includes('\n') || k.includes('\t')));
});

test('names stay right once the table of remembered names has started over, and so does the check of their keys', () => {
  const many: Record<string, number> = {};
  for (let i = 0; i < 60_000; i++) many[`k${i}`] = i;
  const m = flattenReport(makeReport({ network: many }));
  assert.equal(m.get('network.k59999'), 59_999);
  assert.equal(m.get('network.k0'), 0);
  assert.equal(m.get('cpu.perCore.3'), 14);
  const again = flattenReport(makeReport({ network: { k1: 7 } }));
  assert.equal(again.get('network.k1'), 7);
  // A remembered key is still judged: the same bad key is refused before and after the table starts over.
  const bad = () => makeReport({ network: { 'a\u202Eb': 1 } });
  assert.throws(() => flattenReport(bad()), invalid(/control or invisible character/));
  assert.throws(() => flattenReport(bad()), invalid(/control or invisible character/));
});

test('into a sink: the same metrics in the same order as the map; a name the sink refuses is reported twice; the well-formed walk skips only the text check', () => {
  const report = makeReport({ services: [{ name: 'nginx', restarts: 2 }], network: { eth0: { rx: [1, 2] } } } as Record<string, unknown> as Partial<Report>);
  const got: Array<[string, number]> = [];
  flattenInto(report, { add: (name, value) => got.push([name, value]) > 0 });
  assert.deepEqual(got, [...flattenReport(report)]);
  const wellFormed: Array<[string, number]> = [];
  flattenWellFormed(report, { add: (name, value) => wellFormed.push([name, value]) > 0 });
  assert.deepEqual(wellFormed, got);
  assert.throws(() => flattenInto(report, { add: (name) => name !== 'service.nginx.restarts' }), invalid(/^body services\.0\.restarts: metric service\.nginx\.restarts is reported twice$/));
  const badText = makeReport({ extra: ['a\u0000'] } as Partial<Report>);
  assert.throws(() => flattenInto(badText, { add: () => true }), invalid(/^body extra\.0: text holds/));
  assert.doesNotThrow(() => flattenWellFormed(badText, { add: () => true }), 'its caller has ruled such text out');
});
