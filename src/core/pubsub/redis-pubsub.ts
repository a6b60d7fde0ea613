import type { Redis } from 'ioredis';
import type { PubSub } from './pubsub.js';

type Handler = (message: unknown) => void;

interface Channel {
  handlers: Set<Handler>;
  /** Settles when Redis confirmed the SUBSCRIBE, so a subscriber never returns before it can receive. */
  subscribed: Promise<unknown>;
}

/**
 * Pub/sub across instances through Redis. Publishing uses the caller's
 * connection; subscriptions use a dedicated connection (a subscribed Redis
 * connection can do nothing else), which ioredis re-subscribes after a
 * reconnect. Channels are namespaced by `channelPrefix`; messages travel as
 * JSON. Delivery is at-most-once (messages published while the subscriber is
 * reconnecting are lost), as the `PubSub` contract says.
 */
export async function createRedisPubSub(redis: Redis, channelPrefix: string): Promise<PubSub> {
  const subscriber = redis.duplicate({ connectionName: `${redis.options.connectionName ?? 'pubsub'}-sub`, autoResubscribe: true });
  subscriber.on('error', () => undefined);
  await subscriber.connect();
  const channels = new Map<string, Channel>();
  // Channels whose UNSUBSCRIBE failed (Redis down): ioredis still counts them as subscribed and restores them on
  // reconnect, so they are unsubscribed again once the connection is ready, unless a listener came back meanwhile.
  const stale = new Set<string>();
  const unsubscribe = (full: string): Promise<void> => subscriber.unsubscribe(full).then(
    () => { stale.delete(full); },
    () => { if (!channels.has(full)) stale.add(full); },
  );
  // 'ready' is emitted after ioredis has sent its re-SUBSCRIBEs, so these UNSUBSCRIBEs reach Redis after them.
  subscriber.on('ready', () => {
    for (const full of stale) if (!channels.has(full)) void unsubscribe(full);
  });

  subscriber.on('message', (fullChannel: string, raw: string) => {
    const channel = channels.get(fullChannel);
    if (!channel) return;
    let message: unknown;
    try {
      message = JSON.parse(raw);
    } catch {
      return;
    }
    for (const h of channel.handlers) h(structuredClone(message));
  });

  return {
    async publish(channel, message) {
      await redis.publish(channelPrefix + channel, JSON.stringify(message));
    },
    async subscribe(channel, onMessage) {
      const full = channelPrefix + channel;
      let entry = channels.get(full);
      if (!entry) {
        stale.delete(full);
        entry = { handlers: new Set(), subscribed: subscriber.subscribe(full) };
        channels.set(full, entry);
      }
      entry.handlers.add(onMessage);
      try {
        await entry.subscribed;
      } catch (e: unknown) {
        entry.handlers.delete(onMessage);
        if (!entry.handlers.size && channels.get(full) === entry) channels.delete(full);
        throw e;
      }
      return async () => {
        const current = channels.get(full);
        if (current !== entry || !entry.handlers.delete(onMessage) || entry.handlers.size) return;
        channels.delete(full);
        await unsubscribe(full);
      };
    },
    async close() {
      channels.clear();
      stale.clear();
      subscriber.disconnect();
    },
  };
}
