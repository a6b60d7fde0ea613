import { randomUUID } from 'node:crypto';
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import path from 'node:path';

/**
 * The agent's stable identity: a random UUID created on first start and kept
 * next to the spool, so it survives restarts and upgrades but not a wipe of
 * the state directory. /etc/machine-id is not used: machine-id(5) asks that
 * it not be sent off the host.
 */
export async function persistentAgentId(dir: string): Promise<string> {
  const file = path.join(dir, 'agent-id');
  try {
    const id = (await readFile(file, 'utf8')).trim();
    if (id) return id;
  } catch (e: unknown) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const id = randomUUID();
  const fh = await open(`${file}.tmp`, 'w', 0o600);
  try { await fh.writeFile(`${id}\n`); await fh.sync(); } finally { await fh.close(); }
  await rename(`${file}.tmp`, file);
  return id;
}
