import net from 'node:net';

/**
 * One address in front of several servers, as a Kubernetes Service or a TCP load balancer is:
 * each new connection goes to the next server in turn, and to the one after it when that one
 * refuses (a killed process). A connection stays on the server it reached.
 */
export async function startTcpBalancer(
  ports: readonly number[],
): Promise<{ url: string; connections: number[]; close: () => Promise<void> }> {
  let next = 0;
  const connections = ports.map(() => 0);
  const sockets = new Set<net.Socket>();
  const connect = (client: net.Socket, tries: number) => {
    const index = next++ % ports.length;
    const upstream = net.connect(ports[index] as number, '127.0.0.1');
    sockets.add(upstream);
    upstream.once('close', () => sockets.delete(upstream));
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      connections[index] = (connections[index] as number) + 1;
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    });
    upstream.once('error', () => {
      if (!connected && tries + 1 < ports.length) connect(client, tries + 1);
      else client.destroy();
    });
  };
  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    connect(client, 0); // the client's bytes wait (paused) until it is piped to a server
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    connections,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
