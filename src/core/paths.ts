import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (holds package.json), found from this file whether run from src/ or dist/. */
export const PROJECT_ROOT: string = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
})();

/** Static browser assets live outside src/ so the compiled build finds them too. */
export function staticDir(service: string): string {
  return path.join(PROJECT_ROOT, 'static', service);
}
