import OpenAI from 'openai';
import type { RiggerLlm } from '../src/environments/run-variants.js';
import type { EnvironmentSettings } from '../src/environments/settings.js';
import { GatewayRequestError, type GatewayControlClient, type IssuedRollout } from '../src/gateway/control-client.js';

type LlmSettings = NonNullable<EnvironmentSettings['rigger']['llm']>;

/** The rollout an iteration's rigger call is journaled under. */
export const riggerRolloutId = (runId: string, iteration: number) => `${runId}.rigger.it${iteration}`;

/** How long one rigger call may take (an answer of maxTokens from a busy server), and its tries. */
const CALL_TIMEOUT_MS = 180_000;
const CALL_TRIES = 2;

/**
 * The rigger's LLM, asked through the gateway as a harness asks its model: a rollout (mode
 * `rigger`) whose key the call carries, so the call is journaled, routed and redacted like any
 * other. `finish` ends the rollout once the rigger's report is recorded (a retried activity that
 * finds the rollout still open asks again, as a new attempt; one that finds the report recorded ends
 * the rollout from it).
 */
export function riggerLlm(
  gateway: GatewayControlClient | undefined,
  settings: LlmSettings,
  runId: string,
  iteration: number,
): RiggerLlm & { finish(recorded?: { error?: string }): Promise<void> } {
  const rolloutId = riggerRolloutId(runId, iteration);
  let outcome: { error?: string } | undefined;
  return {
    model: settings.model,
    rolloutId,
    async ask(messages) {
      if (!gateway) return { error: 'this worker has no gateway to ask the LLM through (gateway settings)' };
      try {
        const issued = await openRollout(gateway, rolloutId, runId, iteration);
        const client = new OpenAI({
          baseURL: issued.baseUrl,
          apiKey: issued.key,
          timeout: CALL_TIMEOUT_MS,
          maxRetries: CALL_TRIES - 1,
        });
        const reply = await client.chat.completions.create({
          model: settings.model,
          messages,
          max_tokens: settings.maxTokens,
          temperature: 0,
        });
        outcome = {};
        return { text: reply.choices[0]?.message.content ?? '' };
      } catch (err) {
        outcome = { error: (err as Error).message };
        return { error: `the LLM call failed: ${(err as Error).message}` };
      }
    },
    async finish(recorded) {
      // This try's call, else (a retry after the try that asked died) what the recorded report says it came to.
      const ended = outcome ?? recorded;
      if (!gateway || !ended) return;
      const change = ended.error
        ? { status: 'failed' as const, failureClass: 'infrastructure' as const, reason: ended.error.slice(0, 4000) }
        : { status: 'succeeded' as const, reason: "the rigger's report is recorded" };
      const rollout = await gateway.getRollout(rolloutId).catch((err: unknown) => {
        if (err instanceof GatewayRequestError && err.status === 404) return undefined; // never made: no gateway
        throw err;
      });
      if (!rollout || (rollout.status === 'queued' && change.status === 'succeeded')) return; // nothing to end
      if (rollout.status === 'queued' || rollout.status === 'running') await gateway.setStatus(rolloutId, change);
    },
  };
}

/** The iteration's rigger rollout: made now, or (a retried activity) a new attempt of the one left open. */
async function openRollout(
  gateway: GatewayControlClient,
  id: string,
  runId: string,
  iteration: number,
): Promise<IssuedRollout> {
  try {
    return await gateway.createRollout({ id, mode: 'rigger', metadata: { runId, iteration } });
  } catch (err) {
    if (!(err instanceof GatewayRequestError) || err.status !== 409) throw err;
    return gateway.startAttempt(id);
  }
}
