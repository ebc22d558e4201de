import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/main.js';
import { CONFIG_ENVIRONMENT, loadConfig, validateConfig } from '../src/config/load.js';

// No Docker engine runs on the development and CI machines, so the compose file is checked
// against the project rather than started.
const root = path.resolve(import.meta.dirname, '..');

interface ComposeService {
  image?: string;
  build?: string | { context?: string; dockerfile?: string };
  command?: string[];
  ports?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: string[] | Record<string, { condition: string }>;
}
const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, ComposeService>;
};
const services = compose.services;
const defaults = validateConfig({}, 'defaults');

function hostPort(service: ComposeService, containerPort: number): number | undefined {
  const mapping = service.ports?.find((p) => p.endsWith(`:${containerPort}`));
  return mapping ? Number(mapping.split(':')[0]) : undefined;
}

const reinServices = Object.entries(services).filter(([, s]) => s.build !== undefined);

/** The config a Rein service runs with: its mounted config file (read from the repo) plus its environment. */
function effectiveConfig(service: ComposeService) {
  const env = service.environment ?? {};
  let file: string | undefined;
  if (env.REIN_CONFIG) {
    const mount = service.volumes?.find((v) => v.split(':')[1] === env.REIN_CONFIG);
    expect(mount, `a volume mounts ${env.REIN_CONFIG}`).toBeDefined();
    file = path.join(root, (mount as string).split(':')[0] as string);
  }
  return loadConfig({ file, env: { ...env, REIN_CONFIG: undefined }, cwd: root }).config;
}

/** Commands that talk to Temporal; the gateway does not. */
const TEMPORAL_COMMANDS = ['server', 'worker', 'doctor', 'dev'];

describe('docker-compose.yml', () => {
  it('runs Temporal on PostgreSQL with its Web UI and Rein services', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining(['postgresql', 'temporal', 'temporal-ui', 'rein-setup', 'rein-worker']),
    );
    expect(services.temporal?.environment).toMatchObject({ DB: 'postgres12', POSTGRES_SEEDS: 'postgresql' });
  });

  it('pins every third-party image to a version', () => {
    for (const [name, service] of Object.entries(services)) {
      if (service.build) continue;
      expect(service.image, name).toMatch(/^[\w./-]+:\d[\w.-]*$/);
    }
  });

  it('publishes Temporal and its UI on the same ports as the embedded dev server', () => {
    expect(hostPort(services.temporal as ComposeService, 7233)).toBe(defaults.temporal.devServer.port);
    expect(hostPort(services['temporal-ui'] as ComposeService, 8080)).toBe(defaults.temporal.devServer.uiPort);
  });

  it('builds Rein services from the project Dockerfile, whose entry point exists', () => {
    expect(reinServices.length).toBeGreaterThan(0);
    for (const [, service] of reinServices) {
      const context = typeof service.build === 'string' ? service.build : (service.build?.context ?? '.');
      expect(existsSync(path.join(root, context, 'Dockerfile'))).toBe(true);
    }
    const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain('ENTRYPOINT ["node", "bin/rein.js"]');
    expect(existsSync(path.join(root, 'bin/rein.js'))).toBe(true);
  });

  it('gives Rein services only CLI commands and environment variables that Rein knows', () => {
    const commands = buildProgram().commands.map((c) => c.name());
    const known = new Set([...CONFIG_ENVIRONMENT.map(([variable]) => variable), 'REIN_CONFIG']);
    for (const [name, service] of reinServices) {
      expect(commands, name).toContain(service.command?.[0]);
      for (const variable of Object.keys(service.environment ?? {})) expect(known, `${name}: ${variable}`).toContain(variable);
    }
  });

  it('points Rein services that use Temporal at the Temporal service and port of the file', () => {
    const users = reinServices.filter(([, s]) => TEMPORAL_COMMANDS.includes(s.command?.[0] ?? ''));
    expect(users.length).toBeGreaterThan(0);
    for (const [name, service] of users) {
      const [host, port] = (effectiveConfig(service).temporal.address ?? '').split(':');
      expect(host, name).toBe('temporal');
      expect(services.temporal?.ports?.some((p) => p.endsWith(`:${port}`)), name).toBe(true);
    }
  });

  it('publishes the gateway on the port its config gives, listening on all interfaces', () => {
    const gateway = services['rein-gateway'] as ComposeService;
    const config = effectiveConfig(gateway);
    expect(config.gateway.host).toBe('0.0.0.0');
    expect(hostPort(gateway, config.gateway.port)).toBe(config.gateway.port);
    expect(Object.keys(config.gateway.policies).length).toBeGreaterThan(0);
  });

  it('depends only on services it defines', () => {
    for (const [name, service] of Object.entries(services)) {
      const deps = Array.isArray(service.depends_on) ? service.depends_on : Object.keys(service.depends_on ?? {});
      for (const dep of deps) expect(Object.keys(services), `${name} → ${dep}`).toContain(dep);
    }
  });
});
