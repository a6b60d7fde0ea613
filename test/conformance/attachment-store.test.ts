import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AttachmentRow } from '../../src/sync/attachments/attachment-store.js';
import type { SyncDeps } from '../../src/sync/deps.js';
import { SYNC_STORE_FACTORIES } from './sync-stores.js';

/** The AttachmentStore contract (src/sync/attachments/attachment-store.ts) on every implementation. */
for (const f of SYNC_STORE_FACTORIES) {
  describe(`AttachmentStore conformance: ${f.name}`, () => {
    let deps: SyncDeps;
    before(async () => { deps = await f.open(); });
    after(() => deps.close());

    const row = (over: Partial<AttachmentRow> = {}): AttachmentRow => ({
      uuid: randomUUID(), business_id: randomUUID(), record_type: 'invoice', record_uuid: randomUUID(), filename: 'a.pdf',
      stored_name: randomUUID(), size: 3, sha256: 'ab'.repeat(32), uploaded_by: randomUUID(), created_at: Date.now(), ...over,
    });

    test('an inserted attachment is found by uuid exactly as written; an unknown uuid is absent', async () => {
      const r = row({ size: 26_214_400, created_at: 1_700_000_000_123 });
      await deps.attachments.insert(r);
      assert.deepEqual(await deps.attachments.find(r.uuid), r);
      assert.equal(await deps.attachments.find(randomUUID()), undefined);
    });

    test('list gives one record\'s attachments of one business, oldest first, nothing of another business or record', async () => {
      const business = randomUUID();
      const record = randomUUID();
      const second = row({ business_id: business, record_uuid: record, created_at: 2000 });
      const first = row({ business_id: business, record_uuid: record, created_at: 1000 });
      await deps.attachments.insert(second);
      await deps.attachments.insert(first);
      await deps.attachments.insert(row({ business_id: randomUUID(), record_uuid: record }));
      await deps.attachments.insert(row({ business_id: business, record_uuid: randomUUID() }));
      await deps.attachments.insert(row({ business_id: business, record_uuid: record, record_type: 'order' }));
      assert.deepEqual((await deps.attachments.list(business, 'invoice', record)).map((x) => x.uuid), [first.uuid, second.uuid]);
    });

    test('a stored name belongs to one attachment only', async () => {
      const r = row();
      await deps.attachments.insert(r);
      await assert.rejects(deps.attachments.insert(row({ stored_name: r.stored_name })));
    });

    test('referenced says which stored names an attachment uses, across more names than one IN list holds', async () => {
      const used = row();
      await deps.attachments.insert(used);
      const names = [...Array.from({ length: 1200 }, () => randomUUID()), used.stored_name];
      assert.deepEqual(await deps.attachments.referenced(names), new Set([used.stored_name]));
      assert.deepEqual(await deps.attachments.referenced([]), new Set());
    });

    test('the sweep mark starts at 0 and only moves forward', async () => {
      assert.equal(await deps.attachments.sweptUntil(), 0);
      await deps.attachments.markSwept(5000);
      await deps.attachments.markSwept(3000);
      assert.equal(await deps.attachments.sweptUntil(), 5000);
      await deps.attachments.markSwept(9000);
      assert.equal(await deps.attachments.sweptUntil(), 9000);
    });
  });
}
