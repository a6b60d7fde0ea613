/** Row types of `sync_attachments` (migration 0002), `sync_maintenance` (0004), `sync_uploads` and `sync_upload_parts` (0008). */
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
  /** A resumable upload: the file announced, and how many of its bytes have arrived. */
  sync_uploads: {
    id: string;
    business_id: string;
    user_id: string;
    record_type: string;
    record_uuid: string;
    /** Sanitised as an attachment's. */
    filename: string;
    /** The size announced; the upload is complete when `received` reaches it. */
    size: number;
    /** The hex SHA-256 announced, checked once every byte is in; null when the client gave none. */
    sha256: string | null;
    received: number;
    /** Epoch milliseconds. */
    created_at: number;
    /** Epoch milliseconds: a day after the last byte (or the completion), when the sweep removes the session. */
    expires_at: number;
    /** The attachment the upload became, once complete. */
    attachment_uuid: string | null;
  };
  /** The bytes of an upload, as the blobs its requests brought: `size` bytes from `start`. */
  sync_upload_parts: {
    upload_id: string;
    start: number;
    size: number;
    stored_name: string;
    /** Hex SHA-256 of the piece, measured as it arrived: a piece that is the whole file needs no second read. */
    sha256: string;
  };
}
