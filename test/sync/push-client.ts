import { randomUUID } from 'node:crypto';
import { call, type Reply } from '../helpers/http.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read loosely shaped JSON bodies, like call()
type JsonReply = Reply<any>;

/** A device as the sync tests drive it: one instance id, one business, a bearer token. */
export interface Device {
  instanceId: string;
  businessId: string;
  token: string;
  push(body: { changes?: unknown[]; tombstones?: unknown[]; branch?: string }): Promise<JsonReply>;
  pull(sinceVersion: number, limit?: number): Promise<JsonReply>;
  /** Pulls page after page from `sinceVersion` until has_more is false; returns every change and the final version. */
  pullAll(sinceVersion: number, limit?: number): Promise<{ changes: PulledChange[]; version: number }>;
}

export interface PulledChange {
  id: number;
  version: number;
  table_name: string;
  record_uuid: string;
  operation: string;
  data: Record<string, unknown>;
  record_version: number;
  instance_id: string;
}

export function device(url: string, token: string, businessId: string, instanceId = `dev-${randomUUID().slice(0, 8)}`): Device {
  const headers = { 'x-business-id': businessId };
  const d: Device = {
    instanceId, businessId, token,
    push: (body) => call(url, 'POST', '/api/sync/push', { token, headers, json: { business_id: businessId, instance_id: instanceId, branch: body.branch ?? 'main', changes: body.changes ?? [], tombstones: body.tombstones ?? [] } }),
    pull: (sinceVersion, limit) => call(url, 'POST', '/api/sync/pull', { token, headers, json: limit === undefined ? { since_version: sinceVersion } : { since_version: sinceVersion, limit } }),
    async pullAll(sinceVersion, limit) {
      const changes: PulledChange[] = [];
      let version = sinceVersion;
      for (;;) {
        const r = await d.pull(version, limit);
        if (r.status !== 200) throw new Error(`pull failed: ${r.status} ${r.text}`);
        changes.push(...(r.body.changes as PulledChange[]));
        version = r.body.version;
        if (!r.body.has_more) return { changes, version };
      }
    },
  };
  return d;
}

export function change(recordUuid: string, version: number, data: Record<string, unknown> = { v: version }, operation = version === 1 ? 'create' : 'update', tableName = 'customers') {
  return { table_name: tableName, record_uuid: recordUuid, version, operation, data };
}

export function tombstone(recordUuid: string, version: number, tableName = 'customers') {
  return { table_name: tableName, record_uuid: recordUuid, version };
}
