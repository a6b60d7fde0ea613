import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, helpText, httpOptions, loadConfig, opt } from '../../src/core/config.js';

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
