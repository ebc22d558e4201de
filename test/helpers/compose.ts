import { copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { startRein, type RunningRein } from './cli.js';

/**
 * docker-compose.yml's services run as local processes, for machines without a Docker engine:
 * each Rein service runs its own `command` with its own `environment` (and the image's ENV), only
 * with the compose network's host:port values, the services' listening ports and the container
 * paths moved to this machine by a {@link Localization} the test names in one place.
 */

export interface ComposeService {
  image?: string;
  build?: string | { context?: string; dockerfile?: string };
  command?: string[];
  ports?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: string[] | Record<string, { condition: string }>;
  profiles?: string[];
  healthcheck?: { test: string[] };
  restart?: string;
}

export interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

/** The compose file as Compose reads it: `<<: *anchor` merge keys expanded, `x-` extension fields kept. */
export function readCompose(file: string): ComposeFile {
  return parse(readFileSync(file, 'utf8'), { merge: true }) as ComposeFile;
}

/** The services a service waits for, with the condition (`service_started` for a plain list). */
export function dependencies(service: ComposeService): Array<[name: string, condition: string]> {
  const deps = service.depends_on ?? [];
  return Array.isArray(deps)
    ? deps.map((d) => [d, 'service_started'])
    : Object.entries(deps).map(([d, c]) => [d, c.condition]);
}

/** `source:target[:mode]` of a service's volume, and whether the source is a named volume (not a path). */
export function parseVolume(spec: string): { source: string; target: string; named: boolean } {
  const [source = '', target = ''] = spec.split(':');
  return { source, target, named: !source.startsWith('.') && !source.startsWith('/') };
}

/** The final stage of a Dockerfile: its WORKDIR, ENV, the paths it copies from the build stage, and its ENTRYPOINT. */
export function imageOf(dockerfile: string): {
  workdir: string;
  env: Record<string, string>;
  copied: string[];
  entrypoint: string[];
} {
  const text = readFileSync(dockerfile, 'utf8').replace(/\\\n/g, ' ');
  const stages = text.split(/^FROM\s/m);
  const last = stages[stages.length - 1] ?? '';
  const lines = last.split('\n').map((l) => l.trim());
  const workdir =
    lines
      .filter((l) => l.startsWith('WORKDIR '))
      .map((l) => l.slice(8).trim())
      .pop() ?? '/';
  const env: Record<string, string> = {};
  for (const line of lines.filter((l) => l.startsWith('ENV '))) {
    for (const [, key, value] of line.slice(4).matchAll(/(\w+)=(\S+)/g)) env[key as string] = value as string;
  }
  const copied = lines.flatMap((l) => /^COPY --from=\S+ (\S+) /.exec(l)?.[1] ?? []);
  const entrypoint = JSON.parse(lines.find((l) => l.startsWith('ENTRYPOINT '))?.slice(11) ?? '[]') as string[];
  return { workdir, env, copied, entrypoint };
}

/** How the compose network and the containers' file systems map onto this machine. */
export interface Localization {
  /** `service:port` on the compose network → `host:port` here. */
  endpoints: Record<string, string>;
  /** A port a Rein service listens on in its container → the port it listens on here. */
  ports: Record<number, number>;
  /** An absolute path in the containers (a mount point, the image's folder) → the folder or file here. */
  paths: Record<string, string>;
}

function inverse(map: Localization): Localization {
  const flip = <K extends string | number, V extends string | number>(r: Record<K, V>) =>
    Object.fromEntries(Object.entries(r).map(([k, v]) => [v, typeof v === 'number' ? Number(k) : k]));
  return { endpoints: flip(map.endpoints), ports: flip(map.ports) as Record<number, number>, paths: flip(map.paths) };
}

function localizeText(text: string, map: Localization): string {
  let out = text;
  for (const [from, to] of Object.entries(map.endpoints)) {
    out = out.replace(new RegExp(`(^|[/@])${from.replace(/[.]/g, '\\.')}(?=$|[/?])`, 'g'), `$1${to}`);
  }
  // A container path as a whole value or its start, the longest mount first.
  for (const [from, to] of Object.entries(map.paths).sort(([a], [b]) => b.length - a.length)) {
    if (out === from || out.startsWith(`${from}/`)) return to + out.slice(from.length);
  }
  return out;
}

/**
 * A value (a command line, an environment, a parsed config) with every compose host:port, every
 * listening port (a `port:` setting, a `--port` argument) and every container path moved here.
 */
export function localize<T>(value: T, map: Localization, key = ''): T {
  if (typeof value === 'string') return localizeText(value, map) as T;
  if (typeof value === 'number')
    return (key === 'port' && map.ports[value] !== undefined ? map.ports[value] : value) as T;
  if (Array.isArray(value)) {
    return value.map((item: unknown, i) => {
      const port = value[i - 1] === '--port' && typeof item === 'string' ? map.ports[Number(item)] : undefined;
      return port === undefined ? localize(item, map) : String(port);
    }) as T;
  }
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, localize(v, map, k)])) as T;
  return value;
}

