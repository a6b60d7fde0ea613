import { EventEmitter } from 'node:events';
import type { PubSub } from './pubsub.js';

export function createMemoryPubSub(): PubSub {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    async publish(channel, message) {
      // Deliver a copy, as a network transport would, so no subscriber shares the publisher's object.
      emitter.emit(channel, structuredClone(message));
    },
    async subscribe(channel, onMessage) {
      emitter.on(channel, onMessage);
      return async () => { emitter.off(channel, onMessage); };
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}
