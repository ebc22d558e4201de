import { existsSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { withEmbeddedDefault } from './embedded-default.js';
import { redactedStoreUrl } from '../store/location.js';
import { reinConfigSchema, type ReinConfig } from './schema.js';
import { ConfigError } from './config-error.js';
import { readConfigFile } from './read-file.js';
import { valueProblems } from './value-limits.js';

export { ConfigError } from './config-error.js';
export { MAX_CONFIG_BYTES } from './read-file.js';

export interface LoadedConfig {
  config: ReinConfig;
  /** Absolute path of the file read, or undefined when only defaults and environment were used. */
  file: string | undefined;
}

const DEFAULT_FILES = ['rein.yaml', 'rein.yml', 'rein.json'];

/**
 * Reads the config file (explicit path, else REIN_CONFIG, else rein.yaml|yml|json in cwd, else
 * none), overlays the environment, validates it and resolves relative paths against the file's folder.
 * `overrides` (merged into the file's settings, key by key) let a program adjust a config it reads.
 */
export function loadConfig(
  options: {
    file?: string | undefined;
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    overrides?: Record<string, unknown>;
  } = {},
): LoadedConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const file = findConfigFile(options.file ?? env.REIN_CONFIG, cwd);
  const raw = mergeSettings(file ? readConfigFile(file) : {}, options.overrides ?? {});
  const { input, fromEnv } = overlayEnvironment(raw, env, cwd);
  const config = validateConfig(input, file ?? 'defaults and environment', fromEnv);
  return { config: withEmbeddedDefault(resolvePaths(config, file ? path.dirname(file) : cwd)), file };
}

function mergeSettings(base: unknown, overrides: unknown): unknown {
  const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!isMap(base) || !isMap(overrides)) return overrides === undefined ? base : overrides;
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(overrides)) merged[key] = mergeSettings(base[key], value);
  return merged;
}

function findConfigFile(explicit: string | undefined, cwd: string): string | undefined {
  if (explicit) {
    const file = path.resolve(cwd, explicit);
    if (!existsSync(file)) {
      throw new ConfigError(explicit, [`file not found: ${file} (check the --config path or REIN_CONFIG)`]);
    }
    return file;
  }
  return DEFAULT_FILES.map((name) => path.join(cwd, name)).find((f) => existsSync(f));
}

/**
 * A config file is a few KiB; past this it is the wrong file (or an attack), refused before parsing, which would take
 * long.
 */
/** Validates a config object; every zod issue becomes one line naming path, value and expectation. */
export function validateConfig(
  input: unknown,
  source: string,
  fromEnv: ReadonlyMap<string, string> = new Map(),
): ReinConfig {
  const hostile = valueProblems(input);
  if (hostile.length > 0) throw new ConfigError(source, hostile);
  const result = reinConfigSchema.safeParse(input);
  if (result.success) return result.data;
  throw new ConfigError(
    source,
    result.error.issues.map((issue) => describeIssue(issue, input, fromEnv)),
  );
}

function describeIssue(issue: z.core.$ZodIssue, input: unknown, fromEnv: ReadonlyMap<string, string>): string {
  const at = issue.path.length > 0 ? issue.path.join('.') : '(top level)';
  const origin = fromEnv.get(issue.path.join('.'));
  const where = origin ? `${at} (from ${origin})` : at;
  if (issue.code === 'unrecognized_keys') {
    const allowed = allowedKeysAt(issue.path);
    return `${where}: unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}; expected one of: ${allowed.join(', ')}`;
  }
  // A map's key (a backend or policy name) that its rule refuses: say why, not the value under it.
  if (issue.code === 'invalid_key') return `${where}: ${issue.issues.map((i) => i.message).join('; ')}`;
  const value = valueAt(input, issue.path);
  // A store URL may carry a password: shown without it.
  const shown =
    value === undefined
      ? 'nothing'
      : JSON.stringify(at === 'store.url' && typeof value === 'string' ? redactedStoreUrl(value) : value);
  return `${where}: got ${shown}; expected ${expectation(issue)}`;
}

