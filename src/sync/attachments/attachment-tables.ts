/** Row types of `sync_attachments` (migration 0002) and `sync_maintenance` (migration 0004). */
export interface AttachmentTables {
  sync_attachments: {
    uuid: string;
    business_id: string;
    record_type: string;
    record_uuid: string;
    /** The client's name, sanitised; only ever shown, never used as a path. */
    filename: string;
    stored_name: string;
    size: number;
    sha256: string;
    uploaded_by: string;
    /** Epoch milliseconds. */
    created_at: number;
  };
  /** Progress marks of background sweeps, by name (epoch milliseconds). */
  sync_maintenance: {
    name: string;
    value: number;
  };
}
