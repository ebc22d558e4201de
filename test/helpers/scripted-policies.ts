import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An OpenAI-compatible upstream whose "models" are scripted agents for the example's arithmetic
 * tasks, so a test knows exactly which tasks each policy gets right. Each model decides per
 * question (from its two numbers): answer right, answer wrong, or first call the `purge_cache`
 * tool (an irreversible action in the ops-agent fixture harness) and then answer right.
 * Turn 1 calls `calc` with the expression (or `purge_cache`); the turn after a tool result answers.
 */
export type Behaviour = (a: number, b: number) => 'right' | 'wrong' | 'purge';

export interface ScriptedPolicies {
  url: string;
  close(): Promise<void>;
}

const OPERATORS: Record<string, (a: number, b: number) => number> = {
  plus: (a, b) => a + b,
  minus: (a, b) => a - b,
  times: (a, b) => a * b,
  'apples and': (a, b) => a + b,
};

export async function startScriptedPolicies(models: Record<string, Behaviour>): Promise<ScriptedPolicies> {
  const server = http.createServer((req, res) => {
    const pieces: Buffer[] = [];
    req.on('data', (d: Buffer) => pieces.push(d));
    req.on('end', () => {
      const send = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.url === '/v1/models')
        return send(200, { object: 'list', data: Object.keys(models).map((id) => ({ id, object: 'model' })) });
      const body = JSON.parse(Buffer.concat(pieces).toString()) as {
        model: string;
        messages: Array<{ role: string; content?: string | null; tool_calls?: Array<{ function: { name: string } }> }>;
      };
      const behaviour = models[body.model];
      if (!behaviour)
        return send(404, {
          error: { message: `The model \`${body.model}\` does not exist.`, type: 'NotFoundError', code: 404 },
        });
      const question = body.messages.find((m) => m.role === 'user')?.content ?? '';
      const match = /(\d+) (plus|minus|times|apples and) (\d+)/.exec(question);
      const [a, op, b] = match ? [Number(match[1]), match[2] as string, Number(match[3])] : [0, 'plus', 0];
      const answer = (OPERATORS[op] as (a: number, b: number) => number)(a, b);
      const choice = behaviour(a, b);
      const last = body.messages.at(-1);
      const purged = body.messages.some((m) => m.tool_calls?.some((c) => c.function.name === 'purge_cache'));
      let message: Record<string, unknown>;
      if (last?.role === 'user' && choice === 'purge' && !purged) {
        message = {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call-purge', type: 'function', function: { name: 'purge_cache', arguments: '{}' } }],
        };
      } else if (
        last?.role === 'user' ||
        (last?.role === 'tool' &&
          purged &&
          !body.messages.some((m) => m.tool_calls?.some((c) => c.function.name === 'calc')))
      ) {
        const expression = `${a}${op === 'minus' ? '-' : op === 'times' ? '*' : '+'}${b}`;
        message = {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call-calc',
              type: 'function',
              function: { name: 'calc', arguments: JSON.stringify({ x: expression }) },
            },
          ],
        };
      } else {
        message = { role: 'assistant', content: `The answer is ${choice === 'wrong' ? answer + 1 : answer}.` };
      }
      const finish = message.tool_calls ? 'tool_calls' : 'stop';
      send(200, {
        id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
        usage: {
          prompt_tokens: 20 * body.messages.length,
          completion_tokens: 12,
          total_tokens: 20 * body.messages.length + 12,
        },
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
