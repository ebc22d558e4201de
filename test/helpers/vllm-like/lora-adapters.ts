import type http from 'node:http';
import { MODEL, type Json } from './toy-model.js';
import { json } from './replies.js';

/**
 * GET /v1/models: the base model and every LoRA adapter loaded, each as a vLLM model card (an adapter's `root` is the
 * path it was loaded from, its `parent` the base, as vLLM's serving_models lists them).
 */
export function listModels(res: http.ServerResponse, adapters: Map<string, string>) {
  // vLLM's model cards: what a harness may read (the context length above all) lies beyond the id.
  const card = (id: string, root: string) => ({
    id,
    object: 'model',
    created: 1_700_000_000,
    owned_by: 'vllm',
    root,
    parent: id === MODEL ? null : MODEL,
    max_model_len: 4096,
    permission: [{ id: `modelperm-${id}`, object: 'model_permission', allow_sampling: true }],
  });
  return json(res, 200, {
    object: 'list',
    data: [card(MODEL, MODEL), ...[...adapters].map(([id, path]) => card(id, path))],
  });
}

/** POST /v1/load_lora_adapter, answered as vLLM answers it (plain text); the adapter then answers as the toy model. */
export function loadLoraAdapter(res: http.ServerResponse, adapters: Map<string, string>, body: Json) {
  adapters.set(String(body.lora_name), String(body.lora_path));
  res.writeHead(200, { 'content-type': 'text/plain' });
  return res.end(`Success: LoRA adapter '${String(body.lora_name)}' added successfully.`);
}
