import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../src/core/errors.js';
import { flattenReport } from '../../src/metrics/domain/flatten.js';
import type { BulkItem } from '../../src/metrics/domain/ingest.js';
import { createBulkLinePool } from '../../src/metrics/http/bulk-line-pool.js';
import { bulkItems, LINES_PER_TURN, readBulkLines, readBulkLinesTakingTurns, type BulkLineOptions, type BulkLines, nestsDeeperThan } from '../../src/metrics/http/bulk-lines.js';
import { ReportMetrics } from '../../src/metrics/domain/report-shapes.js';
import { makeReport, ndjson } from '../helpers/metrics.js';

const NOW = Date.UTC(2026, 10, 21, 12);
const OPTS: BulkLineOptions = { lineLimit: 64 * 1024, now: NOW, maxFutureMs: 600_000, retentionMs: 86_400_000 };
const bytes = (s: string) => new TextEncoder().encode(s);

/** Every item of a read body, raw lines marked as such instead of parsed. */
function items(lines: BulkLines): Array<BulkItem | { line: number; raw: string }> {
  const out: Array<BulkItem | { line: number; raw: string }> = [];
  for (const item of bulkItems(lines, 'tenant-1', (line, raw) => {
    out.push({ line, raw });
    return { item: { line, error: new AppError('invalid_request', 'raw') }, json: true };
  })) if (!('error' in item && item.error.details === 'raw')) out.push(item);
  return out;
}

test('ready lines come back as the reports single ingest prepares: host, ts, every metric in order, alerts', () => {
  const a = makeReport({ agentId: 'a', ts: NOW - 1000, alerts: [{ name: 'HighCpu', severity: 'critical' }] });
  const b = makeReport({ agentId: 'b', hostname: 'db-1', ts: NOW, network: { eth0: { rx: 1, tx: [2, 3] } } });
  const got = items(readBulkLines(bytes(ndjson([a, b, a])), OPTS));
  assert.equal(got.length, 3);
  for (const [i, r] of [a, b, a].entries()) {
    const item = got[i] as Extract<BulkItem, { prepared: unknown }>;
    assert.equal(item.line, i + 1);
    assert.deepEqual({ ...item.prepared, metrics: [...item.prepared.metrics] },
      { tenantId: 'tenant-1', hostId: r.agentId, hostname: r.hostname, platform: r.platform, ts: r.ts, metrics: [...flattenReport(structuredClone(r))] });
    assert.deepEqual(item.alerts, r.alerts);
  }
});

test('refused lines carry the error single ingest gives, and the host and ts once the line was a report', () => {
  const lines = [
    JSON.stringify(makeReport({ agentId: 'a', cpu: { usage: 'x' as never } })),
    JSON.stringify(makeReport({ agentId: 'a', ts: NOW + 3_600_000 })),
    // JSON's 1e400 parses to Infinity.
    JSON.stringify(makeReport({ agentId: 'a', ts: NOW, network: { rx: 7 } })).replace('"rx":7', '"rx":1e400'),
    'x'.repeat(70 * 1024),
  ];
  const got = items(readBulkLines(bytes(lines.join('\n')), OPTS)) as Array<Extract<BulkItem, { error: unknown }>>;
  assert.deepEqual(got.map((i) => [i.line, i.error.code]), [[1, 'invalid_request'], [2, 'invalid_request'], [3, 'invalid_request'], [4, 'payload_too_large']]);
  assert.equal(got[0]!.error.details, 'body cpu.usage: must be number');
  assert.equal(got[0]!.of, undefined, 'not a report: no host');
  assert.match(got[1]!.error.details!, /more than 600000 ms ahead/);
  assert.deepEqual(got[1]!.of, { hostId: 'a', ts: NOW + 3_600_000 });
  assert.match(got[2]!.error.details!, /finite number/);
});

test('lines only Fastify\'s parser may read are left raw, in order; blank lines and CRLF are skipped', () => {
  const ok = JSON.stringify(makeReport({ agentId: 'a', ts: NOW }));
  const raw = ['{"agentId": ', ok.replace('"network":{', '"network":{"__proto__":{"x":1},'), ok.replace('"network":{', '"network":{"constructor":{"prototype":{}},'),
    ok.replace('web-1', 'caf\\u00e9'), '\uFEFF' + ok];
  const body = [ok, '', raw[0], '  ', raw[1], raw[2], raw[3], raw[4], ok].join('\r\n');
  const lines = readBulkLines(bytes(body), OPTS);
  assert.equal(lines.jsonLines, 2, 'the two plain lines; raw ones are counted by their parser');
  const got = items(lines);
  assert.deepEqual(got.map((i) => i.line), [1, 3, 5, 6, 7, 8, 9]);
  assert.deepEqual(got.filter((i) => 'raw' in i).map((i) => (i as { raw: string }).raw), raw);
});

