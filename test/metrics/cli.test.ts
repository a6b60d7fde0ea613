import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { runCli } from '../../src/metrics/cli-commands.js';
import { TOKEN_CACHE_MS } from '../../src/metrics/storage/engine-metrics-store.js';
import { hashToken } from '../../src/core/auth/tokens.js';
import { BACKENDS } from '../helpers/backends.js';
import { call } from '../helpers/http.js';
import { startMetrics, type MetricsHarness } from '../helpers/metrics.js';

// The backends side by side (each its own service): a revocation waits out the other process's token cache.
describe('metrics-service token commands', { concurrency: true }, () => {
  for (const backend of BACKENDS) {
    describe(`on ${backend}`, { concurrency: 1 }, () => {
      let m: MetricsHarness;
      let env: Record<string, string | undefined>;
      before(async () => {
        m = await startMetrics(backend);
        env = { DATA_DIR: m.storage.dataDir, METRICS_DB_SCHEMA: m.storage.pgSchema, DATABASE_URL: m.storage.databaseUrl };
      });
      after(() => m.close());

      async function cli(...argv: string[]) {
        const out: string[] = [];
        const err: string[] = [];
        const code = await runCli(argv, env, { print: (l) => out.push(l), fail: (l) => err.push(l) });
        return { code, out: out.join('\n'), err: err.join('\n') };
      }

      test('token create prints a working token once; list never shows it; revoke locks it out', async () => {
        const created = await cli('token', 'create', 'acme');
        assert.equal(created.code, 0);
        assert.match(created.out, /tenant: +acme \(created\)/);
        const token = /token: +(mtk_[A-Za-z0-9_-]{43})/.exec(created.out)![1]!;
        const tokenId = /token id: +(tok_[0-9a-f]+)/.exec(created.out)![1]!;
        assert.equal((await call(m.url, 'GET', '/api/v1/hosts', { token })).status, 200);

        const second = await cli('token', 'create', 'acme');
        assert.doesNotMatch(second.out, /created/, 'the existing tenant gets another token');

        const list = await cli('token', 'list');
        assert.equal(list.code, 0);
        assert.match(list.out, new RegExp(`${tokenId}\\tacme\\t\\S+\\tactive`));
        assert.ok(!list.out.includes(token) && !list.out.includes(hashToken(token)), 'neither the token nor its hash is listed');

        assert.equal((await cli('token', 'revoke', tokenId)).code, 0);
        assert.match((await cli('token', 'list')).out, new RegExp(`${tokenId}\\tacme\\t\\S+\\trevoked `));
        // The running service trusts a token lookup for TOKEN_CACHE_MS: a revocation from another process lands within it.
        const deadline = Date.now() + TOKEN_CACHE_MS + 1_000;
        let status = 200;
        while (status !== 401 && Date.now() < deadline) {
          status = (await call(m.url, 'GET', '/api/v1/hosts', { token })).status;
          if (status !== 401) await new Promise((r) => setTimeout(r, 200));
        }
        assert.equal(status, 401);
        const again = await cli('token', 'revoke', tokenId);
        assert.equal(again.code, 1);
        assert.match(again.err, /no active token/);
      });

      test('bad tenant names, unknown commands and bad options fail with usage, not a stack', async () => {
        const bad = await cli('token', 'create', '<script>');
        assert.equal(bad.code, 1);
        assert.match(bad.err, /tenant name/);
        const unknown = await cli('token', 'explode');
        assert.equal(unknown.code, 2);
        assert.equal(unknown.err, 'metrics-service: unknown command: token explode (see metrics-service --help)');
        const option = await cli('token', 'list', '--retention-days', 'x');
        assert.equal(option.code, 2);
        assert.equal(option.err, 'metrics-service: --retention-days / METRICS_RETENTION_DAYS: "x" is not an integer (see metrics-service token --help)');
        const serveOptions = await cli('token', 'list', '--port', '9999', '--retention-days', '7');
        assert.equal(serveOptions.code, 0, 'serve\'s command line reused: accepted');
      });
    });
  }
});

