// Why: a test that starts a script as its own process runs it as the suite itself runs, from the sources or from the
// suite's transpiled build (scripts/run-tests.mjs), so `npm test` never pays tsx's start in each child.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROJECT_ROOT } from '../../src/core/paths.js';

const here = fileURLToPath(import.meta.url);
/** The tree this file was loaded from: the repository, or the build directory under tmp/ that mirrors it. */
const TREE = path.resolve(path.dirname(here), '..', '..');
const fromSource = here.endsWith('.ts');

/**
 * The node arguments that run `script` (a path from the repository root, as `src/metrics/cli.ts`): through tsx
 * when this test runs from source, the transpiled `.js` beside this file's build otherwise.
 */
export function nodeEntry(script: string): string[] {
  return fromSource ? ['--import', 'tsx', path.join(PROJECT_ROOT, script)] : [path.join(TREE, script.replace(/\.ts$/, '.js'))];
}