test('a body whose reports name more metrics than the shape table keeps still reads every name', () => {
  // 1,000 reports of 120 names no other report has: past the shape table's 100,000 names.
  const reports = Array.from({ length: 1000 }, (_, i) => makeReport({ agentId: `h${i}`, ts: NOW, network: Object.fromEntries(Array.from({ length: 120 }, (_, k) => [`r${i}n${k}`, k])) }));
  const lines = readBulkLines(bytes(ndjson(reports)), OPTS);
  assert.ok(lines.unshaped.length > 0 && lines.shapes.length > 0, 'some reports past the bound');
  const got = items(lines) as Array<Extract<BulkItem, { prepared: unknown }>>;
  for (const [i, r] of reports.entries()) assert.deepEqual([...got[i]!.prepared.metrics], [...flattenReport(structuredClone(r))]);
});

test('a body past 10,000 reports, or with no report, is refused whole', () => {
  assert.throws(() => readBulkLines(bytes('{}\n'.repeat(10_001)), OPTS), (e: AppError) => e.code === 'payload_too_large');
  assert.throws(() => readBulkLines(bytes('\n \r\n'), OPTS), (e: AppError) => e.code === 'invalid_request' && /holds no report/.test(e.details!));
  const notJson = readBulkLines(bytes('<html>\n'), OPTS);
  assert.throws(() => [...bulkItems(notJson, 't', (line) => ({ item: { line, error: new AppError('invalid_request', 'not JSON') }, json: false }))],
    (e: AppError) => /no line is JSON/.test(e.details!));
});

test('lines are cut from the bytes as the decoded body splits at newlines: blank is what trim finds blank, a line\'s size is its bytes', () => {
  const ok = JSON.stringify(makeReport({ agentId: 'web-1', ts: NOW }));
  // Whitespace only, ASCII or not: blank, and not counted against the 10,000 reports of a body.
  const blanks = ['', ' \t\v\f', '\u00a0', '\u2028 ', '\ufeff', '\u3000\r'];
  const body = [...blanks, ok, ...blanks].join('\n');
  const read = readBulkLines(bytes(body), OPTS);
  assert.deepEqual([...read.line], [blanks.length + 1], 'the report keeps its line number');
  assert.doesNotThrow(() => readBulkLines(bytes(`${'{}\n'.repeat(10_000)}\u00a0\n\ufeff\n`), OPTS), 'exactly 10,000 reports and two blank lines');
  // A line of invalid UTF-8 bytes: decoded, each is U+FFFD (3 bytes), but the line is as long as the bytes sent.
  const invalid = Buffer.concat([Buffer.from('{"x":"'), Buffer.alloc(20, 0xff), Buffer.from('"}')]);
  const small = { ...OPTS, lineLimit: invalid.length };
  const fits = readBulkLines(invalid, small);
  assert.equal(fits.refused[0]?.error, 'invalid_request', 'read and checked (not a report), not refused for its size');
  const over = readBulkLines(Buffer.concat([invalid, Buffer.from(' ')]), small);
  assert.deepEqual(over.refused.map((r) => r.error), ['payload_too_large']);
  // A multi-byte character cut by nothing: the text of a line is the decoded body's, CRLF or not.
  const cafe = readBulkLines(bytes(`${ok.replace(/"hostname":"[^"]*"/, '"hostname":"caf\u00e9"')}\r\n`), OPTS);
  assert.equal(cafe.strings[cafe.text[1]!], 'caf\u00e9');
});

test('ReportMetrics reads like the Map of the same names and values', () => {
  const map = new Map([['cpu.usage', 12.5], ['memory.total', 8e9], ['disk./.percent', -0]]);
  const cols = new ReportMetrics([...map.keys()], Float64Array.from(map.values()));
  assert.deepEqual([...ReportMetrics.of(map)], [...map]);
  assert.throws(() => ReportMetrics.of([['a', 1], ['a', 2]]), /appears twice/);
  assert.equal(cols.size, 3);
  assert.deepEqual([...cols], [...map]);
  assert.deepEqual([...cols.keys()], [...map.keys()]);
  assert.deepEqual([...cols.values()], [...map.values()]);
  assert.deepEqual([...cols.entries()], [...map.entries()]);
  assert.equal(cols.get('memory.total'), 8e9);
  assert.ok(Object.is(cols.get('disk./.percent'), -0));
  assert.equal(cols.get('nope'), undefined);
  assert.ok(cols.has('cpu.usage') && !cols.has('nope'));
  const seen: Array<[string, number]> = [];
  cols.forEach((v, k) => seen.push([k, v]));
  assert.deepEqual(seen, [...map]);
});

const pool = createBulkLinePool(1);
after(() => pool.close());

