import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { ERROR_STATUS, type ErrorCode } from '../../src/core/errors.js';
import { PROJECT_ROOT } from '../../src/core/paths.js';

const SRC = path.join(PROJECT_ROOT, 'src');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Codes that only Fastify's own errors reach, through their status (core/http/error-handler.ts). */
const FRAMEWORK_ONLY: ErrorCode[] = ['method_not_allowed'];

test('every code of the error catalogue is thrown somewhere: a documented code that nothing answers is a lie', () => {
  const code = sources(SRC).filter((f) => !f.endsWith(path.join('core', 'errors.ts'))).map((f) => readFileSync(f, 'utf8')).join('\n');
  for (const c of Object.keys(ERROR_STATUS) as ErrorCode[]) {
    if (FRAMEWORK_ONLY.includes(c)) continue;
    assert.match(code, new RegExp(`AppError\\('${c}'|error: '${c}'`), `${c} (${ERROR_STATUS[c]}) is never answered`);
  }
});
