import { test } from 'node:test';
import { startSync } from './helpers/sync.js';
test('plan', async () => {
  for (const backend of ['sqlite', 'postgres'] as const) {
  const s = await startSync(backend);
  const db = s.deps.database.db;
  const q = (f: string) => {
    let x = db.selectFrom('sync_conflicts').selectAll().where('business_id', '=', 'b').where('id', '>', 0);
    if (f === 'resolved') x = x.where('resolution', '!=', 'pending');
    return x.orderBy('id').limit(50).compile();
  };
  for (const f of ['all', 'resolved']) {
    const c = q(f);
    if (backend === 'sqlite') console.log(f, s.deps.database.sqlite!.prepare('EXPLAIN QUERY PLAN ' + c.sql).all(...(c.parameters as unknown[])));
    else { const cl = await s.deps.database.pgPool!.connect(); await cl.query('SET enable_seqscan=off'); console.log(f, (await cl.query('EXPLAIN ' + c.sql, c.parameters as unknown[])).rows); cl.release(); }
  }
  for (const [t,col] of [['access_tokens','expires_at'],['sync_conflicts','resolved_at']]) {
    const c = db.selectFrom(t as 'access_tokens').select('expires_at').where(col as 'expires_at', '<', 5).limit(10).compile();
    if (backend === 'sqlite') console.log(t, s.deps.database.sqlite!.prepare('EXPLAIN QUERY PLAN ' + c.sql).all(...(c.parameters as unknown[])));
  }
  await s.close();
  }
});
