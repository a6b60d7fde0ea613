import { randomUUID } from 'node:crypto';
import { call } from '../../helpers/http.js';
import { newBusiness, newUser, startSync, type SyncUnderTest, type TestBusiness, type TestUser } from '../../helpers/sync.js';
import { change, device } from '../../sync/push-client.js';
import { operations, type FuzzTarget, type Operation } from './operations.js';

export interface SyncFuzzWorld {
  s: SyncUnderTest;
  user: TestUser;
  business: TestBusiness;
  /** A record of the fuzzer's business, with one pending conflict. */
  record: string;
  target: FuzzTarget;
  /** Every operation of the OpenAPI document but logout (it would end the fuzzer's session and has nothing to fuzz). */
  ops: Operation[];
}

/** A sync service with a fuzzing user and business, and a bystander whose data must never change. */
export async function syncFuzzWorld(backend: 'sqlite' | 'postgres'): Promise<SyncFuzzWorld> {
  const s = await startSync(backend);
  const user = await newUser(s);
  const other = await newUser(s);
  const business = await newBusiness(s, user);
  const otherBusiness = await newBusiness(s, other);
  const record = randomUUID();
  await device(s.url, user.token, business.id, 'd1').push({ changes: [change(record, 1)] });
  const conflict = await device(s.url, user.token, business.id, 'd2').push({ changes: [change(record, 1, { other: true })] });
  const conflictId = String(conflict.body.conflicts[0].id);
  const read = async (token: string, businessId: string) => {
    const hb = { 'x-business-id': businessId };
    const replies = await Promise.all([
      call(s.url, 'GET', '/api/sync/status', { token, headers: hb }),
      call(s.url, 'GET', `/api/business/${businessId}/members`, { token }),
      call(s.url, 'GET', '/api/business', { token }),
      call(s.url, 'GET', `/api/sync/attachments?record_type=invoice&record_uuid=${record}`, { token, headers: hb }),
      call(s.url, 'GET', '/api/sync/conflicts?status=all', { token, headers: hb }),
    ]);
    return replies.map((r) => r.body);
  };
  const target: FuzzTarget = {
    url: s.url,
    headers: { authorization: `Bearer ${user.token}`, 'x-business-id': business.id },
    param: (op, name) => {
      if (name === 'id' && op.path.startsWith('/api/sync/conflicts')) return conflictId;
      if (name === 'id') return business.id;
      if (name === 'userId') return other.id;
      if (name === 'uuid') return randomUUID();
      throw new Error(`${op.method} ${op.path}: no value for {${name}}; teach the fuzzer`);
    },
    fixBody: (op, body) => {
      if (!body || typeof body !== 'object' || Array.isArray(body)) return body;
      if (op.path === '/api/sync/push' || op.path === '/api/auth/token') return { ...body, business_id: business.id };
      return body;
    },
    fingerprint: async () => {
      const [mine, theirs] = await Promise.all([read(user.token, business.id), read(other.token, otherBusiness.id)]);
      return { mine, theirs };
    },
  };
  return { s, user, business, record, target, ops: operations(s.app).filter((o) => o.path !== '/api/auth/logout') };
}
