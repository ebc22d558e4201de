import type { FastifyInstance, FastifyRequest } from 'fastify';

/**
 * Fastify's JSON parser refuses a key named `__proto__` (or `constructor` holding `prototype`) on
 * purpose, against prototype poisoning, with the same words as for text that is not JSON ("Body
 * is not valid JSON"). That sends the caller looking for a syntax error; this says which key.
 */
export class ForbiddenKeyError extends Error {
  readonly statusCode = 400;
  constructor() {
    super(
      'the JSON body has a key named __proto__ (or a constructor key holding prototype), which is refused because it could change how the body is read: rename or remove that key',
    );
    this.name = 'ForbiddenKeyError';
  }
}

/** The parser's error for `text`, said as it is: a forbidden key when the text is JSON after all. */
export function jsonBodyError(text: string, err: Error): Error {
  try {
    JSON.parse(text);
  } catch {
    return err;
  }
  return new ForbiddenKeyError();
}

type Done = (err: Error | null, body?: unknown) => void;

/** Fastify's own JSON body parser (refusing __proto__ and constructor.prototype keys), saying why it refused. */
export function jsonParserNamingForbiddenKeys(
  app: FastifyInstance,
): (req: FastifyRequest, text: string, done: Done) => void {
  const parse = app.getDefaultJsonParser('error', 'error');
  return (req, text, done) =>
    void parse(req, text, (err, body) => (err ? done(jsonBodyError(text, err)) : done(null, body)));
}
