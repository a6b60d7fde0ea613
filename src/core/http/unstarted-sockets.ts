/**
 * Sockets that have not begun a request: a browser's preconnect, a client between connecting and writing, one still
 * sending its first headers. Node's `server.close()` counts them neither idle (it closes those) nor busy, and stops
 * the header deadline's checks, so each held a shutdown for the 60 s connection timeout, past the shutdown bound
 * (a dashboard left open made every restart exit 1 without closing the database). On close they are destroyed;
 * requests in flight still finish, and keep-alive sockets between requests are closed by Fastify as before (one
 * part-way through its next request's headers waits at most the 5 s keep-alive timeout).
 */
import type { Socket } from 'node:net';

export interface UnstartedSockets {
  /** The server's 'connection' listener. */
  connected(socket: Socket): void;
  /**
   * A request began on this socket. Every request Fastify takes reaches either the onRequest hooks (a WebSocket
   * upgrade included, which comes without the server's 'request' event) or the router's refusal (`frameworkErrors`).
   */
  started(socket: Socket): void;
  destroyAll(): void;
}

export function createUnstartedSockets(): UnstartedSockets {
  const unstarted = new Set<Socket>();
  return {
    connected(socket) {
      unstarted.add(socket);
      socket.once('close', () => unstarted.delete(socket));
    },
    started: (socket) => unstarted.delete(socket),
    destroyAll() {
      for (const socket of unstarted) socket.destroy();
      unstarted.clear();
    },
  };
}
