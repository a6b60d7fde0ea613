// Why: the offline-first engine: local writes go to a durable outbox numbered as the server expects, and push, pull, feed and conflicts keep the local store converging with the server.
import { AttachmentClient, type AttachmentOptions } from './attachments.js';
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { applyFieldChanges, sameJson, type ConflictChoice, type ConflictResolver, type ConflictView } from './conflict-resolvers.js';
import { SyncClientError, retriedLater } from './errors.js';
import { Emitter } from './events.js';
import { FeedConnection, type FeedSocketConstructor } from './feed.js';
import { conflictKey, outboxKey, recordKey, withStoreErrors, type LocalConflict, type LocalRecord, type LocalStore, type OutboxEntry, type RecordData, type StoreOp } from './local-store.js';
import { Session, type SavedSession, type SessionOptions } from './session.js';
import { createTransport, json, type TransportOptions } from './transport.js';
import { PUSH_LIMITS } from '../sync/changes/change-limits.js';
import { MAX_JSON_DEPTH, jsonValueProblem } from '../sync/http/json-value.js';
import type { Business, Change, Conflict, FeedMessage, PullResult, PushResult, Resolution, SyncStatus, User } from './wire.js';

export type SyncState = 'offline' | 'syncing' | 'up-to-date';

/** A record change made visible to the app: by a pull (`remote`), or by going back to the server's state after a rejected push or a conflict resolved for the server (`revert`). */
export interface ChangeApplied {
  table: string;
  uuid: string;
  data: RecordData | null;
  version: number;
  origin: 'remote' | 'revert';
}

/**
 * The server's history is not the one this device pulled: it was restored from a backup (and may have been written
 * since, reusing the versions this device had seen). The device pulls everything again from version 0 and converges on
 * what the server holds; its unsent edits stay queued.
 */
export interface HistoryReset {
  /** The version this device had pulled up to. */
  cursor: number;
  /** The server's version when the difference was found. */
  serverVersion: number;
}

export interface SyncClientEvents extends Record<string, unknown> {
  change: ChangeApplied;
  reset: HistoryReset;
  /**
   * The server refused this device's user the business (403: removed from it) during background syncing, which then
   * stops: retrying would only be refused again. Local data stays; `start()` tries again (say, once re-added).
   */
  accessLost: SyncClientError;
  state: SyncState;
  error: SyncClientError;
  conflict: ConflictView;
  sessionExpired: undefined;
}

export interface SyncClientOptions extends TransportOptions, Omit<SessionOptions, 'onChange'> {
  /** Where records, the outbox, conflicts and the session are kept. */
  store: LocalStore;
  /** The business this store holds. A store belongs to one business: opening it for another is refused. */
  businessId?: string;
  /** Device id sent as `instance_id` (default: generated once and kept in the store). */
  instanceId?: string;
  /** Branch recorded on conflicts (default `main`). */
  branch?: string;
  /** WebSocket constructor for the feed (default: the global one; on Node 20 pass the `ws` package's). */
  WebSocket?: FeedSocketConstructor;
  /** Automatic conflict policy (e.g. `lastWriterWins`, `fieldMerge`); without one conflicts wait for `resolveConflict`. */
  resolver?: ConflictResolver;
  /** Items per push (default 500; the server takes at most 1000). */
  pushBatchSize?: number;
  /** Changes per pull page (default 10,000: the server's most; it also ends a page at 4 MiB of data). */
  pullPageSize?: number;
  /** Feed reconnects. */
  reconnect?: BackoffOptions;
  /**
   * Background rounds start at most once per this many ms (default 1000): edits and feed messages in between wait for
   * the next one, so steady editing costs about one push a second of the user's rate limit (100 requests a minute).
   */
  minRoundIntervalMs?: number;
  /**
   * With the feed connected, a background round also pulls when nothing was pulled for this many ms (default 60,000):
   * the bound on a feed message lost on the way with nothing after it to show the gap.
   */
  safetyPullMs?: number;
  /** Retries of a failed background sync; never sooner than the retry_after of a 503 (at most maxRetryAfterSeconds). */
  retry?: BackoffOptions;
  attachments?: AttachmentOptions;
}

/** Bytes of JSON per push, well under the server's 1 MiB body limit. */
const PUSH_BODY_BUDGET = 768 * 1024;
/** Items the server takes in one push. */
const MAX_PUSH_ITEMS = 1000;
/**
 * With the feed connected, a background round pulls only when the feed gave cause (a gap in its versions, a message
 * without its data, a reconnect); and at least this often (`safetyPullMs`), for a message lost on the way (its publish
 * is at-most-once) while nothing else came after it.
 */
const SAFETY_PULL_MS = 60_000;
/**
 * Changes asked for per pull page. Every request counts against the user's rate limit (100 a minute by default), so a
 * device syncing a business of 100,000 records from nothing needs 10 pulls instead of 100, which spent the whole
 * minute's budget and waited out a 429. A server that takes fewer gives fewer.
 */
const PULL_PAGE = 10_000;

/** Measures a push's items in UTF-8 bytes, as the server counts its body limit. */
const UTF8 = new TextEncoder();

/**
 * Why a record's edits are held after a resolution: the server applied this device's side (`local`, the change at
 * server version `applied`, when known; null also when the server no longer had the conflict and this device queued
 * its side again), or kept its own and this device puts an edit on top (`server`).
 */
type Hold = { side: 'local'; applied: number | null } | { side: 'server' };

const META = {
  instance: 'instance_id', business: 'business_id', owner: 'user_id', cursor: 'cursor', mark: 'cursor_mark', resync: 'resync', session: 'session', seq: 'next_seq', renumbering: 'renumbering',
} as const;

/** The change at the cursor as this device applied it: the next pull must bring the same change at that version. */
interface CursorMark {
  version: number;
  change: string;
}

/**
 * What tells two changes at one server version apart: another record, record version, operation or device. Only the
 * device that made a change can push the same record version of that record again, and only by resending the frozen
 * change itself. Not its time or id, which a server upgrade could render differently and so set every client pulling again.
 */
function changeMark(c: Change): string {
  return JSON.stringify([c.table_name, c.record_uuid, c.record_version, c.operation, c.instance_id]);
}

/**
 * Whether a pull from `from` (asked from `from - 1` when `mark` is known) shows a history other than the one pulled
 * so far: the server's version below the cursor, or another change at the cursor's version.
 */
function diverged(page: PullResult, from: number, mark: CursorMark | undefined): boolean {
  if (page.version < from) return true;
  if (!mark) return false;
  const at = page.changes[0];
  return !at || at.version !== from || changeMark(at) !== mark.change;
}

/**
 * The sync client. Open it with `SyncClient.open`, sign in, then read and
 * write records locally (`get`, `list`, `put`, `delete`); `sync()` runs one
 * round trip, `start()` keeps syncing in the background over the feed.
 */
