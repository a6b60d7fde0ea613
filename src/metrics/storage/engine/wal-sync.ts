import { closeSync, fsync, openSync } from 'node:fs';

/**
 * fsync of a SQLite WAL file through libuv's thread pool. The file is opened
 * at the first sync (SQLite creates it at the first write) and kept open: it
 * is truncated and reused in place, never replaced, while the database is open.
 */
export function walSync(file: string): { sync: () => Promise<void>; close: () => void } {
  let fd: number | undefined;
  return {
    sync: () => new Promise<void>((resolve, reject) => {
      try {
        fd ??= openSync(file, 'r');
      } catch (e: unknown) {
        reject(e);
        return;
      }
      fsync(fd, (e) => (e ? reject(e) : resolve()));
    }),
    close: () => {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
