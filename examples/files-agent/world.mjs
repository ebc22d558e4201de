// The world of the files example: a virtual tree of service configurations, built from a seeded
// random so a task set (tasks.mjs) and every variant (environment.mjs's vary) are reproducible.
// A task asks for one setting of one service in one environment; its answer is the value in
//   /services/<service>/[<nest>/…]config/<env>/app.ini
// and nowhere else: every other file holding the same key (other services, other environments,
// decoys) holds another value, so a wrong file gives a wrong answer the verifier can tell.

/** mulberry32: small, fast and the same on every platform; the calculator example uses it too. */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const SERVICE_NAMES = [
  'analytics',
  'auth',
  'billing',
  'catalog',
  'gateway',
  'inventory',
  'ledger',
  'media',
  'notifications',
  'orders',
  'payments',
  'pricing',
  'reports',
  'search',
  'shipping',
  'users',
];
export const ENVIRONMENTS = ['prod', 'staging', 'dev'];
/** Folder names that deeper worlds put between a service and its config folder. */
const NEST_NAMES = ['deploy', 'overlays', 'base', 'k8s', 'release', 'region-eu', 'current', 'settings'];

/** The settings a question may ask for: how the question names it, and its range of values. */
export const SETTINGS = {
  timeout_seconds: { label: 'the request timeout in seconds', min: 5, max: 120 },
  port: { label: 'the port', min: 3000, max: 9999 },
  max_retries: { label: 'the maximum number of retries', min: 0, max: 9 },
  pool_size: { label: 'the database pool size', min: 2, max: 64 },
  cache_ttl_seconds: { label: 'the cache TTL in seconds', min: 30, max: 3600 },
};

/** Limits of the shape parameters (vary checks them, so a variant cannot ask for the impossible). */
export const SHAPE_LIMITS = {
  services: { min: 1, max: SERVICE_NAMES.length },
  depth: { min: 0, max: NEST_NAMES.length },
  distractors: { min: 0, max: 12 },
};

const int = (random, min, max) => min + Math.floor(random() * (max - min + 1));
const pick = (random, list) => list[int(random, 0, list.length - 1)];

function shuffled(random, list) {
  const copy = [...list];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = int(random, 0, i);
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy;
}

/** A value of `key` other than `answer` (decoys and other files must not agree with the answer). */
function otherValue(random, key, answer) {
  const { min, max } = SETTINGS[key];
  const value = int(random, min, max - 1);
  return String(value >= Number(answer) ? value + 1 : value);
}

export function questionFor({ service, env, key }) {
  return `What is ${SETTINGS[key].label} of the ${service} service in ${env}? Reply with the value only.`;
}

/** The target a question asks for (the inverse of questionFor), or null for another question. */
export function parseQuestion(question) {
  const match = /^What is (.+) of the ([a-z-]+) service in ([a-z]+)\?/.exec(String(question));
  const key = match && Object.keys(SETTINGS).find((k) => SETTINGS[k].label === match[1]);
  return key ? { service: match[2], env: match[3], key } : null;
}

/** The path of the file that answers: `nest` is the folders between the service and config/. */
export const canonicalPath = (service, nest, env) =>
  ['/services', service, ...nest, 'config', env, 'app.ini'].join('/');

/** Long files: many unrelated lines (some with look-alike keys) before the real settings. */
function filler(random) {
  const lines = ['[feature_flags]'];
  for (let i = 0; i < 50; i++)
    lines.push(`flag_${pick(random, ['new', 'beta', 'fast', 'safe'])}_${i} = ${pick(random, ['on', 'off'])}`);
  lines.push('', '[network]');
  for (const key of [
    'connect_timeout_seconds',
    'idle_timeout_seconds',
    'admin_port',
    'retry_backoff_ms',
    'max_pool_wait_ms',
  ])
    lines.push(`${key} = ${int(random, 1, 9000)}`);
  lines.push('', '; ---- the settings below are read at start-up ----', '');
  return lines;
}

