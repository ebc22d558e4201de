// A vLLM-shaped backend for benchmarks, in its own process so it does not share an event loop
// with the gateway or the load generator.
import { startVllmLikeServer } from '../test/helpers/vllm-like-server.js';

const server = await startVllmLikeServer({ chunkSize: 4 });
process.stdout.write(`${server.url}\n`);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
