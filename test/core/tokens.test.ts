import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateToken, hashToken, parseBearer, safeEqual } from '../../src/core/auth/tokens.js';

test('tokens are prefixed, random and hash deterministically', () => {
  const a = generateToken('hm');
  const b = generateToken('hm');
  assert.match(a, /^hm_[A-Za-z0-9_-]{43}$/);
  assert.notEqual(a, b);
  assert.equal(hashToken(a), hashToken(a));
  assert.notEqual(hashToken(a), hashToken(b));
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
