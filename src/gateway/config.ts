import { z } from 'zod';
import { WEIGHT_SYNC_KINDS } from '../registry/weight-sync.js';
import { environmentName, httpUrl } from '../config/setting-types.js';
import { port } from '../port-setting.js';
import { tracingSettings } from '../telemetry/settings.js';
import { redactionRegexProblem } from './redact.js';
import { aliasesNamedLikeVersions, routingNameProblem } from './routing.js';

/** Redaction rules run on RE2 (linear time), whose syntax differs from JavaScript's: checked as RE2 reads them. */
const redactionRegex = z
  .string()
  .min(1)
  .superRefine((source, ctx) => {
    const problem = redactionRegexProblem(source);
    if (problem)
      ctx.addIssue({ code: 'custom', message: `a valid regular expression (Invalid regular expression: ${problem})` });
  });

/**
 * A backend, policy version or alias name: the gateway's one rule, so a config cannot hold a name its admin API
 * refuses.
 */
export const routingName = z.string().superRefine((name, ctx) => {
  const problem = routingNameProblem(name);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const backend = z.strictObject({
  endpoints: z
    .array(httpUrl)
    .min(1)
    .describe('Base URLs of the OpenAI-compatible server(s), ending in /v1; a rollout sticks to one'),
  apiKeyEnv: environmentName
    .optional()
    .describe('Name of the environment variable holding the backend API key (keys stay out of config files)'),
  tokenIds: z.boolean().default(true).describe('Ask for token ids (vLLM >= 0.10.2 return_token_ids)'),
  weightSync: z
    .enum(WEIGHT_SYNC_KINDS)
    .optional()
    .describe(
      'How the backend takes the versions Rein trains (when it is trainer.servingBackend): rein, the embedded policy ' +
        "server (full weights and LoRA); vllm, vLLM's run-time LoRA routes (--enable-lora, --max-lora-rank, " +
        'VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; a full-weight version is refused, never posted as an adapter). ' +
        'Default: rein for the embedded backend, vllm for any other',
    ),
  logprobs: z.boolean().default(true).describe("Ask for the sampled tokens' log-probs"),
  nativeApis: z
    .array(z.enum(['responses', 'messages']))
    .optional()
    .describe(
      "APIs sent to this backend as the harness sent them (the backend's own /v1/responses or /v1/messages) " +
        'instead of as chat completions; their calls carry no token ids and are retokenized',
    ),
  tokenIn: z
    .strictObject({
      tokenizerDir: z
        .string()
        .describe(
          "The served model's tokenizer.json and tokenizer_config.json (its chat template): the gateway renders new turns with it",
        ),
      field: z
        .enum(['prompt_token_ids', 'kv_transfer_params'])
        .default('prompt_token_ids')
        .describe(
          'Where chat completions take the prompt ids: `prompt_token_ids` (the embedded policy server; vLLM with PR ' +
            '#55771) or `kv_transfer_params.prompt_token_ids` (vLLM main since PR #48145)',
        ),
    })
    .optional()
    .describe(
      'The backend takes a chat request with its prompt as token ids, which rollouts of runs with samples.merge: tito ' +
        'need: the gateway splices the ids the model produced into the history the harness sends back',
    ),
  maxInFlight: z
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .optional()
    .describe(
      'Calls in flight to this backend at most, across all gateways sharing the store: each live gateway admits ' +
        'its share (limit / gateways, the remainder to the lowest ids; recomputed from heartbeat rows every 2 s) and ' +
        'queues the rest in arrival order. Set it to at least the number of gateways (a share of 0 admits nothing). ' +
        'While gateways join or leave, new calls wait until all agree; a gateway cut off from the store for over 10 s ' +
        'while its calls still run is the one case the sum can pass the limit. No limit when unset',
    ),
  maxQueueWaitSeconds: z
    .number()
    .positive()
    .max(86_400)
    .optional()
    .describe(
      'With maxInFlight: longest a call waits in the queue for a slot (300 when unset); then it is refused with 429 backend_at_limit ' +
        '(Retry-After 5), journaled as policy_unavailable (an infrastructure failure, never trained on)',
    ),
});

/** The config's `gateway` section: what harnesses call, the backends and policy versions behind it. */
export const gatewaySettings = z
  .strictObject({
    host: z.string().default('127.0.0.1').describe('Address the gateway listens on'),
    port: port.default(8400).describe('Port of the gateway (OpenAI-compatible proxy and rollout API)'),
    publicUrl: httpUrl.optional().describe('How harnesses reach the gateway, if not http://host:port'),
    adminKeyHash: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional()
      .describe(
        'SHA-256 (hex) of the admin key; else REIN_GATEWAY_ADMIN_KEY, else a key generated into dataDir/gateway/admin-key',
      ),
    secretFile: z
      .string()
      .default('gateway/secret')
      .describe('Secret rollout keys are derived from, relative to dataDir; created on first start'),
    traceDb: z.string().default('traces.sqlite').describe('SQLite trace store, relative to dataDir'),
    bodyLimitBytes: z
      .number()
      .int()
      .min(1024)
      .default(32 * 1024 * 1024)
      .describe('Largest request body accepted'),
    requestTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(30_000)
      .describe(
        'Longest a request may take to arrive whole (a slower one gets 408); the answer may take as long as the backend needs',
      ),
    headersTimeoutMs: z
      .number()
      .int()
      .min(100)
      .default(600_000)
      .describe('Longest wait for a backend to start answering'),
    bodyTimeoutMs: z.number().int().min(100).default(120_000).describe('Longest silence inside a backend response'),
    retryAfterSeconds: z.number().int().min(1).default(5).describe('Retry-After sent while a policy is paused'),
    maxShadowsInFlight: z
      .number()
      .int()
      .min(1)
      .default(256)
      .describe(
        'Mirror mode: shadow calls in flight at most; past it they are not sent and are journaled as shadow_overloaded',
      ),
    redact: z
      .strictObject({
        defaults: z.boolean().default(true).describe('Redact API keys, bearer tokens, rollout keys, private keys'),
        rules: z
          .array(
            z.strictObject({
              name: z.string().min(1).describe('Shown in what replaces a match: [REDACTED:<name>]'),
              regex: redactionRegex.describe('RE2 syntax (flags inline, as (?i); no backreferences or lookaround)'),
            }),
          )
          .default([])
          .describe('Extra patterns to redact before anything is journaled'),
      })
      .prefault({})
      .describe('What is redacted from every text before it is journaled (and before traces export it)'),
    tracing: tracingSettings.prefault({}),
    backends: z.record(routingName, backend).default({}).describe('Inference servers by name'),
    policies: z
      .record(
        routingName,
        z.strictObject({
          backend: z.string().describe('A backend of gateway.backends'),
          model: routingName.describe('The model name that backend serves it under'),
        }),
      )
      .default({})
      .describe('Policy version -> the backend and model name serving it'),
    aliases: z.record(routingName, z.string()).default({}).describe('Model alias a harness asks for -> policy version'),
    defaultModel: routingName
      .optional()
      .describe(
        'An alias (such as production) or version that serves unpinned calls naming a model the gateway does not ' +
          'know (a harness that hard-codes a vendor name); unset, they get a 404 listing the names served. Pinned ' +
          'rollouts (training, held-out replay) reach their version whatever name they send',
      ),
  })
  .superRefine((g, ctx) => {
    for (const [version, policy] of Object.entries(g.policies)) {
      if (!Object.hasOwn(g.backends, policy.backend)) {
        ctx.addIssue({
          code: 'custom',
          path: ['policies', version, 'backend'],
          message: `a backend defined in gateway.backends (known: ${Object.keys(g.backends).join(', ') || 'none'})`,
        });
      }
    }
    for (const name of aliasesNamedLikeVersions(g.policies, g.aliases))
      ctx.addIssue({
        code: 'custom',
        path: ['aliases', name],
        message: `${name} is also a policy version in gateway.policies: a model name means one thing, rename the alias or the version`,
      });
    for (const [alias, version] of Object.entries(g.aliases)) {
      if (!Object.hasOwn(g.policies, version)) {
        ctx.addIssue({
          code: 'custom',
          path: ['aliases', alias],
          message: `a policy version defined in gateway.policies (known: ${Object.keys(g.policies).join(', ') || 'none'})`,
        });
      }
    }
  });
