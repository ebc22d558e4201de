import type { FastifyInstance, FastifyReply } from 'fastify';
import { consoleAssets } from './assets.js';

/**
 * The console at /console/ (and / sends there): its page, script and styles, all from the
 * package. They need no key; the page asks for it and sends it with each API call.
 */
export function registerConsole(app: FastifyInstance): void {
  app.get('/', (_req, reply) => reply.redirect('/console/'));
  // The page links its icon; browsers and tools that ask for /favicon.ico by habit get the same.
  const icon = (_req: unknown, reply: FastifyReply) =>
    reply.header('content-type', 'image/svg+xml').header('cache-control', 'max-age=86400').send(ICON);
  app.get('/favicon.ico', icon);
  app.get('/console/favicon.svg', icon);
  app.get('/console', (_req, reply) => reply.redirect('/console/'));
  const serve = async (file: string, reply: FastifyReply) => {
    const asset = (await consoleAssets()).get(file);
    if (!asset)
      return reply
        .code(404)
        .send({ error: { code: 'not_found', message: `the console has no file ${file}; it is at /console/` } });
    // The page is small and changes with Rein's version: never cached stale across an upgrade.
    return reply
      .header('content-type', asset.contentType)
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .send(asset.body);
  };
  app.get('/console/', (_req, reply) => serve('index.html', reply));
  app.get<{ Params: { file: string } }>('/console/:file', (req, reply) => serve(req.params.file, reply));
}

/** The console's icon: an R on the header's colour. */
const ICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f3a5f"/>' +
  '<text x="16" y="23" font-family="sans-serif" font-size="20" font-weight="700" fill="#fff" text-anchor="middle">R</text></svg>';
