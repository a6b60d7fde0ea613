/**
 * Fan-out of small JSON messages between the instances of one service
 * (in-process for one instance, Redis pub/sub for several). Delivery is
 * at-most-once: subscribers that need every change re-read from the database.
 */
export interface PubSub {
  publish(channel: string, message: unknown): Promise<void>;
  /** Returns an unsubscribe function. */
  subscribe(channel: string, onMessage: (message: unknown) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}