test('a parse thread reads a body as the event loop does, and its refusals arrive as the same errors', async () => {
  const body = bytes(ndjson([makeReport({ agentId: 'a', ts: NOW }), '{"agentId": ', makeReport({ agentId: 'b', ts: NOW + 3_600_000 })]));
  const apart = await pool.read(body, OPTS);
  assert.equal(pool.readApart, 1);
  assert.deepEqual(items(apart).map((i) => ('prepared' in i ? [...i.prepared.metrics] : i)), items(readBulkLines(body, OPTS)).map((i) => ('prepared' in i ? [...i.prepared.metrics] : i)));
  await assert.rejects(pool.read(bytes('{}\n'.repeat(10_001)), OPTS), (e: unknown) => e instanceof AppError && e.code === 'payload_too_large');
});

test('a closed pool reads no more bodies: unavailable, retryable', async () => {
  for (const threads of [0, 1]) {
    const closed = createBulkLinePool(threads);
    await closed.close();
    await assert.rejects(closed.read(bytes(ndjson([makeReport({ ts: NOW })])), OPTS), (e: unknown) => e instanceof AppError && e.code === 'unavailable' && e.extra?.['retry_after'] === 2);
  }
});

test('nestsDeeperThan counts the brackets that open objects and arrays, never those inside strings', () => {
  assert.equal(nestsDeeperThan('{"a":[1,{"b":[]}]}', 4), false);
  assert.equal(nestsDeeperThan('{"a":[1,{"b":[]}]}', 3), true);
  assert.equal(nestsDeeperThan(`{"s":"${'['.repeat(100)}"}`, 1), false, 'brackets in a string');
  assert.equal(nestsDeeperThan(`{"s":"\\"${'{'.repeat(100)}\\\\"}`, 1), false, 'an escaped quote does not end the string, an escaped backslash does not escape it');
  assert.equal(nestsDeeperThan(`{"s":"\\\\"}${'['.repeat(3)}`, 2), true, 'past a string that ends in an escaped backslash, brackets count again');
  assert.equal(nestsDeeperThan('[]'.repeat(1000), 1), false, 'siblings are not nesting');
  assert.equal(nestsDeeperThan(`{"s":"${'['.repeat(100)}","a":[[]]}`, 3), false, 'many brackets in a string, little nesting: walked, not refused');
  assert.equal(nestsDeeperThan(`{"s":"${'['.repeat(100)}","a":[[]]}`, 2), true);
});

test('on the event loop a body is read a slice of lines per turn, other work runs in between, and the lines are those a parse thread reads', async () => {
  const reports = Array.from({ length: 5 * LINES_PER_TURN + 3 }, (_, i) => makeReport({ agentId: `h${i % 7}`, ts: NOW - 60_000 + i, cpu: { usage: i % 100 } }));
  const body = bytes(ndjson(reports) + '\nnot json\n{"agentId": 1}');
  let turns = 0;
  let counting = true;
  const count = () => { if (counting) { turns++; setImmediate(count); } };
  setImmediate(count);
  const taken = await readBulkLinesTakingTurns(body, OPTS);
  counting = false;
  assert.ok(turns >= 5, `other work ran ${turns} times while ${reports.length + 2} lines were read`);
  assert.deepEqual(taken, readBulkLines(body, OPTS));
});

test('on the event loop bodies are read one after the other, each still a slice per turn: the first is done before the second starts', async () => {
  const onLoop = createBulkLinePool(0);
  after(() => onLoop.close());
  const body = (agent: string) => bytes(ndjson(Array.from({ length: 4 * LINES_PER_TURN }, (_, i) => makeReport({ agentId: agent, ts: NOW - 60_000 + i }))));
  let turns = 0;
  let counting = true;
  const count = () => { if (counting) { turns++; setImmediate(count); } };
  setImmediate(count);
  const doneAt: Record<string, number> = {};
  const read = (agent: string) => onLoop.read(body(agent), OPTS).then((lines) => { doneAt[agent] = turns; return lines; });
  const [a, b] = await Promise.all([read('a'), read('b')]);
  counting = false;
  // Four slices each. Interleaved (a slice of each per turn) both finish after about 4 turns; one after the other, the
  // second about 4 turns after the first.
  assert.ok(doneAt['a']! <= 5 && doneAt['b']! >= doneAt['a']! + 3, `first done after ${doneAt['a']} turns, second after ${doneAt['b']}`);
  assert.equal(a.line.length, 4 * LINES_PER_TURN);
  assert.equal(b.line.length, 4 * LINES_PER_TURN);
});

test('on the event loop a body refused whole does not hold up the bodies waiting behind it', async () => {
  const onLoop = createBulkLinePool(0);
  after(() => onLoop.close());
  const refused = onLoop.read(bytes('\n\n'), OPTS);
  const next = onLoop.read(bytes(ndjson([makeReport({ agentId: 'a', ts: NOW })])), OPTS);
  await assert.rejects(refused, (e: unknown) => e instanceof AppError && e.code === 'invalid_request');
  assert.equal((await next).line.length, 1);
});
