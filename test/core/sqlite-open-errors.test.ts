import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/core/storage/database.js';

// SQLite's own messages ("file is not a database", "unable to open database file") say neither which file nor why.
test('a file that cannot be opened as the database is named in the error, with SQLite\'s code', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'open-errors-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const open = (sqliteFile: string) => openDatabase({ databaseUrl: undefined, pgSchema: 'unused', dataDir: dir, sqliteFile, migrations: () => ({}) });
  writeFileSync(path.join(dir, 'text.db'), 'not a database, just text that is long enough to have a header '.repeat(4));
  await assert.rejects(open('text.db'), (e: Error) => e.message === `cannot open the database ${path.join(dir, 'text.db')}: file is not a database (SQLITE_NOTADB)`);
  mkdirSync(path.join(dir, 'folder.db'));
  await assert.rejects(open('folder.db'), (e: Error) => e.message.startsWith(`cannot open the database ${path.join(dir, 'folder.db')}: `) && /SQLITE_CANTOPEN/.test(e.message), 'a directory where the file should be');
});
