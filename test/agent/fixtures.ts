import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'agent');

/** Text of a fixture file under test/fixtures/agent. */
export function fixture(name: string): string {
  return readFileSync(path.join(FIXTURES, name), 'utf8');
}
