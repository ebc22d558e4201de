import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

/** The pinned Python environment with the official openai and anthropic SDKs (requirements.lock). */
const python = path.resolve(import.meta.dirname, '../../.tools/conformance/bin/python');

/**
 * Runs every scenario of `scenariosFile` with one Python SDK runner (openai_sdk.py or
 * anthropic_sdk.py), in one process, against one endpoint: scenario name -> what the caller got.
 */
export async function runWithPythonSdk(
  runner: 'openai_sdk.py' | 'anthropic_sdk.py',
  scenariosFile: string,
  baseUrl: string,
  key: string,
  model: string,
): Promise<Record<string, unknown>> {
  const script = path.join(import.meta.dirname, runner);
  const { stdout } = await promisify(execFile)(python, [script, scenariosFile, baseUrl, key, model], {
    maxBuffer: 64 << 20,
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}
