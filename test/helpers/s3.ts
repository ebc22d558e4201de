import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from './ports.js';

/**
 * moto in server mode (PyPI `moto[server]`): a real S3-compatible HTTP server standing in for
 * AWS S3 in tests. Its pinned environment is test/s3/requirements.lock, installed by
 * scripts/setup-tests.sh (npm test runs it) into .tools/s3. One server per test file (it starts in about a second).
 */
export interface TestS3 {
  endpoint: string;
  /** A fresh bucket of this server, for one test file or test. */
  bucket(): Promise<string>;
  /** The environment a child process needs to reach it (moto takes any credentials). */
  env: Record<string, string>;
  close(): Promise<void>;
}

const CREDENTIALS = {
  AWS_ACCESS_KEY_ID: 'rein-test',
  AWS_SECRET_ACCESS_KEY: 'rein-test-secret',
  AWS_REGION: 'us-east-1',
};

export function s3Python(): string {
  const python = path.resolve(import.meta.dirname, '../../.tools/s3/bin/python');
  if (!existsSync(python))
    throw new Error(
      `${python} is missing: run \`npm run setup\` (it installs moto, the S3 test server, from test/s3/requirements.lock)`,
    );
  return python;
}

export async function startTestS3(): Promise<TestS3> {
  const port = await freePort();
  const child = spawn(s3Python(), ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Werkzeug says where it listens once it does.
  await new Promise<void>((resolve, reject) => {
    let said = '';
    const listen = (chunk: Buffer) => {
      said += chunk.toString();
      if (said.includes(`Running on http://127.0.0.1:${port}`)) resolve();
    };
    child.stdout.on('data', listen);
    child.stderr.on('data', listen);
    child.once('exit', (code) =>
      reject(new Error(`moto_server exited with ${code} before listening: ${said.slice(-2000)}`)),
    );
  });
  child.stdout.removeAllListeners('data').resume();
  child.stderr.removeAllListeners('data').resume();
  // The SDK's default credential chain (what Rein uses) finds these in this process.
  for (const [key, value] of Object.entries(CREDENTIALS)) process.env[key] ??= value;
  // As in S3ArtifactStore: the SDK's warning about its future releases on Node 20 is noise here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    endpoint,
    region: CREDENTIALS.AWS_REGION,
    forcePathStyle: true,
    credentials: { accessKeyId: CREDENTIALS.AWS_ACCESS_KEY_ID, secretAccessKey: CREDENTIALS.AWS_SECRET_ACCESS_KEY },
  });
  return {
    endpoint,
    env: CREDENTIALS,
    async bucket() {
      const name = `rein-${randomUUID()}`;
      await client.send(new CreateBucketCommand({ Bucket: name }));
      return name;
    },
    async close() {
      client.destroy();
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
