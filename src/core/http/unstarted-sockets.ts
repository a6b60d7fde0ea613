/**
 * Sockets that have not begun a request: a browser's preconnect, a client between connecting and writing, one still
 * sending its first headers. Node's `server.close()` counts them neither idle (it closes those) nor busy, and stops
 * the header deadline's checks, so each held a shutdown for the 60 s connection timeout, past the shutdown bound
 * (a dashboard left open made every restart exit 1 without closing the database). On close they are destroyed;
 * requests in flight still finish, and keep-alive sockets between requests are closed by Fastify as before (one
 * part-way through its next request's headers waits at most the 5 s keep-alive timeout).
 */
import type { Socket } from 'node:net';
import type { IncomingMessage, Server } from 'node:http';

export interface UnstartedSockets {
  /** A request began on this socket: HTTP, or a WebSocket upgrade the router took. */
  started(socket: Socket): void;
  destroyAll(): void;
}

export function trackUnstartedSockets(server: Server): UnstartedSockets {
  const unstarted = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    unstarted.add(socket);
    socket.once('close', () => unstarted.delete(socket));
  });
  // The 'request' event comes before any of Fastify's work on the request (a refusal answered asynchronously included).
  server.on('request', (req: IncomingMessage) => unstarted.delete(req.socket));
  return {
    started: (socket) => unstarted.delete(socket),
    destroyAll() {
      for (const socket of unstarted) socket.destroy();
      unstarted.clear();
    },
  };
}
