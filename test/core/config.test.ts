import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, helpText, httpOptions, loadConfig, MAX_TIMER_MS, opsOptions, opt } from '../../src/core/config.js';

const spec = {
  ...httpOptions('DEMO', 8080),
  secret: opt.optionalString({ flag: 'secret', env: 'DEMO_SECRET', doc: 'HMAC secret.', secret: true }),
  verbose: opt.bool({ flag: 'verbose', env: 'DEMO_VERBOSE', default: false, doc: 'More output.' }),
};

test('flags win over environment, environment over defaults', () => {
  const c = loadConfig(spec, { argv: ['--port', '9000', '--verbose'], env: { DEMO_PORT: '7000', DEMO_HOST: '0.0.0.0' } });
  assert.equal(c.port, 9000);
  assert.equal(c.host, '0.0.0.0');
  assert.equal(c.verbose, true);
  assert.equal(c.bodyLimit, 1_048_576);
  assert.equal(c.secret, undefined);
});

test('--name=value form and list options', () => {
  const c = loadConfig(spec, { argv: ['--trust-proxy=127.0.0.1, 10.0.0.0/8'] });
  assert.deepEqual(c.trustProxy, ['127.0.0.1', '10.0.0.0/8']);
});

test('every bad value is reported at once, secrets are not echoed', () => {
  try {
    loadConfig(spec, { argv: ['--port', 'abc', '--bogus', 'x'], env: { DATABASE_URL: 'mysql://u:hunter2@h/db', LOG_LEVEL: 'loud' } });
    assert.fail('expected ConfigError');
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    assert.equal(e.problems.length, 4, e.message);
    assert.match(e.message, /--port.*not an integer/);
    assert.match(e.message, /unknown option --bogus/);
    assert.match(e.message, /LOG_LEVEL/);
    assert.doesNotMatch(e.message, /hunter2/);
  }
});

test('help lists every option with its variable', () => {
  const h = helpText('demo', spec);
  for (const o of Object.values(spec)) {
    assert.ok(h.includes(`--${o.flag}`), o.flag);
    assert.ok(h.includes(o.env), o.env);
  }
});

test('help states a default computed from the machine as its rule, with this machine\'s value', () => {
  const threads = { threads: { ...opt.int({ flag: 'threads', env: 'DEMO_THREADS', default: 3, doc: 'Threads.' }), defaultRule: 'one per core' } };
  assert.match(helpText('demo', threads), /--threads <value> {2}\(DEMO_THREADS\) \[default: one per core; 3 on this machine\]\n/);
});

test('a delay a timer cannot keep (above 2^31 - 1 ms) is refused, not fired every millisecond', () => {
  const timers = { ...spec, sweepMs: opt.ms({ flag: 'sweep-ms', env: 'DEMO_SWEEP_MS', default: 1000, min: 1, doc: 'Sweep.' }) };
  assert.equal(loadConfig(timers, { argv: ['--sweep-ms', String(MAX_TIMER_MS)] }).sweepMs, MAX_TIMER_MS);
  assert.throws(() => loadConfig(timers, { argv: ['--sweep-ms', '2592000000'] }), /--sweep-ms.*above the maximum 2147483647/);
  assert.throws(() => loadConfig(timers, { argv: [], env: { SHUTDOWN_TIMEOUT_MS: '2592000000' } }), /SHUTDOWN_TIMEOUT_MS.*above the maximum/);
});

test('--trust-proxy takes IPs, CIDRs, IPv4 netmasks and named ranges only; --db-schema a plain identifier only', () => {
  const ok = ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8', '192.168.0.0/255.255.0.0', 'loopback', 'uniquelocal'];
  assert.deepEqual(loadConfig(spec, { argv: ['--trust-proxy', ok.join(',')] }).trustProxy, ok);
  for (const bad of ['garbage!!', '10.0.0.0/33', '::1/129', '10.0.0.1/8/8', 'fd00::/ffff::', 'localhost']) {
    assert.throws(() => loadConfig(spec, { argv: ['--trust-proxy', bad] }), /--trust-proxy.*not an IP address/, bad);
  }
  assert.equal(loadConfig(spec, { argv: ['--db-schema', 'metrics_2'] }).dbSchema, 'metrics_2');
  for (const bad of ['Foo', 'a-b', '1abc', 'x;drop', 'a'.repeat(64)]) {
    assert.throws(() => loadConfig(spec, { argv: ['--db-schema', bad] }), /--db-schema.*plain lower-case identifier/, bad);
  }
});

