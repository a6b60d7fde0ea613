// Start-up errors name the database or Redis they could not reach; the password never reaches the terminal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redactConnectionUrl } from '../../src/core/connection-url.js';

test('a connection URL in an error keeps its host and database, never a password (user part or query), and an unparseable one is not echoed', () => {
  assert.equal(redactConnectionUrl('postgres://app:s3cret@db:5432/fleet?sslmode=require&password=p2&sslpassword=p3'),
    'postgres://app:***@db:5432/fleet?sslmode=require&password=***&sslpassword=***');
  assert.equal(redactConnectionUrl('redis://127.0.0.1:6379/0'), 'redis://127.0.0.1:6379/0');
  assert.equal(redactConnectionUrl('not a url with secret'), 'the configured URL');
});
