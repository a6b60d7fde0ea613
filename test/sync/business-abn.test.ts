import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isValidAbnChecksum, parseAbn } from '../../src/sync/businesses/abn.js';
import { validAbn } from '../helpers/sync.js';

test('published example ABNs pass the checksum', () => {
  // ABR's worked example and two ABNs of Australian government agencies.
  for (const abn of ['51824753556', '53004085616', '33051775556']) assert.ok(isValidAbnChecksum(abn), abn);
});

test('changing any single digit of a valid ABN breaks the checksum', () => {
  const abn = '51824753556';
  for (let i = 0; i < 11; i++) {
    for (let d = 0; d <= 9; d++) {
      if (String(d) === abn[i]) continue;
      const mutated = abn.slice(0, i) + d + abn.slice(i + 1);
      assert.equal(isValidAbnChecksum(mutated), false, mutated);
    }
  }
});

test('parseAbn removes spaces, insists on 11 digits and says why it refuses', () => {
  assert.deepEqual(parseAbn('51 824 753 556'), { abn: '51824753556' });
  assert.deepEqual(parseAbn('5182475355'), { problem: 'abn: must be 11 digits' });
  assert.deepEqual(parseAbn('51-824-753-556'), { problem: 'abn: must be 11 digits' });
  assert.deepEqual(parseAbn('51824753557'), { problem: 'abn: fails the ABN checksum' });
});

test('the test builder only produces valid ABNs', () => {
  for (let i = 0; i < 50; i++) assert.ok(isValidAbnChecksum(validAbn()));
});