export class SyncClient {
  readonly attachments: AttachmentClient;
  private readonly emitter = new Emitter<SyncClientEvents>();
  private readonly session: Session;
  private mutex: Promise<void> = Promise.resolve();
  private outbox = new Map<string, OutboxEntry>();
  private conflictsByKey = new Map<string, LocalConflict>();
  /**
   * Records whose edits wait, after a resolution, to be numbered above the resolution's version (renumberResolved),
   * by record key. Stored, so a run that stops before its pull leaves them held for the next one.
   */
  private readonly renumbering = new Map<string, Hold>();
  /** Conflicts the resolver has still to settle (its resolution failed, or the run stopped first), by id. */
  private readonly unsettled = new Set<number>();
  /**
   * Whether a pull since the feed's last (re)connect has found the server's history to be the one pulled (see
   * `diverged`): until then a feed message is no proof of the next change (a server restored from a backup and written
   * since numbers other changes the same), and makes a pull instead of being applied. `feedConnects` tells a pull that
   * began before the latest reconnect.
   */
  private cursorChecked = false;
  private feedConnects = 0;
  /** The user whose data this store holds (the first to sign in on it); undefined until someone has. */
  private owner: string | undefined;
  private cursor = 0;
  /** The change at the cursor, when known (stores written by older clients have none until their next pull). */
  private mark: CursorMark | undefined;
  /** A pull from version 0 after a history reset is under way; records it has not brought again are still `stale`. */
  private resyncing = false;
  /** Counts history resets: a page asked for before one is not applied after it. */
  private epoch = 0;
  /** Most items the next push sends: halved after a 413, doubled back after each push the server took. */
  private pushCap = MAX_PUSH_ITEMS;
  private nextSeq = 1;
  private cycle: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  /** A background trigger came during a round: one more round follows it, unless the client is stopped first. */
  private kickAfter = false;
  private feed: FeedConnection | null = null;
  private started = false;
  private retryAttempt = 0;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  /** The retry timer waits out a retry_after the server named. */
  private serverAskedWait = false;
  private kickTimer: ReturnType<typeof setTimeout> | null = null;
  /** A background round must pull: the feed gave cause, or it was not connected. */
  private pullDue = true;
  private lastPullAt = 0;
  private lastRoundAt = 0;
  /** Feed messages are applied one after another, in arrival order. */
  private feedChain: Promise<void> = Promise.resolve();
  private safetyTimer: ReturnType<typeof setInterval> | null = null;
  private state: SyncState = 'offline';
  private closed = false;
  /** Aborted by close(): requests and waits in progress (a 429's retry_after) end at once with `closed`. */
  private readonly closing = new AbortController();

  private constructor(private readonly o: SyncClientOptions, readonly instanceId: string, private readonly store: LocalStore) {
    const transport = createTransport(o, this.closing.signal);
    this.session = new Session(transport, {
      ...o,
      onChange: (s) => {
        this.store.write([s ? { op: 'put', collection: 'meta', key: META.session, value: s } : { op: 'delete', collection: 'meta', key: META.session }])
          .catch((e: unknown) => this.emitter.emit('error', new SyncClientError('internal', `the session could not be saved: ${e instanceof Error ? e.message : String(e)}`, { cause: e })));
      },
      onSessionExpired: () => {
        o.onSessionExpired?.();
        this.emitter.emit('sessionExpired', undefined);
        this.stop();
      },
    });
    this.attachments = new AttachmentClient(this.session, () => this.requireBusiness(), { maxRetryAfterSeconds: o.maxRetryAfterSeconds, ...o.attachments }, store);
  }

  /**
   * Opens the store: claims it (a `store_in_use` error while another client, say another tab, holds it), then
   * restores the device id, the session, the pull cursor, the outbox and the pending conflicts. A failed open
   * closes the store.
   */
  static async open(o: SyncClientOptions): Promise<SyncClient> {
    await o.store.claim();
    try {
      return await SyncClient.restore({ ...o, store: withStoreErrors(o.store) });
    } catch (e: unknown) {
      await o.store.close().catch(() => undefined);
      throw e;
    }
  }

  private static async restore(o: SyncClientOptions): Promise<SyncClient> {
    const store = o.store;
    const storedBusiness = (await store.get('meta', META.business)) as string | undefined;
    const businessId = o.businessId?.toLowerCase();
    if (businessId && storedBusiness && storedBusiness !== businessId) {
      throw new SyncClientError('invalid_request', `this store holds business ${storedBusiness}; open another store for ${businessId}`);
    }
    const ops: StoreOp[] = [];
    let instanceId = (await store.get('meta', META.instance)) as string | undefined;
    if (o.instanceId && o.instanceId !== instanceId) instanceId = o.instanceId;
    instanceId ??= `dev-${randomId()}`;
    // Checked here: a push the server refuses for them would be taken for one refusing its items (pushOnce).
    if (!PUSH_LIMITS.instanceIdPattern.test(instanceId)) throw new SyncClientError('invalid_request', `instanceId: "${instanceId}" is not 1-128 of A-Z a-z 0-9 . _ : -`);
    if (o.branch !== undefined && (!o.branch || o.branch.length > PUSH_LIMITS.maxBranchLength || /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(o.branch))) {
      throw new SyncClientError('invalid_request', 'branch: 1-128 characters, no control or invisible format characters or line separators');
    }
    ops.push({ op: 'put', collection: 'meta', key: META.instance, value: instanceId });
    if (businessId && !storedBusiness) ops.push({ op: 'put', collection: 'meta', key: META.business, value: businessId });
    await store.write(ops);
    const client = new SyncClient({ ...o, ...(businessId || storedBusiness ? { businessId: businessId ?? storedBusiness } : {}) }, instanceId, store);
    const saved = ((await store.get('meta', META.session)) as SavedSession | undefined) ?? null;
    client.session.restore(saved);
    // A store from before the owner was recorded: its session's user, if it holds one.
    client.owner = ((await store.get('meta', META.owner)) as string | undefined) ?? saved?.user.id;
    client.cursor = ((await store.get('meta', META.cursor)) as number | undefined) ?? 0;
    client.mark = (await store.get('meta', META.mark)) as CursorMark | undefined;
    client.resyncing = (await store.get('meta', META.resync)) === true;
    client.nextSeq = ((await store.get('meta', META.seq)) as number | undefined) ?? 1;
    // A key alone was stored by an older client, for a `local` resolution.
    for (const held of ((await store.get('meta', META.renumbering)) as (string | [string, Hold])[] | undefined) ?? []) {
      if (typeof held === 'string') client.renumbering.set(held, { side: 'local', applied: null });
      else client.renumbering.set(held[0], held[1]);
    }
    for (const e of await store.list('outbox')) client.outbox.set(outboxKey(e.seq), e);
    for (const c of await store.list('conflicts')) {
      client.conflictsByKey.set(conflictKey(c.conflict.id), c);
      // Left pending by a run that stopped before its resolver settled it: offered again in the first round.
      if (o.resolver) client.unsettled.add(c.conflict.id);
    }
    return client;
  }

  on<E extends keyof SyncClientEvents>(event: E, listener: (value: SyncClientEvents[E]) => void): () => void {
    return this.emitter.on(event, listener);
  }

  get syncState(): SyncState {
    return this.state;
  }

  /** The server version this device has pulled up to. */
  get pulledVersion(): number {
    return this.cursor;
  }

  // ---- accounts and businesses -------------------------------------------------------------

  get user(): User | undefined {
    return this.session.user;
  }

  async register(input: { email: string; name: string; password: string }): Promise<User> {
    return this.owned(await this.session.register(input, (user) => this.assertOwner(user)));
  }

  async login(input: { email: string; password: string }): Promise<User> {
    return this.owned(await this.session.login(input, (user) => this.assertOwner(user)));
  }

  /**
   * One store per user, as per business: the records and the outbox of the user who first signed in on it are not
   * another user's to read or push (under their token). A sign-in as someone else is refused before it is adopted.
   */
  private assertOwner(user: User): void {
    if (this.owner && this.owner !== user.id) {
      throw new SyncClientError('invalid_request', `this store holds the data of another user (${this.owner}); open another store for ${user.email}, or delete this one`);
    }
  }

  private async owned(user: User): Promise<User> {
    if (!this.owner) {
      this.owner = user.id;
      await this.store.write([{ op: 'put', collection: 'meta', key: META.owner, value: user.id }]);
    }
    return user;
  }

  /** Ends the session on the server and stops syncing. Local data and the outbox stay (a later login of the same user continues). */
  async logout(): Promise<void> {
    this.stop();
    await this.session.logout();
  }

