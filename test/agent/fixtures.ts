import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/core/paths.js';

export const FIXTURES = path.join(PROJECT_ROOT, 'test', 'fixtures', 'agent');

/** Text of a fixture file under test/fixtures/agent. */
export function fixture(name: string): string {
  return readFileSync(path.join(FIXTURES, name), 'utf8');
}
