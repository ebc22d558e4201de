import type { FastifyInstance, FastifyReply } from 'fastify';
import { consoleAssets } from './assets.js';

/**
 * The console at /console/ (and / sends there): its page, script and styles, all from the
 * package. They need no key; the page asks for it and sends it with each API call.
 */
export function registerConsole(app: FastifyInstance): void {
  app.get('/', (_req, reply) => reply.redirect('/console/'));
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
