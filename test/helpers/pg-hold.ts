// Why: a PostgreSQL race between two transactions is reproduced in one order every run, by holding one of them open.
import assert from 'node:assert/strict';
import { Kysely, PostgresDialect, sql, TableNode, type KyselyPlugin, type RootOperationNode } from 'kysely';
import type { Database } from '../../src/core/storage/database.js';
import { createPgPool } from '../../src/core/storage/pg-pool.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The statement to hold after: the first INSERT into, or SELECT from, `table`. */
export interface HoldPoint {
  after: 'insert' | 'select';
  table: string;
}

function matches(node: RootOperationNode, at: HoldPoint): boolean {
  if (at.after === 'insert') return node.kind === 'InsertQueryNode' && node.into?.table.identifier.name === at.table;
  const from = node.kind === 'SelectQueryNode' ? node.from?.froms[0] : undefined;
  return from !== undefined && TableNode.is(from) && from.table.identifier.name === at.table;
}

export interface Held<DB, T> {
  /** Queries on a connection of their own; a transaction that runs the statement at `at` is held there. */
  db: Kysely<DB>;
  /** `during`'s answer, and whether it was seen waiting on the held transaction (it may instead have settled). */
  outcome(): Promise<{ answer: T; waitedOn: boolean }>;
  close(): Promise<void>;
}

/**
 * Once the statement at `at` has run (its transaction still open), `during` starts, and the statement's caller
 * resumes only when another backend is seen waiting on this connection or `during` has settled. No clock decides.
 */
export async function holdAfter<DB, T>(database: Database<DB>, at: HoldPoint, during: () => Promise<T>): Promise<Held<DB, T>> {
  const target = database.pgTarget;
  assert.ok(target, 'PostgreSQL only');
  // One connection, so its backend pid is the held transaction's.
  const plain = new Kysely<DB>({ dialect: new PostgresDialect({ pool: createPgPool(target.url, target.schema, 1) }) });
  const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(plain);
  const pid = rows[0]!.pid;
  let outcome: Promise<T> | undefined;
  let waitedOn = false;
  const held = new Set<string>();
  const plugin: KyselyPlugin = {
    transformQuery({ node, queryId }) {
      if (outcome === undefined && matches(node, at)) held.add(queryId.queryId);
      return node;
    },
    async transformResult({ result, queryId }) {
      if (!held.delete(queryId.queryId) || outcome !== undefined) return result;
      let settled = false;
      outcome = during().finally(() => { settled = true; });
      while (!settled) {
        const blocked = await sql`SELECT 1 FROM pg_stat_activity WHERE ${pid}::int = ANY(pg_blocking_pids(pid))`.execute(database.db);
        if (blocked.rows.length) { waitedOn = true; break; }
        await pause(5);
      }
      return result;
    },
  };
  return {
    db: plain.withPlugin(plugin),
    async outcome() {
      assert.ok(outcome, `the statement to hold after (${at.after} ${at.table}) never ran`);
      return { answer: await outcome, waitedOn };
    },
    close: () => plain.destroy(),
  };
}
