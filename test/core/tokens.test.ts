import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { generateToken, hashToken, parseBearer, safeEqual } from '../../src/core/auth/tokens.js';

test('tokens are prefixed, random and hash deterministically', () => {
  const a = generateToken('hm');
  const b = generateToken('hm');
  assert.match(a, /^hm_[A-Za-z0-9_-]{43}$/);
  assert.notEqual(a, b);
  assert.equal(hashToken(a), hashToken(a));
  assert.notEqual(hashToken(a), hashToken(b));
});

test('a token\'s hash is the hex SHA-256 of its UTF-8 bytes, the form every stored token hash has', () => {
  assert.equal(hashToken('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(hashToken('hm_é\u{1F600}'), createHash('sha256').update(Buffer.from('hm_é\u{1F600}', 'utf8')).digest('hex'));
});

test('parseBearer accepts only a well-formed bearer header', () => {
  assert.equal(parseBearer('Bearer hm_abcdefgh'), 'hm_abcdefgh');
  assert.equal(parseBearer('bearer hm_abcdefgh'), 'hm_abcdefgh');
  assert.equal(parseBearer(undefined), undefined);
  assert.equal(parseBearer('Basic dXNlcjpwYXNz'), undefined);
  assert.equal(parseBearer('Bearer '), undefined);
  assert.equal(parseBearer('Bearer a b'), undefined);
});

test('safeEqual compares content, including different lengths', () => {
  assert.equal(safeEqual('abc', 'abc'), true);
  assert.equal(safeEqual('abc', 'abd'), false);
  assert.equal(safeEqual('abc', 'abcd'), false);
});