  async listBusinesses(): Promise<Business[]> {
    return this.session.request('GET', '/api/business', { read: json<Business[]> });
  }

  async createBusiness(input: { name: string; abn: string }): Promise<Business> {
    return this.session.request('POST', '/api/business', { json: input, read: json<Business> });
  }

  async addMember(businessId: string, email: string, role: 'owner' | 'member' = 'member'): Promise<void> {
    await this.session.request('POST', `/api/business/${encodeURIComponent(businessId)}/members`, { json: { email, role } });
  }

  /** Binds a store opened without a business to one (once). */
  async useBusiness(businessId: string): Promise<void> {
    this.assertOpen('useBusiness');
    const id = businessId.toLowerCase();
    if (this.o.businessId && this.o.businessId !== id) throw new SyncClientError('invalid_request', `this store holds business ${this.o.businessId}`);
    this.o.businessId = id;
    await this.store.write([{ op: 'put', collection: 'meta', key: META.business, value: id }]);
  }

  /** The server's view of the business: server version and pending conflicts. */
  async status(): Promise<SyncStatus> {
    return this.businessCall<SyncStatus>('GET', '/api/sync/status');
  }

  // ---- local data ---------------------------------------------------------------------------

  async get(table: string, uuid: string): Promise<RecordData | null> {
    this.assertOpen('get');
    const r = await this.store.get('records', recordKey(table, uuid.toLowerCase()));
    return r?.data ?? null;
  }

  /** Live (not deleted) records of a table, by uuid. */
  async list(table: string): Promise<{ uuid: string; data: RecordData; version: number }[]> {
    this.assertOpen('list');
    const rows = await this.store.list('records', `${table}\u0000`);
    return rows.filter((r) => r.data !== null).map((r) => ({ uuid: r.uuid, data: r.data!, version: r.version }));
  }

  /** Creates or replaces a record locally and queues it for the server; durable when it resolves. */
  put(table: string, uuid: string, data: RecordData): Promise<void> {
    return this.write(table, uuid.toLowerCase(), data);
  }

  /** Deletes a record locally and queues the tombstone. */
  delete(table: string, uuid: string): Promise<void> {
    return this.write(table, uuid.toLowerCase(), null);
  }

  /** Local changes not yet acknowledged by the server. */
  get pendingChanges(): number {
    return this.outbox.size;
  }

  // ---- sync ---------------------------------------------------------------------------------

  /**
   * One sync round: pull until up to date, push the outbox in batches, pull
   * again. Rejects on failure (the outbox is kept, a later round retries the
   * same items). A call during a round waits for a round that starts after it. Once the client is closed (also for a
   * call that was waiting), rejects with `closed`.
   */
  sync(): Promise<void> {
    return this.round(true);
  }

  /**
   * A round now, or after the one running. `full` (an explicit sync()) always pulls; a background round pulls only
   * when due (see `pullDue`) while the feed is connected, since the feed delivers the changes themselves.
   */
  private round(full: boolean): Promise<void> {
    if (this.closed) return Promise.reject(new SyncClientError('closed', 'sync: the client was closed'));
    if (!this.cycle) {
      this.cycle = this.runCycle(full).finally(() => {
        this.cycle = null;
        if (this.kickAfter) {
          this.kickAfter = false;
          this.kick();
        }
      });
      return this.cycle;
    }
    this.queued ??= this.cycle.catch(() => undefined).then(() => {
      this.queued = null;
      return this.round(full);
    });
    return this.queued;
  }

  /** Keeps syncing in the background: the feed is watched, local writes are pushed, failures are retried with backoff. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    const Socket = this.o.WebSocket ?? (globalThis as { WebSocket?: FeedSocketConstructor }).WebSocket;
    if (!Socket) throw new SyncClientError('invalid_request', 'no WebSocket implementation: pass options.WebSocket (e.g. the ws package on Node 20)');
    this.feed = new FeedConnection(Socket, {
      url: () => this.feedUrl(),
      // After every (re)connect, pull from the last applied version once the server's subscription is in place (not
      // on open, which comes first): a change committed before it is in the pull, every later one comes over the feed.
      onReady: () => {
        this.feedConnects++;
        this.cursorChecked = false;
        this.pullDue = true;
        this.kick();
      },
      onMessage: (m) => this.onFeedMessage(m),
      onClose: (code) => {
        this.setState('offline');
        // 1008: the token was revoked or expired; 1006: the upgrade itself may have been refused (a WebSocket hides the status).
        // Either way the next connect takes a fresh token, and a round over HTTP finds out whether the session still holds.
        if (code === 1008 || code === 1006) {
          this.session.forgetBusinessToken(this.requireBusiness());
          this.kick();
        }
      },
      onRetry: (e) => this.onBackgroundError(e),
    }, this.o.reconnect);
    this.feed.start();
    const safetyMs = this.o.safetyPullMs ?? SAFETY_PULL_MS;
    // Checked four times per period: the pull comes at most a quarter period late.
    this.safetyTimer = setInterval(() => {
      if (Date.now() - this.lastPullAt < safetyMs) return;
      this.pullDue = true;
      this.kick();
    }, safetyMs / 4);
    (this.safetyTimer as { unref?: () => void }).unref?.();
    this.kick();
  }

  stop(): void {
    this.started = false;
    this.feed?.stop();
    this.feed = null;
    for (const t of [this.retryTimer, this.kickTimer]) if (t) clearTimeout(t);
    this.retryTimer = this.kickTimer = null;
    if (this.safetyTimer) clearInterval(this.safetyTimer);
    this.safetyTimer = null;
    this.pullDue = true;
    this.kickAfter = this.serverAskedWait = false;
  }

  /** Drops the feed socket as a network failure would; it reconnects and catches up. */
  dropFeed(): void {
    this.feed?.drop();
  }

  /**
   * Stops syncing and closes the store, giving up its claim; a second call does nothing (the store may have a new
   * owner). A round in progress, and calls waiting on the server (a 429's wait included), end at once with `closed`,
   * as does a `sync()` waiting for its turn; a refresh already sent is let finish, so its new tokens are kept.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.stop();
    this.closed = true;
    this.closing.abort();
    await Promise.all([this.cycle, this.queued, this.session.settled()].map((p) => p?.catch(() => undefined)));
    await this.locked(async () => this.store.close());
  }

  // ---- conflicts ----------------------------------------------------------------------------

  /** Conflicts waiting for a decision, oldest first. */
  async conflicts(): Promise<ConflictView[]> {
    this.assertOpen('conflicts');
    return Promise.all([...this.conflictsByKey.values()].sort((a, b) => a.conflict.id - b.conflict.id).map((c) => this.view(c)));
  }

  /**
   * Resolves a conflict of this device. `local` applies this device's side on
   * the server, `remote` and `skip` keep the server's side (and drop this
   * device's edits of the record made since), `{ merged }` keeps the server's
   * side and pushes the merged record on top of it. The choice covers the
   * local state as it is when called; edits made while the resolution is on
   * its way are kept (see `settle`).
   */
  async resolveConflict(id: number, choice: ConflictChoice): Promise<void> {
    this.assertOpen('resolveConflict');
    const held = this.conflictsByKey.get(conflictKey(id));
    if (!held) throw new SyncClientError('not_found', `no pending conflict ${id} on this device`);
    await this.settle(held, choice, this.latestLocal(held));
  }

