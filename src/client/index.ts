// Why: the public entry of `fleetsync/client` (browsers and Node); Node-only storage is in `fleetsync/client/sqlite`.
export { SyncClient, type ChangeApplied, type HistoryReset, type SyncClientEvents, type SyncClientOptions, type SyncState } from './sync-client.js';
export { SyncClientError, isTransient, type SyncErrorCode } from './errors.js';
export { fieldMerge, lastWriterWins, sameJson, type ConflictChoice, type ConflictResolver, type ConflictView } from './conflict-resolvers.js';
export { createMemoryStore } from './memory-store.js';
export { createIndexedDbStore } from './indexeddb-store.js';
export type { CollectionName, Collections, LocalConflict, LocalRecord, LocalStore, OutboxEntry, RecordData, StoreOp } from './local-store.js';
export type { AttachmentClient, AttachmentOptions, Progress, UploadInput } from './attachments.js';
export type { FeedSocket, FeedSocketConstructor } from './feed.js';
export type { SavedSession } from './session.js';
export type { BackoffOptions } from './backoff.js';
export type { TransportOptions } from './transport.js';
export type * from './wire.js';
