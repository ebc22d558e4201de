import type http from 'node:http';
import { MODEL, type Json } from './toy-model.js';
import { json } from './replies.js';

/** GET /v1/models: the base model and every LoRA adapter loaded, each as a vLLM model card. */
export function listModels(res: http.ServerResponse, adapters: Set<string>) {
  // vLLM's model cards: what a harness may read (the context length above all) lies beyond the id.
  const card = (id: string) => ({
    id,
    object: 'model',
    created: 1_700_000_000,
    owned_by: 'vllm',
    root: MODEL,
    parent: id === MODEL ? null : MODEL,
    max_model_len: 4096,
    permission: [{ id: `modelperm-${id}`, object: 'model_permission', allow_sampling: true }],
  });
  return json(res, 200, { object: 'list', data: [MODEL, ...adapters].map(card) });
}

/** POST /v1/load_lora_adapter, answered as vLLM answers it (plain text); the adapter then answers as the toy model. */
export function loadLoraAdapter(res: http.ServerResponse, adapters: Set<string>, body: Json) {
  adapters.add(String(body.lora_name));
  res.writeHead(200, { 'content-type': 'text/plain' });
  return res.end(`Success: LoRA adapter '${String(body.lora_name)}' added successfully.`);
}