  /**
   * Resolves `held` by `choice`, made on seeing `seen` as the local side. Edits made after that (while a resolver
   * or the app decided, or the resolution was on its way) are not dropped by a choice that did not see them: their
   * field changes since `seen` are applied on top of the outcome and pushed as a new edit.
   */
  private async settle(held: LocalConflict, choice: ConflictChoice, seen: RecordData | null): Promise<void> {
    const id = held.conflict.id;
    if (typeof choice === 'object') checkData(choice.merged);
    const resolution: Resolution = typeof choice === 'string' ? choice : 'remote';
    // What the server recorded; null when it no longer has the conflict (resolved elsewhere, then removed by its
    // retention cleanup): the choice is then applied on this device alone, or the conflict could never be settled.
    let outcome: Conflict | null;
    try {
      outcome = await this.businessCall<Conflict>('POST', `/api/sync/conflicts/${id}/resolve`, { json: { resolution } });
    } catch (e: unknown) {
      if (!(e instanceof SyncClientError && (e.code === 'conflict' || e.code === 'not_found'))) throw e;
      // Resolved already (by another device, or by this one when the answer was lost): follow what the server decided.
      const listed = e.code === 'conflict'
        ? await this.businessCall<Conflict[]>('GET', `/api/sync/conflicts?status=all&after_id=${id - 1}&limit=1`)
        : [];
      outcome = listed.find((c) => c.id === id) ?? null;
    }
    const { table_name: table, record_uuid: uuid } = held.conflict;
    const key = recordKey(table, uuid);
    const localWins = outcome ? outcome.resolution === 'local' : choice === 'local';
    let shown: ChangeApplied | undefined;
    await this.locked(async () => {
      if (!this.conflictsByKey.has(conflictKey(id))) return;
      const ops: StoreOp[] = [{ op: 'delete', collection: 'conflicts', key: conflictKey(id) }];
      const current = this.latestLocal(held);
      // The conflict, outbox and holds in memory change once the store has the resolution: a write it refuses (the
      // device's storage full) leaves the conflict pending here as it is in the store, to be resolved again.
      let added: OutboxEntry | undefined;
      const commit = async (hold: Hold | undefined, dropped: readonly OutboxEntry[] = []): Promise<void> => {
        if (hold) ops.push({ op: 'put', collection: 'meta', key: META.renumbering, value: [...new Map(this.renumbering).set(key, hold)] });
        await this.store.write(ops);
        this.conflictsByKey.delete(conflictKey(id));
        for (const e of dropped) this.outbox.delete(outboxKey(e.seq));
        if (added) {
          this.outbox.set(outboxKey(added.seq), added);
          this.nextSeq = added.seq + 1;
        }
        if (hold) this.renumbering.set(key, hold);
      };
      /** A new outbox entry for the record at `rec.version + 1`, numbered after the others. */
      const queue = (rec: LocalRecord, data: RecordData | null): OutboxEntry => {
        added = { seq: this.nextSeq, table, uuid, version: rec.version + 1, operation: data === null ? 'delete' : 'update', data, sent: false, editedAt: Date.now() };
        ops.push({ op: 'put', collection: 'outbox', key: outboxKey(added.seq), value: added }, { op: 'put', collection: 'meta', key: META.seq, value: added.seq + 1 });
        return added;
      };
      if (localWins) {
        const rec = outcome ? undefined : await this.store.get('records', key);
        if (rec && !this.entriesOf(table, uuid).length) {
          // The server never applied this side: it goes again as a new edit, numbered (below) above the server's
          // latest version, so it meets the server's current state as any push does.
          rec.version = queue(rec, current).version;
          ops.push({ op: 'put', collection: 'records', key, value: rec });
        }
        // Edits made here since the conflict stay held until they are numbered above the resolution's version: a
        // sync round pushing them meanwhile, with their old numbers, had them refused and lost.
        await commit({ side: 'local', applied: outcome?.applied_version ?? null });
        return;
      }
      // The server keeps its side: the record's queued edits go, and it shows the server's state, or what goes on top.
      const dropped = this.entriesOf(table, uuid);
      for (const e of dropped) ops.push({ op: 'delete', collection: 'outbox', key: outboxKey(e.seq) });
      const rec = await this.store.get('records', key);
      const next = typeof choice === 'object' ? choice.merged : JSON.parse(held.conflict.remote_data) as RecordData | null;
      const unseen = !sameJson(current, seen);
      const onTop = unseen ? (current === null || seen === null || next === null ? current : applyFieldChanges(next, seen, current)) : next;
      if (rec) {
        rec.data = rec.remote.data;
        rec.version = rec.remote.version;
        rec.base = null;
      }
      let hold: Hold | undefined;
      if (rec && (unseen || typeof choice === 'object') && !sameJson(onTop, rec.remote.data)) {
        // Queued now, in the lock, so an edit made from here on builds on it; held (like a `local` resolution's edits)
        // until a pull has brought the server's latest version to number it from.
        const entry = queue(rec, onTop);
        // The server side the edit was made on: if the server has moved on by the time it is numbered, it is moved too.
        rec.base = JSON.parse(held.conflict.remote_data) as RecordData | null;
        rec.data = onTop;
        rec.version = entry.version;
        hold = { side: 'server' };
      }
      if (rec) {
        ops.push({ op: 'put', collection: 'records', key, value: rec });
        shown = { table, uuid, data: rec.data, version: rec.version, origin: 'revert' };
      }
      await commit(hold, dropped);
    });
    if (shown) this.emitter.emit('change', shown);
    // The pull brings the resolution's change (for `local`) and the server's latest record version to number from.
    // Should it fail, the held edits are renumbered after the next round's pull instead.
    await this.pullAll();
    await this.renumberResolved();
    if (this.started) this.kick();
  }

  /** This device's latest state of a conflicted record: its newest held edit, or else what it pushed. */
  private latestLocal(held: LocalConflict): RecordData | null {
    const latest = this.entriesOf(held.conflict.table_name, held.conflict.record_uuid).at(-1);
    // The text `null` for a delete (a conflict stored by an older client holds JSON null, which parses the same).
    return latest ? latest.data : JSON.parse(held.conflict.local_data) as RecordData | null;
  }

  /**
   * Numbers the edits held since a resolution (never sent) above the record's version on the server, as the last pull
   * left it, then lets them go. An edit put on the server's side (a merge, or edits the choice did not see) made on an
   * older server state than the pull brought is moved onto the newer one: only its own field changes are kept.
   */
  private async renumberResolved(): Promise<void> {
    if (!this.renumbering.size) return;
    // A `local` resolution's own change, read from the server's log: held edits are numbered above it, not above what
    // the pull brought since, so an edit another device made meanwhile meets them as a conflict instead of being overwritten.
    const resolutions = new Map<string, Change>();
    for (const [key, hold] of this.renumbering) {
      if (hold.side !== 'local' || hold.applied === null || ![...this.outbox.values()].some((e) => !e.sent && recordKey(e.table, e.uuid) === key)) continue;
      const page = await this.businessCall<PullResult>('POST', '/api/sync/pull', { json: { since_version: hold.applied - 1, limit: 1 } });
      const change = page.changes[0];
      if (change && change.version === hold.applied && recordKey(change.table_name, change.record_uuid) === key) resolutions.set(key, change);
    }
    const events: ChangeApplied[] = [];
    await this.locked(async () => {
      const ops: StoreOp[] = [];
      // The entries in memory take their new numbers once the store has them (a write it refuses leaves both as they were).
      const renumbered: Array<[OutboxEntry, OutboxEntry]> = [];
      for (const [key, hold] of this.renumbering) {
        const rec = await this.store.get('records', key);
        if (!rec) continue;
        const held = this.entriesOf(rec.table, rec.uuid).filter((e) => !e.sent);
        const moved = hold.side === 'server' && !sameJson(rec.base, rec.remote.data);
        const resolution = resolutions.get(key);
        if (resolution) rec.base = resolution.operation === 'delete' ? null : resolution.data;
        let last: OutboxEntry | undefined;
        for (const e of held) {
          last = {
            ...e,
            data: moved && e.data && rec.base && rec.remote.data ? applyFieldChanges(rec.remote.data, rec.base, e.data) : e.data,
            version: (resolution?.record_version ?? rec.remote.version) + 1,
            operation: e.operation === 'create' ? 'update' : e.operation,
          };
          rec.version = last.version;
          renumbered.push([e, last]);
          ops.push({ op: 'put', collection: 'outbox', key: outboxKey(e.seq), value: last });
        }
        if (!last) continue;
        if (moved) {
          rec.base = rec.remote.data;
          if (!sameJson(rec.data, last.data)) events.push({ table: rec.table, uuid: rec.uuid, data: last.data, version: rec.version, origin: 'remote' });
          rec.data = last.data;
        }
        ops.push({ op: 'put', collection: 'records', key, value: rec });
      }
      ops.push({ op: 'delete', collection: 'meta', key: META.renumbering });
      await this.store.write(ops);
      for (const [e, next] of renumbered) Object.assign(e, next);
      this.renumbering.clear();
    });
    for (const e of events) this.emitter.emit('change', e);
  }

