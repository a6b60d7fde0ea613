import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dummyHash, hashPassword, verifyPassword } from '../../src/sync/accounts/password-hash.js';
import { passwordProblem } from '../../src/sync/accounts/password-policy.js';
import { normalizeEmail } from '../../src/sync/accounts/email.js';
import { loadSyncConfig } from '../../src/sync/config.js';

test('scrypt hashes at the production cost verify the right password only', async () => {
  const log2N = loadSyncConfig().scryptLog2N;
  assert.equal(log2N, 15);
  const h = await hashPassword('correct horse battery staple', log2N);
  assert.match(h, /^scrypt\$15\$8\$3\$/);
  assert.equal(await verifyPassword('correct horse battery staple', h), true);
  assert.equal(await verifyPassword('correct horse battery stapler', h), false);
});

test('each hash has its own salt, and verification reads the parameters from the stored hash', async () => {
  const a = await hashPassword('same password here', 10);
  const b = await hashPassword('same password here', 11);
  assert.notEqual(a.split('$')[4], b.split('$')[4]);
  assert.equal(await verifyPassword('same password here', a), true);
  assert.equal(await verifyPassword('same password here', b), true);
});

test('a malformed stored hash never verifies', async () => {
  for (const stored of ['', 'plain', 'scrypt$10$8$3$c2FsdA==', 'bcrypt$10$8$3$c2FsdA==$a2V5', 'scrypt$99$8$3$c2FsdA==$a2V5', 'scrypt$x$8$3$c2FsdA==$a2V5']) {
    assert.equal(await verifyPassword('anything at all', stored), false, stored);
  }
});

test('the dummy hash is made once per cost and rejects any password', async () => {
  assert.equal(await dummyHash(10), await dummyHash(10));
  assert.equal(await verifyPassword('', await dummyHash(10)), false);
});

test('the password policy: 10 to 200 characters, counted as code points, not trivial, not the e-mail', () => {
  assert.equal(passwordProblem('0123456789', 'a@b.co'), undefined);
  assert.equal(passwordProblem('🔑🔑🔑🔑🔑🔒🔒🔒🔒🔒', 'a@b.co'), undefined, 'ten emoji are ten characters');
  assert.match(passwordProblem('012345678', 'a@b.co') ?? '', /at least 10/);
  assert.match(passwordProblem('A@B.co.com', 'a@b.co.com') ?? '', /e-mail/);
  // Every Unicode white space counts, not only what String.prototype.trim strips (NEL, U+0085, it keeps).
  for (const blank of [' '.repeat(10), '\u0085 '.repeat(5), '\u00a0\u2003'.repeat(5)]) {
    assert.equal(passwordProblem(blank, 'a@b.co'), 'password must not be only whitespace', JSON.stringify(blank));
  }
});

test('e-mail addresses are trimmed and lower-cased; invalid ones are refused', () => {
  assert.equal(normalizeEmail('  Ada.Lovelace+sync@Example.COM '), 'ada.lovelace+sync@example.com');
  for (const bad of ['a', 'a@', '@b.com', 'a@b', 'a@b..com', '.a@b.com', 'a.@b.com', 'a@-b.com', 'a b@c.com', 'a@b.com\u0000', 'a\nb@c.com', 'ä@b.com']) {
    assert.equal(normalizeEmail(bad), undefined, JSON.stringify(bad));
  }
});