test('an empty listen address is refused: Node would take it for every interface', () => {
  for (const source of [{ env: { DEMO_HOST: '' } }, { argv: ['--host='] }, { env: { DEMO_HOST: '  ' } }]) {
    assert.throws(() => loadConfig(spec, source), (e: unknown) => e instanceof ConfigError && /--host \/ DEMO_HOST: is empty/.test(e.message), JSON.stringify(source));
  }
  assert.equal(loadConfig(spec, { env: { DEMO_HOST: '::' } }).host, '::', 'every interface, said so');
});

test('a flag without its value does not take the next flag as one', () => {
  assert.throws(() => loadConfig(spec, { argv: ['--data-dir', '--verbose'] }), (e: unknown) => e instanceof ConfigError && /--data-dir needs a value/.test(e.message));
  assert.throws(() => loadConfig(spec, { argv: ['--data-dir', '--secret', 'x'] }), /--data-dir needs a value/);
  assert.equal(loadConfig(spec, { argv: ['--data-dir=--odd-dir'] }).dataDir, '--odd-dir', 'a value that starts with -- is given with =');
  assert.equal(loadConfig(spec, { argv: ['--data-dir', '-dir'] }).dataDir, '-dir');
});

test('a /metrics token is refused at start when no Authorization header could carry it', () => {
  const ops = { ...spec, ...opsOptions('DEMO') };
  assert.equal(loadConfig(ops, { env: { DEMO_METRICS_TOKEN: 'prometheus-scrape-token-01' } }).metricsToken, 'prometheus-scrape-token-01');
  for (const bad of ['prometheus!scrape#token@01', 'a'.repeat(513), 'prometheus scrape token 01']) {
    assert.throws(() => loadConfig(ops, { env: { DEMO_METRICS_TOKEN: bad } }), (e: unknown) => e instanceof ConfigError && e.problems[0] === '--metrics-token / DEMO_METRICS_TOKEN: invalid value: must be 16-512 characters of A-Z, a-z, 0-9 and . _ ~ + / = -' && !e.message.includes(bad), bad.slice(0, 20));
  }
});

test('a refused secret is told the whole rule it broke, never its value nor which part of the rule failed', () => {
  const ops = { ...spec, ...opsOptions('DEMO') };
  for (const [argv, problem] of [
    [['--metrics-token', 'short'], '--metrics-token / DEMO_METRICS_TOKEN: invalid value: must be 16-512 characters of A-Z, a-z, 0-9 and . _ ~ + / = -'],
    [['--database-url', 'notaurl'], '--database-url / DATABASE_URL: invalid value: must be a URL starting with postgres:// or postgresql://'],
    [['--database-url', 'mysql://u:hunter2@h/db'], '--database-url / DATABASE_URL: invalid value: must be a URL starting with postgres:// or postgresql://'],
    [['--redis-url', 'http://h'], '--redis-url / REDIS_URL: invalid value: must be a URL starting with redis:// or rediss://'],
  ] as const) {
    assert.throws(() => loadConfig(ops, { argv: [...argv] }), (e: unknown) => e instanceof ConfigError && e.problems.length === 1 && e.problems[0] === problem, argv.join(' '));
  }
  const open = { url: opt.url({ flag: 'url', env: 'DEMO_URL', protocols: ['http:', 'https:'], doc: 'A URL.' }) };
  assert.throws(() => loadConfig(open, { argv: ['--url', 'ftp://h'] }), (e: unknown) => e instanceof ConfigError && e.problems[0] === '--url / DEMO_URL: must be a URL starting with http:// or https://');
});

test('an integer past what a double holds exactly, an empty data directory and a pg_ schema are refused at start', () => {
  assert.throws(() => loadConfig(spec, { argv: ['--body-limit', '9'.repeat(400)] }), /--body-limit.*is too large/);
  assert.throws(() => loadConfig(spec, { env: { DATA_DIR: '' } }), /--data-dir \/ DATA_DIR: is empty/);
  assert.throws(() => loadConfig(spec, { argv: ['--db-schema', 'pg_audit'] }), /--db-schema.*pg_ is PostgreSQL's/);
  assert.equal(loadConfig(spec, { argv: ['--db-schema', 'audit_pg_x'] }).dbSchema, 'audit_pg_x');
});