test('--help lists the commands and every option', async () => {
  const out: string[] = [];
  assert.equal(await runCli(['--help'], {}, { print: (l) => out.push(l), fail: (l) => out.push(l) }), 0);
  const text = out.join('\n');
  for (const s of ['token create <tenant>', '--secret', 'METRICS_SECRET', '--retention-days', '--alert-routes', '--series-points']) assert.ok(text.includes(s), s);
});

test('--help states the rule of --bulk-parse-threads\' default, and that the Redis options are not used', async () => {
  const out: string[] = [];
  assert.equal(await runCli(['--help'], {}, { print: (l) => out.push(l), fail: (l) => out.push(l) }), 0);
  const text = out.join('\n');
  assert.match(text, /--bulk-parse-threads <value> {2}\(METRICS_BULK_PARSE_THREADS\) \[default: one per core beyond two, at most 4; \d on this machine\]/);
  assert.match(text, /--redis-url <value> {2}\(REDIS_URL\)\n {6}Not used: the metrics service keeps nothing in Redis/);
  assert.match(text, /--redis-prefix <value> {2}\(METRICS_REDIS_PREFIX\) \[default: metrics:\]\n {6}Not used/);
  assert.doesNotMatch(text, /rate limits and cross-instance notifications/);
});

test('--help prints the help to stdout (exit 0); no command at all prints it to stderr (exit 2)', async () => {
  const out: string[] = [];
  const err: string[] = [];
  const io = { print: (l: string) => out.push(l), fail: (l: string) => err.push(l) };
  assert.equal(await runCli(['--help'], {}, io), 0);
  assert.deepEqual([out.length, err.length], [1, 0]);
  assert.equal(await runCli([], {}, io), 2);
  assert.deepEqual([out.length, err.length], [1, 1], 'the usage error goes to stderr');
  assert.match(err[0]!, /token create <tenant>/);
});

test('a token command without its argument, or with one too many, says so with its usage line (exit 2)', async () => {
  const cases: [string[], string][] = [
    [['token', 'create'], 'token create: missing <tenant>; usage: metrics-service token create <tenant> [options]'],
    [['token', 'create', '--data-dir', 'x'], 'token create: missing <tenant>; usage: metrics-service token create <tenant> [options]'],
    [['token', 'revoke'], 'token revoke: missing <token-id>; usage: metrics-service token revoke <token-id> [options]'],
    [['token', 'list', 'acme'], 'token list: unexpected argument "acme"; usage: metrics-service token list [options]'],
    [['token'], 'token: missing command (create, list or revoke)'],
  ];
  for (const [argv, problem] of cases) {
    const err: string[] = [];
    assert.equal(await runCli(argv, {}, { print: () => {}, fail: (l) => err.push(l) }), 2, argv.join(' '));
    assert.deepEqual(err, [`metrics-service: ${problem} (see metrics-service token --help)`]);
  }
  const err: string[] = [];
  assert.equal(await runCli(['--data-dir', 'x'], {}, { print: () => {}, fail: (l) => err.push(l) }), 2);
  assert.deepEqual(err, ['metrics-service: missing command (serve or token) before the options (see metrics-service --help)']);
});

test('token --help shows the token commands and only the storage options they read', async () => {
  for (const argv of [['token', '--help'], ['token', 'create', '-h']]) {
    const out: string[] = [];
    assert.equal(await runCli(argv, {}, { print: (l) => out.push(l), fail: (l) => out.push(l) }), 0);
    const text = out.join('\n');
    for (const s of ['token create <tenant>', 'token revoke <token-id>', '--data-dir', '--database-url', 'DATABASE_URL', '--db-schema']) assert.ok(text.includes(s), s);
    for (const s of ['metrics-service serve', '--port', '--secret', '--retention-days']) assert.ok(!text.includes(s), `${argv.join(' ')} shows ${s}`);
    assert.match(text, /serve's other options are accepted and checked, but not used/);
  }
});