function expectation(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.expected;
    case 'too_small':
      return issue.origin === 'string'
        ? 'a non-empty string'
        : `${issue.inclusive ? 'at least' : 'more than'} ${String(issue.minimum)}`;
    case 'too_big':
      return `${issue.inclusive ? 'at most' : 'less than'} ${String(issue.maximum)}`;
    case 'invalid_value':
      return `one of: ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_union':
      return issue.errors.map((branch) => branch.map((e) => expectation(e)).join(' and ')).join(', or ');
    default:
      return issue.message;
  }
}

function valueAt(input: unknown, keys: readonly PropertyKey[]): unknown {
  let current = input;
  for (const key of keys) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

function allowedKeysAt(keys: readonly PropertyKey[]): string[] {
  let schema: z.core.$ZodType | undefined = reinConfigSchema;
  for (const key of keys) schema = schema && childSchema(schema, String(key));
  return Object.keys((schema && objectShapeOf(schema)) ?? {});
}

/**
 * The schema of what lies at `key`: an object's own property, or the values of a record or array (a backend's name is
 * any name).
 */
function childSchema(schema: z.core.$ZodType, key: string): z.core.$ZodType | undefined {
  const shape = objectShapeOf(schema);
  if (shape) return Object.hasOwn(shape, key) ? shape[key] : undefined;
  let def = schema._zod.def as { innerType?: z.core.$ZodType; valueType?: z.core.$ZodType; element?: z.core.$ZodType };
  while (def.innerType) def = def.innerType._zod.def as typeof def;
  return def.valueType ?? def.element;
}

/** The object shape behind defaults, optionals and unions (e.g. `tls: boolean | {...}`). */
function objectShapeOf(schema: z.core.$ZodType): Record<string, z.core.$ZodType> | undefined {
  const def = schema._zod.def as {
    shape?: Record<string, z.core.$ZodType>;
    innerType?: z.core.$ZodType;
    options?: z.core.$ZodType[];
  };
  if (def.shape) return def.shape;
  if (def.innerType) return objectShapeOf(def.innerType);
  for (const option of def.options ?? []) {
    const shape = objectShapeOf(option);
    if (shape) return shape;
  }
  return undefined;
}

/** Environment variables that override the file; names follow the Temporal CLI's own. */
export const CONFIG_ENVIRONMENT: ReadonlyArray<
  [variable: string, keys: string[], kind: 'string' | 'path' | 'boolean' | 'integer']
> = [
  ['REIN_DATA_DIR', ['dataDir'], 'path'],
  ['REIN_LOG_LEVEL', ['log', 'level'], 'string'],
  ['REIN_ARTIFACTS_URL', ['artifacts', 'url'], 'string'],
  ['REIN_S3_ENDPOINT', ['artifacts', 's3', 'endpoint'], 'string'],
  ['REIN_S3_REGION', ['artifacts', 's3', 'region'], 'string'],
  ['REIN_S3_FORCE_PATH_STYLE', ['artifacts', 's3', 'forcePathStyle'], 'boolean'],
  ['REIN_STORE_URL', ['store', 'url'], 'string'],
  ['REIN_TRAINER_ENGINE', ['trainer', 'engine'], 'string'],
  ['TEMPORAL_ADDRESS', ['temporal', 'address'], 'string'],
  ['TEMPORAL_NAMESPACE', ['temporal', 'namespace'], 'string'],
  ['TEMPORAL_API_KEY', ['temporal', 'apiKey'], 'string'],
  ['TEMPORAL_TLS', ['temporal', 'tls'], 'boolean'],
  ['TEMPORAL_TLS_CLIENT_CERT_PATH', ['temporal', 'tls', 'clientCertPath'], 'path'],
  ['TEMPORAL_TLS_CLIENT_KEY_PATH', ['temporal', 'tls', 'clientKeyPath'], 'path'],
  ['TEMPORAL_TLS_SERVER_CA_CERT_PATH', ['temporal', 'tls', 'serverCaCertPath'], 'path'],
  ['TEMPORAL_TLS_SERVER_NAME', ['temporal', 'tls', 'serverName'], 'string'],
  ['REIN_GATEWAY_HOST', ['gateway', 'host'], 'string'],
  ['REIN_GATEWAY_PORT', ['gateway', 'port'], 'integer'],
  ['REIN_GATEWAY_PUBLIC_URL', ['gateway', 'publicUrl'], 'string'],
];

function overlayEnvironment(
  raw: unknown,
  env: NodeJS.ProcessEnv,
  cwd: string,
): { input: unknown; fromEnv: Map<string, string> } {
  const fromEnv = new Map<string, string>();
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return { input: raw, fromEnv };
  const input = structuredClone(raw) as Record<string, unknown>;
  for (const [variable, keys, kind] of CONFIG_ENVIRONMENT) {
    const text = env[variable];
    if (text === undefined || text === '') continue;
    let value: unknown = text;
    if (kind === 'path') value = path.resolve(cwd, text);
    if (kind === 'integer' && /^\d+$/.test(text)) value = Number(text);
    if (kind === 'boolean') value = /^(1|true|yes)$/i.test(text) ? true : /^(0|false|no)$/i.test(text) ? false : text;
    setAt(input, keys, value);
    fromEnv.set(keys.join('.'), variable);
  }
  return { input, fromEnv };
}

function setAt(target: Record<string, unknown>, keys: string[], value: unknown): void {
  let node = target;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    // A boolean `tls: true` becomes an object once a certificate file is given.
    if (next === null || typeof next !== 'object') node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  const last = keys[keys.length - 1] as string;
  if (typeof node[last] === 'object' && node[last] !== null && typeof value === 'boolean') return;
  node[last] = value;
}

/** A program runs in its cwd (default: the config's folder); a command given as a path is found from there. */
function resolveProgram<T extends { command: string; cwd?: string | undefined }>(program: T, baseDir: string): T {
  const cwd = path.resolve(baseDir, program.cwd ?? '.');
  return {
    ...program,
    cwd,
    command: program.command.includes('/') ? path.resolve(cwd, program.command) : program.command,
  };
}

function resolvePaths(config: ReinConfig, baseDir: string): ReinConfig {
  const dataDir = path.resolve(baseDir, config.dataDir);
  const tls = config.temporal.tls;
  return {
    ...config,
    dataDir,
    temporal: {
      ...config.temporal,
      tls:
        typeof tls === 'object'
          ? {
              ...tls,
              clientCertPath: tls.clientCertPath && path.resolve(baseDir, tls.clientCertPath),
              clientKeyPath: tls.clientKeyPath && path.resolve(baseDir, tls.clientKeyPath),
              serverCaCertPath: tls.serverCaCertPath && path.resolve(baseDir, tls.serverCaCertPath),
            }
          : tls,
      devServer: {
        ...config.temporal.devServer,
        dbFile: path.resolve(dataDir, config.temporal.devServer.dbFile),
      },
    },
    samples: {
      ...config.samples,
      tokenizerDir: config.samples.tokenizerDir && path.resolve(baseDir, config.samples.tokenizerDir),
    },
    ...(config.harness && {
      harness: {
        ...config.harness,
        ...(config.harness.local && { local: resolveProgram(config.harness.local, baseDir) }),
        ...(config.harness.kubernetes && {
          kubernetes: {
            ...config.harness.kubernetes,
            template: path.resolve(baseDir, config.harness.kubernetes.template),
            ...(config.harness.kubernetes.kubeconfig && {
              kubeconfig: path.resolve(baseDir, config.harness.kubernetes.kubeconfig),
            }),
          },
        }),
      },
    }),
    ...(config.verifier && { verifier: resolveProgram(config.verifier, baseDir) }),
    ...(config.environment && {
      environment: { ...config.environment, module: path.resolve(baseDir, config.environment.module) },
    }),
    trainer: {
      ...config.trainer,
      ...(config.trainer.kubernetes && {
        kubernetes: {
          ...config.trainer.kubernetes,
          template: path.resolve(baseDir, config.trainer.kubernetes.template),
          ...(config.trainer.kubernetes.kubeconfig && {
            kubeconfig: path.resolve(baseDir, config.trainer.kubernetes.kubeconfig),
          }),
        },
      }),
    },
    run: {
      ...config.run,
      base: {
        ...config.run.base,
        checkpoint: config.run.base.checkpoint && path.resolve(baseDir, config.run.base.checkpoint),
      },
      trainTasks: config.run.trainTasks && path.resolve(baseDir, config.run.trainTasks),
      heldoutTasks: config.run.heldoutTasks && path.resolve(baseDir, config.run.heldoutTasks),
    },
    gateway: {
      ...config.gateway,
      secretFile: path.resolve(dataDir, config.gateway.secretFile),
      traceDb: path.resolve(dataDir, config.gateway.traceDb),
      backends: withTokenizerPaths(config.gateway.backends, baseDir),
    },
  };
}

/** Each backend's token-in tokenizer folder, relative to the config file. */
function withTokenizerPaths(
  backends: ReinConfig['gateway']['backends'],
  baseDir: string,
): ReinConfig['gateway']['backends'] {
  return Object.fromEntries(
    Object.entries(backends).map(([name, backend]) => [
      name,
      backend.tokenIn
        ? {
            ...backend,
            tokenIn: { ...backend.tokenIn, tokenizerDir: path.resolve(baseDir, backend.tokenIn.tokenizerDir) },
          }
        : backend,
    ]),
  );
}