  // ---- internals: local writes --------------------------------------------------------------

  private async write(table: string, uuid: string, data: RecordData | null): Promise<void> {
    // The store may belong to another client by now: a write of this one would land unnumbered in its outbox.
    this.assertOpen(data === null ? 'delete' : 'put');
    if (!PUSH_LIMITS.tableNamePattern.test(table)) throw new SyncClientError('invalid_request', `table_name: "${table}" is not an identifier`);
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(uuid)) throw new SyncClientError('invalid_request', `record_uuid: "${uuid}" is not a UUID`);
    checkData(data);
    await this.locked(async () => {
      const key = recordKey(table, uuid);
      const rec: LocalRecord = (await this.store.get('records', key))
        ?? { table, uuid, data: null, version: 0, remote: { data: null, version: 0, instanceId: '', at: '' }, base: null };
      const pending = this.entriesOf(table, uuid);
      const open = pending.find((e) => !e.sent);
      const ops: StoreOp[] = [];
      // The server's side an edit starts from, for a conflict's three-way view; a record in conflict keeps the base it
      // had (it has no outbox entry left, but an edit made now starts from its own, not the server's, side).
      if (!pending.length && !this.hasConflict(table, uuid)) rec.base = rec.remote.data;
      // The outbox in memory (what the next push sends) changes only once the store has the write: a put that rejects
      // (the device's storage full) must not reach the server anyway, nor leave memory and store apart.
      let applied: () => void;
      if (open) {
        // Not sent yet: the entry takes the new state; its version stays one above what the server may have seen.
        if (data === null && open.operation === 'create' && pending.length === 1 && rec.remote.version === 0 && !this.hasConflict(table, uuid)) {
          // Created and deleted before the server ever saw it: nothing to tell the server.
          await this.store.write([{ op: 'delete', collection: 'outbox', key: outboxKey(open.seq) }, { op: 'delete', collection: 'records', key }]);
          this.outbox.delete(outboxKey(open.seq));
          return;
        }
        const updated: OutboxEntry = { ...open, data, operation: data === null ? 'delete' : open.operation === 'create' ? 'create' : 'update', editedAt: Date.now() };
        ops.push({ op: 'put', collection: 'outbox', key: outboxKey(open.seq), value: updated });
        applied = () => { Object.assign(open, updated); };
      } else {
        const entry: OutboxEntry = {
          seq: this.nextSeq, table, uuid, version: rec.version + 1,
          operation: data === null ? 'delete' : rec.data === null && rec.version === 0 ? 'create' : 'update',
          data, sent: false, editedAt: Date.now(),
        };
        rec.version = entry.version;
        ops.push({ op: 'put', collection: 'outbox', key: outboxKey(entry.seq), value: entry }, { op: 'put', collection: 'meta', key: META.seq, value: entry.seq + 1 });
        applied = () => {
          this.nextSeq = entry.seq + 1;
          this.outbox.set(outboxKey(entry.seq), entry);
        };
      }
      rec.data = data;
      ops.push({ op: 'put', collection: 'records', key, value: rec });
      await this.store.write(ops);
      applied();
    });
    if (this.started) this.kick();
  }

  /** Outbox entries of one record, oldest first. */
  private entriesOf(table: string, uuid: string): OutboxEntry[] {
    return [...this.outbox.values()].filter((e) => e.table === table && e.uuid === uuid).sort((a, b) => a.seq - b.seq);
  }

  /** Records with outbox entries or open conflicts, by record key. */
  private pendingRecords(): Set<string> {
    const keys = new Set<string>();
    for (const e of this.outbox.values()) keys.add(recordKey(e.table, e.uuid));
    for (const c of this.conflictsByKey.values()) keys.add(recordKey(c.conflict.table_name, c.conflict.record_uuid));
    return keys;
  }

  private hasConflict(table: string, uuid: string): boolean {
    for (const c of this.conflictsByKey.values()) if (c.conflict.table_name === table && c.conflict.record_uuid === uuid) return true;
    return false;
  }

  // ---- internals: the sync round ------------------------------------------------------------

  private async runCycle(full: boolean): Promise<void> {
    this.requireBusiness();
    this.setState('syncing');
    try {
      // With the feed connected the changes come over it: what this device pushes too, echoed back.
      const live = !full && this.started && this.feed?.connected === true;
      if (!live || this.pullDue) await this.pullAll();
      await this.renumberResolved();
      await this.settleConflicts();
      // A background round sends what was due when it began and what did not fit; edits made meanwhile (a record's
      // next edit waits for the previous one's answer) go with the next round, a second later at most.
      let pushed = false;
      for (;;) {
        const sent = await this.pushOnce();
        if (sent === 'none') break;
        pushed = true;
        if (sent === 'all' && !full) break;
      }
      if (pushed && !live) await this.pullAll();
      this.retryAttempt = 0;
      this.setState(this.started && !this.feed?.connected ? 'offline' : 'up-to-date');
    } catch (e: unknown) {
      this.setState('offline');
      throw e;
    }
  }

  private async pullAll(): Promise<void> {
    // What the feed brings from here on is after this pull's start: a cause found meanwhile sets it again.
    this.pullDue = false;
    this.lastPullAt = Date.now();
    const fetchPage = (since: number) => this.businessCall<PullResult>('POST', '/api/sync/pull', { json: { since_version: since, limit: this.o.pullPageSize ?? PULL_PAGE } });
    // From a cursor whose change is known the pull starts one change earlier, and that change must come back as this
    // device applied it. A server restored from a backup and written since reuses the versions this device has seen,
    // so comparing versions alone would skip, for good, every change it numbered up to this device's cursor.
    const from = this.cursor;
    const mark = from > 0 && this.mark?.version === from ? this.mark : undefined;
    const connects = this.feedConnects;
    let epoch = this.epoch;
    try {
      let next = fetchPage(mark ? from - 1 : from);
      let checked = false;
      for (;;) {
        const page = await next;
        if (!checked) {
          checked = true;
          if (from > 0 && epoch === this.epoch && diverged(page, from, mark)) {
            epoch = await this.resetHistory(page.version);
            next = fetchPage(0);
            continue;
          }
          if (connects === this.feedConnects) this.cursorChecked = true;
        }
        // The next page is asked for while this one is written locally, so the server's work and the network overlap
        // the local store's. If this page fails to apply, the one in flight is dropped with it.
        if (page.has_more) {
          next = fetchPage(page.version);
          next.catch(() => undefined);
        }
        // Another pull reset the history meanwhile: its own pull from version 0 brings this page's changes.
        if (!(await this.applyPage(page, epoch))) return;
        if (!page.has_more) break;
      }
      if (this.resyncing) await this.dropStale();
    } catch (e: unknown) {
      // The pull stays due, so the retried round pulls what the feed showed missing (a gap, the catch-up after a
      // reconnect) instead of leaving it to the safety pull.
      this.pullDue = true;
      throw e;
    }
  }

  /**
   * The server's history differs from the one pulled (see `diverged`): every record is marked stale, the cursor goes
   * back to 0, and the pull starts over. Conflicts go back to the outbox: their ids are the server's and may now name
   * other conflicts there; their entries are frozen, so a server that still has the conflict answers it again.
   * Holds after resolutions end (their versions are the old history's): the held edits go as they are numbered, and
   * the server tells whether they still fit. Resolves with the new epoch.
   */
  private async resetHistory(serverVersion: number): Promise<number> {
    const cursor = this.cursor;
    await this.locked(async () => {
      const ops: StoreOp[] = [];
      for (const rec of await this.store.list('records')) ops.push({ op: 'put', collection: 'records', key: recordKey(rec.table, rec.uuid), value: { ...rec, stale: true } });
      for (const [key, c] of this.conflictsByKey) {
        ops.push({ op: 'delete', collection: 'conflicts', key }, { op: 'put', collection: 'outbox', key: outboxKey(c.entry.seq), value: c.entry });
      }
      ops.push(
        { op: 'put', collection: 'meta', key: META.cursor, value: 0 },
        { op: 'delete', collection: 'meta', key: META.mark },
        { op: 'delete', collection: 'meta', key: META.renumbering },
        { op: 'put', collection: 'meta', key: META.resync, value: true },
      );
      await this.store.write(ops);
      for (const c of this.conflictsByKey.values()) this.outbox.set(outboxKey(c.entry.seq), c.entry);
      this.conflictsByKey.clear();
      this.unsettled.clear();
      this.renumbering.clear();
      this.cursor = 0;
      this.mark = undefined;
      this.resyncing = true;
      this.epoch++;
    });
    this.emitter.emit('reset', { cursor, serverVersion });
    return this.epoch;
  }

  /**
   * Ends a pull from version 0 after a history reset: a record it did not bring again is not on the server. It goes,
   * unless edited here: then the edit stays queued, and the record is known as never synced.
   */
  private async dropStale(): Promise<void> {
    const events: ChangeApplied[] = [];
    await this.locked(async () => {
      if (!this.resyncing) return;
      const pending = this.pendingRecords();
      const ops: StoreOp[] = [];
      for (const rec of await this.store.list('records')) {
        if (!rec.stale) continue;
        const key = recordKey(rec.table, rec.uuid);
        const { stale: _stale, ...kept } = rec;
        if (pending.has(key)) {
          ops.push({ op: 'put', collection: 'records', key, value: { ...kept, remote: { data: null, version: 0, instanceId: '', at: '' } } });
        } else {
          ops.push({ op: 'delete', collection: 'records', key });
          if (rec.data !== null) events.push({ table: rec.table, uuid: rec.uuid, data: null, version: rec.version, origin: 'remote' });
        }
      }
      ops.push({ op: 'delete', collection: 'meta', key: META.resync });
      await this.store.write(ops);
      this.resyncing = false;
    });
    for (const e of events) this.emitter.emit('change', e);
  }

  /**
   * Applies one pulled page and moves the cursor in the same store write: a change is applied exactly once. False,
   * and nothing applied, when the history was reset since the page was asked for (`epoch`).
   */
  private async applyPage(page: PullResult, epoch: number): Promise<boolean> {
    const events: ChangeApplied[] = [];
    let applied = false;
    await this.locked(async () => {
      if (epoch !== this.epoch) return;
      applied = true;
      const fresh = page.changes.filter((c) => c.version > this.cursor);
      const keys = [...new Set(fresh.map((c) => recordKey(c.table_name, c.record_uuid)))];
      const stored = await this.store.getMany('records', keys);
      const touched = new Map<string, LocalRecord>();
      keys.forEach((k, i) => { if (stored[i]) touched.set(k, stored[i]!); });
      const pending = this.pendingRecords();
      for (const c of fresh) {
        const key = recordKey(c.table_name, c.record_uuid);
        const rec = touched.get(key)
          ?? { table: c.table_name, uuid: c.record_uuid, data: null, version: 0, remote: { data: null, version: 0, instanceId: '', at: '' }, base: null };
        const data = c.operation === 'delete' ? null : c.data;
        delete rec.stale;
        rec.remote = { data, version: c.record_version, instanceId: c.instance_id, at: c.created_at };
        // A record with local edits in flight or in conflict keeps showing them; the push decides.
        if (!pending.has(key)) {
          const changed = rec.version !== c.record_version || !sameJson(rec.data, data);
          rec.data = data;
          rec.version = c.record_version;
          rec.base = null;
          if (changed) events.push(changeEvent(c, data));
        }
        touched.set(key, rec);
      }
      const ops: StoreOp[] = [...touched].map(([key, value]) => ({ op: 'put', collection: 'records', key, value }) as const);
      const cursor = Math.max(this.cursor, page.version);
      const last = fresh.at(-1);
      const mark = last?.version === cursor ? { version: cursor, change: changeMark(last) } : cursor === this.cursor ? this.mark : undefined;
      ops.push({ op: 'put', collection: 'meta', key: META.cursor, value: cursor });
      ops.push(mark ? { op: 'put', collection: 'meta', key: META.mark, value: mark } : { op: 'delete', collection: 'meta', key: META.mark });
      // The page and the cursor commit together; if a power failure undoes both, the next pull sends the page again.
      await this.store.write(ops, { relaxed: true });
      this.cursor = cursor;
      this.mark = mark;
    });
    for (const e of events) this.emitter.emit('change', e);
    return applied;
  }

  /**
   * Pushes one batch: the oldest outstanding entry of each record not held by a conflict. `none` when nothing was due;
   * `more` when entries were left for lack of room (a full batch, or a refused one to send again smaller); else `all`.
   */
  private async pushOnce(): Promise<'none' | 'all' | 'more'> {
    const batch: OutboxEntry[] = [];
    let leftOver = false;
    await this.locked(async () => {
      const seen = new Set<string>();
      let bytes = 0;
      for (const e of [...this.outbox.values()].sort((a, b) => a.seq - b.seq)) {
        const key = recordKey(e.table, e.uuid);
        if (seen.has(key)) continue;
        seen.add(key);
        // Later edits of a record wait for the earlier one's outcome; edits of a conflicted record wait for the resolution.
        if (this.hasConflict(e.table, e.uuid) || this.renumbering.has(key)) continue;
        // UTF-8 bytes, as the server's body limit counts them: text of 3-byte characters is 3 times its length.
        const size = UTF8.encode(JSON.stringify(e.data)).length + 200;
        if (batch.length >= Math.min(this.o.pushBatchSize ?? 500, MAX_PUSH_ITEMS, this.pushCap) || (batch.length && bytes + size > PUSH_BODY_BUDGET)) {
          leftOver = true;
          break;
        }
        bytes += size;
        batch.push(e);
      }
      // Freeze before the entries leave the device: a retry after a lost answer must repeat them exactly. Frozen in
      // memory once the store has it (a write the store refuses fails the round with nothing changed).
      const unsent = batch.filter((e) => !e.sent);
      await this.store.write(unsent.map((e) => ({ op: 'put', collection: 'outbox', key: outboxKey(e.seq), value: { ...e, sent: true } }) as const));
      for (const e of unsent) e.sent = true;
    });
    if (!batch.length) return 'none';

    const changes = batch.filter((e) => e.operation !== 'delete');
    const tombstones = batch.filter((e) => e.operation === 'delete');
    let result: PushResult;
    try {
      result = await this.pushRequest(changes, tombstones);
    } catch (e: unknown) {
      // Refused as a whole: larger than the server takes (a body limit below the default, say), or an item its parser
      // refuses (queued by a client that did not check it). The next try sends half as many, until the item at fault is
      // alone, which is then rejected like any item the server refuses, so the rest flows. Each item is applied once
      // however the retries group them, so a part of a sent batch is as safe to send as the whole.
      if (!(e instanceof SyncClientError && (e.code === 'payload_too_large' || e.code === 'invalid_request') && e.status !== undefined)) throw e;
      if (batch.length > 1) {
        this.pushCap = Math.max(1, Math.floor(batch.length / 2));
        return 'more';
      }
      const rejection = { kind: changes.length ? 'change' : 'tombstone', index: 0, reason: `${e.code}: ${e.details ?? e.message}` } as const;
      await this.settlePush(batch, changes, tombstones, { accepted: 0, rejected: 1, server_version: 0, conflicts: [], rejections: [rejection] });
      return leftOver ? 'more' : 'all';
    }
    this.pushCap = Math.min(2 * this.pushCap, MAX_PUSH_ITEMS);
    const newConflicts = await this.settlePush(batch, changes, tombstones, result);
    await this.offerConflicts(newConflicts);
    return leftOver ? 'more' : 'all';
  }

  private pushRequest(changes: OutboxEntry[], tombstones: OutboxEntry[]): Promise<PushResult> {
    return this.businessCall<PushResult>('POST', '/api/sync/push', {
      json: {
        business_id: this.requireBusiness(),
        instance_id: this.instanceId,
        branch: this.o.branch ?? 'main',
        changes: changes.map((e) => ({ table_name: e.table, record_uuid: e.uuid, version: e.version, operation: e.operation, data: e.data ?? {} })),
        tombstones: tombstones.map((e) => ({ table_name: e.table, record_uuid: e.uuid, version: e.version })),
      },
    });
  }

  private async settlePush(batch: OutboxEntry[], changes: OutboxEntry[], tombstones: OutboxEntry[], result: PushResult): Promise<LocalConflict[]> {
    const rejected = new Map<OutboxEntry, string>();
    for (const r of result.rejections) {
      const e = (r.kind === 'change' ? changes : tombstones)[r.index];
      if (e) rejected.set(e, r.reason);
    }
    const conflicts = new Map(result.conflicts.map((c) => [`${c.table_name}\u0000${c.record_uuid}\u0000${c.version}`, c]));
    const created: LocalConflict[] = [];
    const events: ChangeApplied[] = [];
    const errors: SyncClientError[] = [];
    await this.locked(async () => {
      const ops: StoreOp[] = [];
      const records = new Map<string, LocalRecord>();
      // A batch holds one entry per record: what else is queued for its record is what the outbox has besides it. The
      // outbox and conflicts in memory change once the store has the outcome, so a write it refuses (the device's storage
      // full) leaves them as the store has them, and the next round sends the same entries again (a retry to the server).
      const queuedBesides = (e: OutboxEntry) => this.entriesOf(e.table, e.uuid).filter((x) => x !== e).length;
      for (const e of batch) {
        ops.push({ op: 'delete', collection: 'outbox', key: outboxKey(e.seq) });
        const key = recordKey(e.table, e.uuid);
        const rec = records.get(key) ?? (await this.store.get('records', key));
        if (!rec) continue;
        records.set(key, rec);
        const conflict = conflicts.get(`${e.table}\u0000${e.uuid}\u0000${e.version}`);
        const reason = rejected.get(e);
        if (conflict) {
          const held: LocalConflict = { conflict, entry: e };
          ops.push({ op: 'put', collection: 'conflicts', key: conflictKey(conflict.id), value: held });
          created.push(held);
        } else if (reason !== undefined) {
          errors.push(new SyncClientError('rejected', `the server rejected ${e.table}/${e.uuid} version ${e.version}: ${reason}`, { details: reason }));
          // Nothing of it reached the server: unless newer edits are queued, show the server's state again.
          if (!queuedBesides(e)) {
            rec.data = rec.remote.data;
            rec.version = rec.remote.version;
            rec.base = null;
            events.push({ table: e.table, uuid: e.uuid, data: rec.data, version: rec.version, origin: 'revert' });
          }
        } else {
          if (e.version >= rec.remote.version) {
            rec.remote = { data: e.data, version: e.version, instanceId: this.instanceId, at: new Date().toISOString() };
          } else if (!queuedBesides(e) && !this.hasConflict(e.table, e.uuid)) {
            // A later change was pulled while this edit was out (its answer lost and the edit resent, or the feed ahead
            // of the answer), and kept from showing by the edit; the cursor is past it now, so no later pull shows it.
            // The record shows the server's state, as that pull would have.
            rec.data = rec.remote.data;
            rec.version = rec.remote.version;
            events.push({ table: e.table, uuid: e.uuid, data: rec.data, version: rec.version, origin: 'remote' });
          }
          if (!queuedBesides(e)) rec.base = null;
        }
      }
      for (const [key, value] of records) ops.push({ op: 'put', collection: 'records', key, value });
      await this.store.write(ops);
      for (const e of batch) this.outbox.delete(outboxKey(e.seq));
      for (const held of created) this.conflictsByKey.set(conflictKey(held.conflict.id), held);
    });
    for (const e of events) this.emitter.emit('change', e);
    for (const e of errors) this.emitter.emit('error', e);
    return created;
  }

  /** Announces new conflicts, every one before any is resolved, then offers them to the resolver (settleConflicts). */
  private async offerConflicts(conflicts: LocalConflict[]): Promise<void> {
    for (const c of conflicts) this.emitter.emit('conflict', await this.view(c));
    if (!this.o.resolver) return;
    for (const c of conflicts) this.unsettled.add(c.conflict.id);
    await this.settleConflicts();
  }

  /**
   * Offers each conflict the resolver has not settled yet. One whose resolution fails (the network) is reported as an
   * `error` and stays for the next round, without keeping the others from theirs; one the resolver leaves alone
   * (undefined) waits for `resolveConflict`.
   */
  private async settleConflicts(): Promise<void> {
    const resolver = this.o.resolver;
    if (!resolver) return;
    for (const id of [...this.unsettled]) {
      const held = this.conflictsByKey.get(conflictKey(id));
      if (!held) { this.unsettled.delete(id); continue; }
      try {
        const view = await this.view(held);
        const choice = await this.untilClosed(resolver(view));
        if (choice !== undefined) await this.settle(held, choice, view.local);
        this.unsettled.delete(id);
      } catch (e: unknown) {
        if (this.closed) throw e;
        this.emitter.emit('error', e instanceof SyncClientError ? e : new SyncClientError('internal', e instanceof Error ? e.message : String(e), { cause: e }));
      }
    }
  }

  /**
   * `decision` (an app's resolver, which may wait for its user or never answer), or `closed` once close() is called:
   * close ends the round at once. A choice made after that is dropped; the conflict, still stored, is offered again.
   */
  private untilClosed<T>(decision: T | Promise<T>): Promise<T> {
    const signal = this.closing.signal;
    if (signal.aborted) return Promise.reject(new SyncClientError('closed', 'the client was closed'));
    return new Promise<T>((resolve, reject) => {
      const onClose = () => reject(new SyncClientError('closed', 'the client was closed while a conflict was being decided'));
      signal.addEventListener('abort', onClose, { once: true });
      Promise.resolve(decision).then(resolve, reject).finally(() => signal.removeEventListener('abort', onClose));
    });
  }

  private async view(c: LocalConflict): Promise<ConflictView> {
    const rec = await this.store.get('records', recordKey(c.conflict.table_name, c.conflict.record_uuid));
    const remoteKnown = rec && rec.remote.at && rec.remote.instanceId !== this.instanceId;
    return {
      id: c.conflict.id,
      table: c.conflict.table_name,
      uuid: c.conflict.record_uuid,
      // Edits made while the push was out or the conflict waited are part of this device's side: a resolver that
      // saw only the pushed state would settle for, and drop, an older edit than the user's latest.
      local: this.latestLocal(c),
      remote: JSON.parse(c.conflict.remote_data) as RecordData | null,
      base: rec?.base ?? null,
      localEditedAt: this.entriesOf(c.conflict.table_name, c.conflict.record_uuid).at(-1)?.editedAt ?? c.entry.editedAt,
      remoteAt: remoteKnown ? Date.parse(rec.remote.at) : undefined,
      conflict: c.conflict,
    };
  }

  // ---- internals: background ----------------------------------------------------------------

  /**
   * Schedules a background round: at once, or when `minRoundIntervalMs` has passed since the last one began. Triggers
   * meanwhile make that one round.
   */
  private kick(): void {
    // While the server's retry_after runs, a feed (re)connect or a local write does not ask sooner: the timer kicks.
    if (!this.started || this.kickTimer || this.serverAskedWait) return;
    const wait = Math.max(0, this.lastRoundAt + (this.o.minRoundIntervalMs ?? 1000) - Date.now());
    this.kickTimer = setTimeout(() => {
      this.kickTimer = null;
      // Not queued as a sync() call: stop() must be able to call it off.
      if (this.cycle) {
        this.kickAfter = true;
        return;
      }
      this.lastRoundAt = Date.now();
      this.round(false).catch((e: unknown) => this.onBackgroundError(e));
    }, wait);
  }

  /** Feed messages above the cursor are taken in arrival order (see `takeFeedMessage`). */
  private onFeedMessage(m: FeedMessage): void {
    if (m.version <= this.cursor) return;
    this.feedChain = this.feedChain.then(() => this.takeFeedMessage(m)).catch((e: unknown) => {
      // Not applied (the local store refused it): the retried round pulls it.
      this.pullDue = true;
      this.onBackgroundError(e);
    });
  }

  /**
   * The change next after the cursor, carried whole by its message, is applied as a pulled page of one change: no
   * request. Anything else (a version past the next one: a message lost, or one that overtook another across
   * instances; a change too large to carry; the history being pulled again) makes the next round pull.
   */
  private async takeFeedMessage(m: FeedMessage): Promise<void> {
    if (this.closed || !this.started || m.version <= this.cursor) return;
    const change = m.version === this.cursor + 1 && !this.resyncing && this.cursorChecked ? feedChange(m, this.requireBusiness()) : undefined;
    if (change) {
      await this.applyPage({ changes: [change], has_more: false, version: change.version }, this.epoch);
      return;
    }
    this.pullDue = true;
    this.kick();
  }

  private onBackgroundError(e: unknown): void {
    const error = e instanceof SyncClientError ? e : new SyncClientError('internal', e instanceof Error ? e.message : String(e), { cause: e });
    // A round cut short by close(): the app asked for it.
    if (error.code === 'closed') return;
    this.emitter.emit('error', error);
    if (error.code === 'session_expired' || error.code === 'not_signed_in' || !this.started) return;
    if (error.code === 'forbidden') {
      // Every round and feed reconnect would be refused the same way, every 30 s for as long as the app runs.
      this.stop();
      this.setState('offline');
      this.emitter.emit('accessLost', error);
      return;
    }
    this.setState('offline');
    if (!retriedLater(error) || this.retryTimer) return;
    // The server's retry_after (a full disk's 30 s, a database fail-over's 2 s) is the least wait: the backoff alone
    // would ask again within a second. Capped as a 429's is, so a bad value cannot park the client for days.
    const told = Math.min(error.retryAfter ?? 0, this.o.maxRetryAfterSeconds ?? 120) * 1000;
    this.serverAskedWait = told > 0;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.serverAskedWait = false;
      this.kick();
    }, Math.max(told, backoffDelay(this.retryAttempt++, this.o.retry)));
  }

  private async feedUrl(): Promise<string> {
    const businessId = this.requireBusiness();
    const token = (await this.session.businessToken(businessId)).token;
    const user = this.session.user;
    if (!user) throw new SyncClientError('not_signed_in', 'sign in first (register or login)');
    const base = this.o.baseUrl.replace(/\/+$/, '').replace(/^http/, 'ws');
    // Browsers cannot set headers on a WebSocket, so the token goes in the query (the server redacts it from logs).
    return `${base}/ws/sync?business_id=${businessId}&user_id=${user.id}&token=${encodeURIComponent(token)}`;
  }

  private setState(s: SyncState): void {
    if (this.state === s) return;
    this.state = s;
    this.emitter.emit('state', s);
  }

  private requireBusiness(): string {
    if (!this.o.businessId) throw new SyncClientError('invalid_request', 'no business: pass businessId to SyncClient.open or call useBusiness');
    return this.o.businessId;
  }

  /**
   * Sends a sync call and reads its JSON answer. Every sync call is safe to repeat: push retries are recognised by the
   * server, the others only read or are checked (resolve answers 409).
   */
  private businessCall<T>(method: string, path: string, options: { json?: unknown } = {}): Promise<T> {
    return this.session.businessRequest(this.requireBusiness(), method, path, { ...options, idempotent: true, read: json<T> });
  }

  /** Runs store read-modify-writes one at a time (the engine's only lock; network calls happen outside it). */
  /** Once closed, the client never touches its store again: calls that would reject with `closed`. */
  private assertOpen(call: string): void {
    if (this.closed) throw new SyncClientError('closed', `${call}: the client was closed`);
  }

  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.mutex.then(fn);
    this.mutex = run.then(() => undefined, () => undefined);
    return run;
  }
}

