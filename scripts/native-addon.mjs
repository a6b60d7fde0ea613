// Why: npm builds better-sqlite3 against the headers its `nodedir` setting names, and a machine-wide npmrc (Debian's
// npm sets one) can name another Node.js than the one on PATH; `npm start` and `npm test` then fail to open any database.
// Both check the addon first and rebuild it once for the Node.js that runs them, when that one ships its headers.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** Whether `error` is a native addon built for another Node.js (its NODE_MODULE_VERSION differs from this one's). */
export function builtForAnotherNode(error) {
  return error instanceof Error && error.code === 'ERR_DLOPEN_FAILED' && /NODE_MODULE_VERSION/.test(error.message);
}

/** The prefix of the Node.js running this (its headers are at include/node when it ships them). */
export function runningNodeDir() {
  return path.resolve(process.execPath, '..', '..');
}

/**
 * The error opening an in-memory database throws, in a child process: once a process has loaded an addon that failed
 * its version check, it cannot load the rebuilt one (the library stays mapped), so the check after a rebuild needs a
 * process of its own as much as the services do.
 */
function loadsSqlite(root) {
  const probe = "try { new (require('better-sqlite3'))(':memory:').close() } catch (e) { process.stdout.write(JSON.stringify({ code: e.code, message: String(e.message) })) }";
  const r = spawnSync(process.execPath, ['-e', probe], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) return new Error(`the check could not run: ${(r.stderr || String(r.signal)).split('\n')[0]}`);
  if (!r.stdout) return undefined;
  const { code, message } = JSON.parse(r.stdout);
  return Object.assign(new Error(message), { code });
}

/**
 * Makes sure better-sqlite3 loads in this Node.js, rebuilding it once (npm rebuild, with this Node.js's headers) when
 * it was built for another. Returns a one-line problem for the caller to print, or undefined when it loads.
 */
export function ensureSqliteAddon(root, who) {
  const first = loadsSqlite(root);
  if (!first) return undefined;
  if (!builtForAnotherNode(first)) return `${who}: better-sqlite3 does not load: ${first.message.split('\n')[0]}`;
  const nodeDir = runningNodeDir();
  const configured = process.env.npm_config_nodedir;
  const fix = `npm_config_nodedir=${nodeDir} npm rebuild better-sqlite3`;
  if (!existsSync(path.join(nodeDir, 'include', 'node', 'node_version.h'))) {
    return `${who}: better-sqlite3 was built for another Node.js than ${process.version}${configured ? ` (npm's nodedir is ${configured})` : ''}, and this one has no headers to rebuild it with: install Node.js with its headers, or point npm's nodedir at them and run npm rebuild better-sqlite3`;
  }
  process.stderr.write(`${who}: better-sqlite3 was built for another Node.js${configured ? ` (npm's nodedir is ${configured})` : ''}; rebuilding it for ${process.version} (${fix})...\n`);
  const npm = process.env.npm_execpath;
  const rebuilt = npm
    ? spawnSync(process.execPath, [npm, 'rebuild', 'better-sqlite3'], { cwd: root, stdio: 'inherit', env: { ...process.env, npm_config_nodedir: nodeDir } })
    : spawnSync('npm', ['rebuild', 'better-sqlite3'], { cwd: root, stdio: 'inherit', env: { ...process.env, npm_config_nodedir: nodeDir } });
  const again = rebuilt.status === 0 ? loadsSqlite(root) : new Error(`npm rebuild exited with ${rebuilt.status ?? rebuilt.signal}`);
  return again ? `${who}: better-sqlite3 still does not load (${again.message.split('\n')[0]}): run ${fix}` : undefined;
}