/**
 * The value back in the compose network's terms: what a test compares with the compose file to show nothing else moved.
 */
export function delocalize<T>(value: T, map: Localization): T {
  return localize(value, inverse(map));
}

/**
 * Where each mount of `services` lies here: a named volume in a folder of its own (shared by the
 * services that mount it), a bind mount's target in a folder standing in for the containers' file
 * system. A target mounted by several services must have the same source in each (as one config
 * file shared by all). Returns container path → local path.
 */
export function mountPoints(services: ComposeService[], fsRoot: string): Record<string, string> {
  const mounts: Record<string, string> = {};
  const sources = new Map<string, string>();
  for (const { source, target, named } of services.flatMap((s) => (s.volumes ?? []).map(parseVolume))) {
    const seen = sources.get(target);
    if (seen !== undefined && seen !== source) throw new Error(`${target} is mounted from ${seen} and from ${source}`);
    sources.set(target, source);
    mounts[target] = named ? path.join(fsRoot, 'volumes', source) : path.join(fsRoot, 'binds', target);
  }
  return mounts;
}

/**
 * Makes the mounts of `services` (at `map.paths`): a folder for a named volume, a copy of a bind
 * mount's source file, localized when it is YAML (a config names hosts and container paths).
 */
export function fillMounts(services: ComposeService[], projectDir: string, map: Localization): void {
  for (const { source, target, named } of services.flatMap((s) => (s.volumes ?? []).map(parseVolume))) {
    const local = map.paths[target];
    if (local === undefined) throw new Error(`no local path for ${target}`);
    if (named) {
      mkdirSync(local, { recursive: true });
      continue;
    }
    const from = path.resolve(projectDir, source);
    if (statSync(from).isDirectory()) throw new Error(`${source}: only files are mounted into Rein services here`);
    mkdirSync(path.dirname(local), { recursive: true });
    if (/\.ya?ml$/.test(from)) writeFileSync(local, stringify(localize(parse(readFileSync(from, 'utf8')), map)));
    else copyFileSync(from, local);
  }
}

/**
 * The environment a service's container gets (the image's ENV, then the service's `environment`,
 * localized), plus PATH and HOME as the base image has them; nothing else of this process's.
 */
export function serviceEnvironment(
  service: ComposeService,
  imageEnv: Record<string, string>,
  map: Localization,
): Record<string, string | undefined> {
  const cleared = Object.fromEntries(Object.keys(process.env).map((k) => [k, undefined]));
  return {
    ...cleared,
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...localize({ ...imageEnv, ...service.environment }, map),
  };
}

/** Runs a Rein service (`rein <command>`, as the image's entry point does) in the image's folder here. */
export function startService(
  service: ComposeService,
  imageEnv: Record<string, string>,
  workdir: string,
  map: Localization,
  command = service.command ?? [],
): RunningRein {
  return startRein(localize(command, map), { cwd: workdir, env: serviceEnvironment(service, imageEnv, map) });
}
