// Why: a dependency outage (Redis, PostgreSQL) as a service's clients see it, without stopping the one every other test shares.
import net from 'node:net';

export interface Outage {
  /** `target` with its host and port replaced by the proxy's. */
  url: string;
  /** The dependency goes away for this proxy's clients: open connections are cut, new ones refused. */
  down(): Promise<void>;
  /** It is reachable again. */
  up(): Promise<void>;
  close(): Promise<void>;
}

/** A TCP proxy on loopback in front of `target` (a URL; `defaultPort` when it names none) that a test can take down and bring back. */
export async function outageProxy(target: string, defaultPort: number): Promise<Outage> {
  const to = new URL(target);
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;
  const listen = async () => {
    const s = net.createServer((client) => {
      const upstream = net.connect(Number(to.port || defaultPort), to.hostname);
      for (const sock of [client, upstream]) {
        sockets.add(sock);
        sock.on('close', () => sockets.delete(sock));
        sock.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => s.listen(port, '127.0.0.1', resolve));
    port = (s.address() as net.AddressInfo).port;
    server = s;
  };
  const down = async () => {
    const s = server;
    server = undefined;
    for (const sock of sockets) sock.destroy();
    if (s) await new Promise((resolve) => s.close(resolve));
  };
  await listen();
  const u = new URL(target);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return { url: u.toString(), down, up: listen, close: down };
}
