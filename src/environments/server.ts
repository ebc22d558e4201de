import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { EnvironmentSession, SessionSummary } from './session.js';

const stepBody = z.strictObject({
  tool: z.string().min(1).max(200),
  arguments: z.record(z.string(), z.unknown()).default({}),
});

/** A session a harness reaches at `url` (REIN_ENV_URL) until `end` closes it. */
export interface OpenedSession {
  url: string;
  end(): SessionSummary;
}

/**
 * Serves environment sessions to harnesses over HTTP: `POST <url>/reset` and `POST <url>/step`
 * (docs/environments.md). One per worker process; each rollout attempt opens its own session,
 * whose URL carries an unguessable token (the harness's only credential for it) and stops
 * answering when the attempt ends.
 */
export class EnvironmentServer {
  private readonly sessions = new Map<string, EnvironmentSession>();
  private readonly app: FastifyInstance = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
  private address = '';

  /** Where harnesses reach it (127.0.0.1 by default: harnesses that run on the worker's host). */
  static async start(listen: { host: string; port: number } = { host: '127.0.0.1', port: 0 }) {
    const server = new EnvironmentServer();
    server.routes(server.app);
    server.address = await server.app.listen(listen);
    return server;
  }

  get url(): string {
    return this.address;
  }

  open(session: EnvironmentSession): OpenedSession {
    const token = randomBytes(24).toString('base64url');
    this.sessions.set(token, session);
    return {
      url: `${this.url}/env/${token}`,
      end: () => {
        this.sessions.delete(token);
        return session.ended();
      },
    };
  }

  close(): Promise<void> {
    return this.app.close();
  }

  private routes(app: FastifyInstance): void {
    const sessionOf = (token: string) => {
      const session = this.sessions.get(token);
      if (!session) throw answer(404, 'no_session', 'this environment session has ended or never existed');
      return session;
    };
    app.post<{ Params: { token: string } }>('/env/:token/reset', async (req) => {
      const session = sessionOf(req.params.token);
      return run(() => session.reset());
    });
    app.post<{ Params: { token: string } }>('/env/:token/step', async (req) => {
      const session = sessionOf(req.params.token);
      const body = stepBody.safeParse(req.body ?? {});
      if (!body.success)
        throw answer(
          400,
          'bad_action',
          `send {"tool": "<name>", "arguments": {…}}: ${body.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')}`,
        );
      return run(() => session.step({ tool: body.data.tool, arguments: body.data.arguments }));
    });
    app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
      const status = err.statusCode ?? 500;
      void reply.code(status).send({ error: { code: err.code ?? 'error', message: err.message } });
    });
  }
}

function answer(statusCode: number, code: string, message: string): Error {
  return Object.assign(new Error(message), { statusCode, code });
}

/** The environment's own exception is its bug, not the harness's: a 500 that names it. */
function run<T>(step: () => T): T {
  try {
    return step();
  } catch (err) {
    throw answer(500, 'environment_error', `the environment failed: ${(err as Error).message}`);
  }
}
