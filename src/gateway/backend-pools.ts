import type { IncomingHttpHeaders } from 'node:http';
import { Pool } from 'undici';
import type { CallEndpoint } from '../store/trace-store.js';
import type { Route } from './routing.js';

/** Request headers that belong to the hop to the gateway or to the harness's key, not to the backend. */
const NOT_FORWARDED = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'content-length',
  'authorization',
  'api-key',
  'x-api-key',
  // The gateway reads the response: it has to arrive uncompressed.
  'accept-encoding',
]);

const PATHS: Record<CallEndpoint, string> = {
  'chat.completions': '/chat/completions',
  completions: '/completions',
  responses: '/responses',
  messages: '/messages',
};

/**
 * The gateway's connections to its backends, one pool per origin whichever routes name it, and the
 * request a model call (production or shadow) makes through them.
 */
export class BackendPools {
  private readonly pools = new Map<string, Pool>();
  private readonly endpoints = new Map<string, { pool: Pool; basePath: string }>();

  constructor(
    /** Longest wait for the backend's response headers (a non-streamed generation arrives whole). */
    private readonly headersTimeoutMs: number,
    /** Longest silence between two pieces of a response body. */
    private readonly bodyTimeoutMs: number,
  ) {}

  /** The request to a route's backend, for a production call and its shadow alike. */
  send(
    route: Route,
    endpoint: CallEndpoint,
    text: string,
    harnessHeaders: IncomingHttpHeaders,
    stream: boolean,
    signal: AbortSignal,
  ) {
    const { pool, basePath } = this.upstream(route.endpoint);
    const headers: Record<string, string | string[]> = {};
    const hopHeaders = new Set(
      String(harnessHeaders.connection ?? '')
        .toLowerCase()
        .split(',')
        .map((h) => h.trim()),
    );
    for (const [name, value] of Object.entries(harnessHeaders)) {
      if (value !== undefined && !NOT_FORWARDED.has(name) && !hopHeaders.has(name)) headers[name] = value;
    }
    headers['content-type'] ??= 'application/json';
    if (stream) headers.accept ??= 'text/event-stream';
    else headers.accept = 'application/json';
    if (route.backend.apiKey) headers.authorization = `Bearer ${route.backend.apiKey}`;
    return pool.request({
      method: 'POST',
      path: `${basePath}${PATHS[endpoint]}`,
      headers,
      body: text,
      signal,
      headersTimeout: this.headersTimeoutMs,
      bodyTimeout: this.bodyTimeoutMs,
    });
  }

  private upstream(endpoint: string): { pool: Pool; basePath: string } {
    let known = this.endpoints.get(endpoint);
    if (!known) {
      const url = new URL(endpoint);
      let pool = this.pools.get(url.origin);
      if (!pool) {
        pool = new Pool(url.origin, { connections: 512, keepAliveTimeout: 30_000, pipelining: 1 });
        this.pools.set(url.origin, pool);
      }
      known = { pool, basePath: url.pathname.replace(/\/$/, '') };
      this.endpoints.set(endpoint, known);
    }
    return known;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.close()));
  }
}
