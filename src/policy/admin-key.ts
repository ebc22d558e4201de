import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The variable that sets the embedded policy server's admin key (loading and unloading versions). */
export const POLICY_SERVER_KEY_ENV = 'REIN_POLICY_SERVER_KEY';

/** Where a generated policy server admin key lives (mode 0600), so the server and workers share it. */
export function policyServerKeyFile(dataDir: string): string {
  return path.join(dataDir, 'policy-server', 'admin-key');
}

/**
 * The policy server's admin key: $REIN_POLICY_SERVER_KEY, else the key generated into the data
 * directory on first use. The server and every worker that loads versions into it read the same one.
 */
export function policyServerKey(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env[POLICY_SERVER_KEY_ENV];
  if (fromEnv) return fromEnv;
  const file = policyServerKeyFile(dataDir);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, `rein-policy-${randomBytes(24).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process made it first: use that one.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const key = readFileSync(file, 'utf8').trim();
  if (!key) throw new Error(`${file} is empty: delete it (a new key is generated) or set ${POLICY_SERVER_KEY_ENV}`);
  return key;
}
