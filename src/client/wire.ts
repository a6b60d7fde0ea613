// Why: the client's view of the wire, inferred from the very TypeBox schemas the server validates with, so the two cannot drift.
import type { Static } from 'typebox';
import type { BusinessTokenBody, RefreshReplyBody, SessionBody } from '../sync/http/auth-routes.js';
import type { BusinessBody, MemberBody } from '../sync/businesses/business-routes.js';
import type { UserBody } from '../sync/http/schemas.js';
import type { AttachmentSchema, UploadSessionSchema, UploadStartSchema } from '../sync/attachments/attachment-schemas.js';

export type { Change, Conflict, Operation, PullResult, PushResult, Rejection, Resolution, SyncStatus } from '../sync/changes/change-schemas.js';
export type SessionReply = Static<typeof SessionBody>;
export type RefreshReply = Static<typeof RefreshReplyBody>;
export type BusinessTokenReply = Static<typeof BusinessTokenBody>;
export type User = Static<typeof UserBody>;
export type Business = Static<typeof BusinessBody>;
export type Member = Static<typeof MemberBody>;
export type Attachment = Static<typeof AttachmentSchema>;
export type UploadSession = Static<typeof UploadSessionSchema>;
export type UploadStart = Static<typeof UploadStartSchema>;
/** A feed message (docs/sync-api.md, "WebSocket change feed"). */
export type { ChangeEvent as FeedMessage } from '../sync/feed/change-events.js';
