import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/core/config.js';
import { loadSyncConfig } from '../../src/sync/config.js';

describe('sync security options', () => {
  test('--feed-allowed-origins takes exact origins and refuses anything else at start', () => {
    const ok = loadSyncConfig({ argv: ['--feed-allowed-origins', 'https://app.example.com, http://localhost:5173'] });
    assert.deepEqual(ok.feedAllowedOrigins, ['https://app.example.com', 'http://localhost:5173']);
    for (const bad of ['app.example.com', 'https://app.example.com/path', 'ftp://files.example.com', '*']) {
      assert.throws(() => loadSyncConfig({ argv: ['--feed-allowed-origins', bad] }), (e: unknown) => e instanceof ConfigError && /is not an origin/.test(e.message), bad);
    }
    assert.deepEqual(loadSyncConfig().feedAllowedOrigins, [], 'no browser origin by default');
    // Kept as a browser sends its Origin header, which is what they are compared with.
    assert.deepEqual(loadSyncConfig({ argv: ['--feed-allowed-origins', 'https://app.example.com/,HTTPS://Other.Example.com:8443'] }).feedAllowedOrigins,
      ['https://app.example.com', 'https://other.example.com:8443']);
  });

  test('defaults: 90-day sessions, 2 hashes at once with 32 waiting, 20 feed sockets per user', () => {
    const c = loadSyncConfig();
    assert.equal(c.sessionMaxAgeSeconds, 90 * 86_400);
    assert.equal(c.passwordHashConcurrency, 2);
    assert.equal(c.passwordHashQueue, 32);
    assert.equal(c.feedMaxSocketsPerUser, 20);
  });
});
