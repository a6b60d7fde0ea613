// Why: fs.mkdir's recursive mode spins for ever under procfs (a data directory of /proc/x never started, at 100 % CPU).
import { lstatSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * Creates `dir` and its missing parents, like `mkdir -p`, each with `mode`;
 * an existing directory is left as it is. Node's `{ recursive: true }` reads
 * ENOENT as "the parent is missing", creates the parent (EEXIST) and tries
 * again; procfs answers ENOENT to any new name, so that loop never ends. Here
 * the missing components are found first and created in order, once each, and
 * any failure is final: under /proc the error is the child's ENOENT. With `what`
 * ("the attachment directory") the error says what the directory is for and its
 * whole path; the system's code stays. Synchronous: it runs when a service, the
 * agent or a store opens, a few system calls.
 */
export function makeDir(dir: string, mode?: number, what?: string): void {
  const target = path.resolve(dir);
  try {
    makeMissing(target, mode);
  } catch (e) {
    if (!what) throw e;
    // The system's message names only the component that failed, not what the directory is for.
    throw Object.assign(new Error(`cannot create ${what} ${target}: ${e instanceof Error ? e.message : String(e)}`, { cause: e }), { code: (e as { code?: string }).code });
  }
}

function makeMissing(target: string, mode: number | undefined): void {
  const missing: string[] = [];
  for (let d = target; ; d = path.dirname(d)) {
    // A dangling link counts as there (lstat), so that the name under it fails ENOENT, as it does in Node's mkdir.
    const found = statSync(d, { throwIfNoEntry: false }) ?? lstatSync(d, { throwIfNoEntry: false });
    // A file where the directory should be: mkdir's own EEXIST (a file in a parent fails ENOTDIR below).
    if (found && d === target && !found.isDirectory()) mkdirSync(d);
    if (found || path.dirname(d) === d) break;
    missing.push(d);
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d, { mode });
    } catch (e) {
      // Made meanwhile by someone else is fine; a file or a dangling link in its place is not.
      if ((e as { code?: string }).code !== 'EEXIST' || !statSync(d, { throwIfNoEntry: false })?.isDirectory()) throw e;
    }
  }
}