/** An app.ini: every setting, with `values` for the keys given and random ones for the rest. */
function appIni(random, header, values, longFile) {
  const value = (key) => values[key] ?? String(int(random, SETTINGS[key].min, SETTINGS[key].max));
  const lines = [`; ${header}`, ...(longFile ? filler(random) : [])];
  lines.push('[server]', `port = ${value('port')}`, `timeout_seconds = ${value('timeout_seconds')}`, '');
  lines.push('[database]', `pool_size = ${value('pool_size')}`, '');
  lines.push('[client]', `max_retries = ${value('max_retries')}`, `cache_ttl_seconds = ${value('cache_ttl_seconds')}`);
  return `${lines.join('\n')}\n`;
}

/** Decoys near the answer: backups, archives, examples and a legacy twin, each with a wrong value. */
const DECOYS = [
  (p) => ({ path: `${p.file}.bak`, header: `backup of ${p.service} ${p.env}, before the last change` }),
  (p) => ({ path: `/archive${p.file.replace(p.nestPart, '')}`, header: `archived ${p.service} ${p.env} settings` }),
  (p) => ({ path: `${p.dir}/app.example.ini`, header: `example settings, copy to app.ini` }),
  (p) => ({ path: `/services/${p.service}-legacy/config/${p.env}/app.ini`, header: `${p.service}-legacy ${p.env}` }),
  (p) => ({ path: `${p.file}.orig`, header: `${p.service} ${p.env} as first deployed` }),
  (p) => ({ path: p.file.replace('/config/', '/config.old/'), header: `old ${p.service} ${p.env} layout` }),
];

function addDecoys(random, files, target, answer, nest, shape) {
  const file = canonicalPath(target.service, nest, target.env);
  const place = {
    ...target,
    file,
    dir: file.slice(0, file.lastIndexOf('/')),
    nestPart: nest.map((n) => `/${n}`).join(''),
  };
  for (let i = 0; i < shape.distractors; i++) {
    const round = Math.floor(i / DECOYS.length);
    const decoy = DECOYS[i % DECOYS.length](place);
    const values = { [target.key]: otherValue(random, target.key, answer) };
    files[round === 0 ? decoy.path : `${decoy.path}.${round + 1}`] = appIni(
      random,
      decoy.header,
      values,
      shape.longFiles,
    );
  }
}

/**
 * The files of a world for `target` ({service, env, key}) in `shape` ({services, depth,
 * distractors, longFiles}), and the answer: the value of the key in the target's app.ini.
 */
export function buildWorld(random, target, shape) {
  const answer = String(int(random, SETTINGS[target.key].min, SETTINGS[target.key].max));
  const others = shuffled(
    random,
    SERVICE_NAMES.filter((s) => s !== target.service),
  ).slice(0, shape.services - 1);
  const files = { '/README.md': '# platform\n\nEach service has its own folder under /services.\n' };
  let targetNest = [];
  for (const service of [target.service, ...others].sort()) {
    const nest = shuffled(random, NEST_NAMES).slice(0, shape.depth);
    if (service === target.service) targetNest = nest;
    files[`/services/${service}/README.md`] =
      `# ${service}\n\nThe ${service} service. Its settings are per environment.\n`;
    for (const env of ENVIRONMENTS) {
      const isTarget = service === target.service && env === target.env;
      const values = { [target.key]: isTarget ? answer : otherValue(random, target.key, answer) };
      files[canonicalPath(service, nest, env)] = appIni(random, `${service} service, ${env}`, values, shape.longFiles);
    }
  }
  addDecoys(random, files, target, answer, targetNest, shape);
  // Code-unit order, not the locale's: the same bytes on every machine.
  const sorted = Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1));
  return { files: Object.fromEntries(sorted), answer };
}

/** The shape a world was built with, read back from its files (so vary keeps what it does not change). */
export function shapeOf(files) {
  const paths = Object.keys(files);
  const canonical = paths.filter((p) => /^\/services\/[a-z]+\/(?:[^/]+\/)*config\/[a-z]+\/app\.ini$/.test(p));
  const services = new Set(canonical.map((p) => p.split('/')[2]));
  const depth = canonical.length ? canonical[0].split('/').length - 6 : 0;
  const readmes = paths.filter((p) => p === '/README.md' || /^\/services\/[a-z]+\/README\.md$/.test(p));
  const longFiles = canonical.length > 0 && files[canonical[0]].split('\n').length > 40;
  return { services: services.size, depth, distractors: paths.length - canonical.length - readmes.length, longFiles };
}
