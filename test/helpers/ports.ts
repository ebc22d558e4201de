import net from 'node:net';

/**
 * Ports are handed out below the OS's ephemeral range (32768–60999 on Linux): a port the OS picks
 * for `listen(0)` is one it may also give any outgoing connection (to Temporal, PostgreSQL, the
 * kube apiserver…) between this check and the server's own listen, and under a loaded test run
 * that happens. Each vitest worker (and the global setup, as 0) takes its own block, so two
 * workers never hand out the same port; within a block ports go round from a random start.
 */
const FIRST_PORT = 12_000;
const BLOCK_SIZE = 2_000;
const BLOCKS = 10;

const block = Number(process.env.VITEST_POOL_ID ?? 0) % BLOCKS;
let next = Math.floor(Math.random() * BLOCK_SIZE);

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port }, () => server.close(() => resolve(true)));
  });
}

/** A TCP port free on 127.0.0.1 now, that no other test worker and no outgoing connection will take. */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < BLOCK_SIZE; tried++) {
    const port = FIRST_PORT + block * BLOCK_SIZE + (next++ % BLOCK_SIZE);
    if (await isFree(port)) return port;
  }
  throw new Error(
    `no free port in ${FIRST_PORT + block * BLOCK_SIZE}–${FIRST_PORT + (block + 1) * BLOCK_SIZE - 1}: something holds them all`,
  );
}
