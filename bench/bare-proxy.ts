// The cheapest possible HTTP hop (node:http in, undici out, bytes piped back), so the benchmark
// can tell the cost of any proxy hop apart from the cost of what the gateway does on top of it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const upstream = new URL(process.argv[2] as string);
const pool = new Pool(upstream.origin, { connections: 512 });
const server = http.createServer((req, res) => {
  const pieces: Buffer[] = [];
  req.on('data', (d: Buffer) => pieces.push(d));
  req.on('end', () => {
    pool
      .request({
        method: 'POST',
        path: req.url ?? '/',
        headers: { 'content-type': 'application/json' },
        body: Buffer.concat(pieces),
      })
      .then(async (up) => {
        res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json') });
        for await (const chunk of up.body) res.write(chunk);
        res.end();
      })
      .catch(() => res.destroy());
  });
});
server.listen(0, '127.0.0.1', () =>
  process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`),
);
process.on('SIGTERM', () => process.exit(0));
