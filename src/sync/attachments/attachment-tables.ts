/** Row type of `sync_attachments` (migration 0002). */
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
}
