import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ControlOutput, ControlParsed, ControlRoute, PathParams } from './control-api.js';

/** What a control route's handler gets: the request's parts typed by the route's schemas. */
export interface ControlRequest<R extends ControlRoute> {
  params: PathParams<R['path']>;
  /**
   * The query and body as the route's schemas parse them, parsed when called: each handler keeps
   * the order of its checks (an unknown rollout answers 404 before a bad query would answer 400).
   */
  query(): ControlParsed<R, 'query'>;
  body(): ControlParsed<R, 'body'>;
  req: FastifyRequest;
  reply: FastifyReply;
}

type PreHandler = (req: FastifyRequest) => Promise<void>;

/** Registers one route of the control API (see control-api.ts) with its handler, typed by the route's schemas. */
export function serveControl<R extends ControlRoute>(
  app: FastifyInstance,
  route: R,
  preHandler: PreHandler | undefined,
  handle: (request: ControlRequest<R>) => Promise<ControlOutput<R>>,
): void {
  app.route({
    method: route.method,
    url: route.path,
    ...(preHandler && { preHandler }),
    handler: (req, reply) =>
      handle({
        params: req.params as PathParams<R['path']>,
        query: () => route.query?.parse(req.query) as ControlParsed<R, 'query'>,
        body: () => route.body?.parse(req.body) as ControlParsed<R, 'body'>,
        req,
        reply,
      }),
  });
}