/**
 * Refuses, before it is queued, data the server would refuse: larger than its item limit, or what its JSON parser
 * refuses (a lone surrogate, a non-finite number, deeper nesting than it takes). Queued, it could only be dropped later.
 */
function checkData(data: RecordData | null): void {
  if (data === null) return;
  if (UTF8.encode(JSON.stringify(data)).length > PUSH_LIMITS.maxDataBytes) {
    throw new SyncClientError('payload_too_large', `data: larger than the server's ${PUSH_LIMITS.maxDataBytes} bytes of JSON per record`);
  }
  // A record's data sits 3 levels down in a push body: the body, its changes array, the change.
  const problem = jsonValueProblem(data, MAX_JSON_DEPTH - 3);
  if (problem) throw new SyncClientError('invalid_request', problem.replace(/^body: /, 'data: '));
}

function changeEvent(c: Change, data: RecordData | null): ChangeApplied {
  return { table: c.table_name, uuid: c.record_uuid, data, version: c.record_version, origin: 'remote' };
}

function randomId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`;
}

/** The change a feed message carries, checked as a pulled one would be; undefined for a hint without its data. */
function feedChange(m: FeedMessage, businessId: string): Change | undefined {
  const { data, operation, record_version: recordVersion, created_at: createdAt } = m as Partial<FeedMessage>;
  if (data === undefined || typeof data !== 'object' || data === null || Array.isArray(data)) return undefined;
  if ((operation !== 'create' && operation !== 'update' && operation !== 'delete') || !Number.isSafeInteger(recordVersion) || typeof createdAt !== 'string') return undefined;
  return {
    id: 0, business_id: businessId, version: m.version, table_name: m.table_name, record_uuid: m.record_uuid, operation,
    data, record_version: recordVersion!, instance_id: m.instance_id, created_at: createdAt,
  };
}
