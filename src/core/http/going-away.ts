import type { FastifyInstance } from 'fastify';
import type { WebSocketServer } from 'ws';

/** WebSocket close code 1001: the server is going away; a client reconnects (through the balancer, to another instance). */
export const GOING_AWAY = 1001;

/**
 * `preClose` for @fastify/websocket (`register(websocket, { preClose: closeSocketsGoingAway })`):
 * on shutdown, close every open socket with 1001 so clients reconnect elsewhere
 * at once, instead of the plugin's default close without a code. Fastify runs
 * it when `app.close()` starts; in-flight HTTP requests still finish, and new
 * upgrades are answered 503 while the instance closes.
 */
export function closeSocketsGoingAway(this: FastifyInstance, done: () => void): void {
  const server = (this as FastifyInstance & { websocketServer?: WebSocketServer }).websocketServer;
  if (!server) return done();
  for (const client of server.clients) client.close(GOING_AWAY, 'server shutting down');
  server.close();
  done();
}
