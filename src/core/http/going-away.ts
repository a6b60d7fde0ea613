import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocketServer } from 'ws';

/** WebSocket close code 1001: the server is going away; a client reconnects (through the balancer, to another instance). */
export const GOING_AWAY = 1001;

/**
 * How long a closing socket may take to answer the close before it is cut: 2 s, or a quarter of the shutdown bound if
 * that is shorter, so a client that never answers (a frozen app, a dead peer) cannot hold the exit past the bound.
 */
export function goingAwayGraceMs(shutdownTimeoutMs: number): number {
  return Math.min(2_000, shutdownTimeoutMs / 4);
}

/**
 * `preClose` for @fastify/websocket (`register(websocket, { preClose: closeSocketsGoingAway(graceMs) })`):
 * on shutdown, close every open socket with 1001 so clients reconnect elsewhere
 * at once, instead of the plugin's default close without a code. Fastify runs
 * it when `app.close()` starts; in-flight HTTP requests still finish, and new
 * upgrades are answered 503 while the instance closes. Sockets whose client has
 * not completed the close after `graceMs` are destroyed: the HTTP server's close
 * waits for every upgraded socket, and ws would wait 30 s for the answer.
 */
export function closeSocketsGoingAway(graceMs: number) {
  return function preClose(this: FastifyInstance, done: () => void): void {
    const server = (this as FastifyInstance & { websocketServer?: WebSocketServer }).websocketServer;
    if (!server) return done();
    for (const client of server.clients) client.close(GOING_AWAY, 'server shutting down');
    server.close();
    // Unreferenced: when every socket has closed nothing is left to cut, and the timer must not hold the process.
    setTimeout(() => { for (const client of server.clients) client.terminate(); }, graceMs).unref();
    done();
  };
}

/**
 * `onResponse` hook for the scope that takes WebSocket upgrades: a handshake answered over HTTP (refused by a hook
 * that ran before @fastify/websocket's own, as the closing and Host checks of create-app.ts do) is on a socket the HTTP
 * server has handed over, and the plugin closes it only when its own hook ran. Left open, it leaks, and holds the
 * server's close for good.
 */
export function endRefusedHandshake(req: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  const socket = req.raw.socket;
  if ((req.raw as typeof req.raw & { upgrade?: boolean }).upgrade && !socket.destroyed) {
    if (socket.writableFinished) socket.destroy();
    else socket.once('finish', () => socket.destroy()).end();
  }
  done();
}
