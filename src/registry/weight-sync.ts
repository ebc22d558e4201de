import type { PolicyRecord } from './policy-registry.js';

/**
 * How a serving backend takes a version Rein trained, per kind of server: `rein`, the embedded policy server (full
 * checkpoints and LoRA adapters alike, through vLLM's adapter routes); `vllm`, vLLM's run-time LoRA routes (the server
 * started with --enable-lora, --max-lora-rank at least the adapters' rank, and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True).
 * vLLM cannot take full weights that way: a full-weight version is refused before anything is posted.
 */
export const WEIGHT_SYNC_KINDS = ['rein', 'vllm'] as const;
export type WeightSyncKind = (typeof WEIGHT_SYNC_KINDS)[number];

/** A version as the backend gets it. */
export type ServedVersion = Pick<PolicyRecord, 'version' | 'checkpointUri'> & { format?: 'full' | 'lora' | undefined };

/** One serving endpoint, asked with the serving key. */
export type EndpointCall = (route: string, init?: RequestInit) => Promise<Response>;

/** A serving endpoint refused to load a version, or could not be asked. */
export class ServingError extends Error {
  override name = 'ServingError';
}

interface ModelCard {
  id: string;
  /** vLLM: the path an adapter was loaded from. */
  root?: string | null;
}

/** The model cards the endpoint lists. */
async function modelCards(call: EndpointCall, base: string): Promise<ModelCard[]> {
  const res = await call('/v1/models');
  if (!res.ok) throw new ServingError(`${base}/v1/models answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  return ((await res.json()) as { data?: ModelCard[] }).data ?? [];
}

/**
 * True when the endpoint serves exactly this version: listed under its name and, where the server says which path it
 * loaded a model from (vLLM's `root`), from this version's checkpoint, not another one that took the name.
 */
export async function servesVersion(
  kind: WeightSyncKind,
  call: EndpointCall,
  base: string,
  policy: ServedVersion,
): Promise<boolean> {
  const card = (await modelCards(call, base)).find((m) => m.id === policy.version);
  if (!card) return false;
  return kind !== 'vllm' || card.root === undefined || card.root === null || card.root === policy.checkpointUri;
}

/** Loads the version on one endpoint; returns once the endpoint lists exactly it (see servesVersion). */
export async function loadVersion(
  kind: WeightSyncKind,
  call: EndpointCall,
  base: string,
  policy: ServedVersion,
): Promise<void> {
  if (kind === 'vllm' && policy.format !== 'lora')
    throw new ServingError(
      `${policy.version} is a full-weight checkpoint, which vLLM cannot load at run time (its /v1/load_lora_adapter takes LoRA adapters only): train LoRA adapters (trainer.engine: pytorch with trainer.pytorch.lora) for a vLLM backend, or serve full weights with the embedded policy server (gateway.backends.<name>.weightSync: rein)`,
    );
  const res = await call('/v1/load_lora_adapter', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ lora_name: policy.version, lora_path: policy.checkpointUri }),
  });
  if (!res.ok)
    throw new ServingError(
      `loading ${policy.version} into ${base} failed (${res.status}): ${(await res.text()).slice(0, 300)}`,
    );
  if (!(await servesVersion(kind, call, base, policy)))
    throw new ServingError(
      `${base} accepted ${policy.version} but does not list it as loaded from ${policy.checkpointUri}: it is not routed to`,
    );
}
