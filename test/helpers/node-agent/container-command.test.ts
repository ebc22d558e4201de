import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { containerCommand, type ContainerStartError, type ImageSpec } from './container-command.js';

const images: Record<string, ImageSpec> = {
  'agent:1': { entrypoint: ['/bin/agent', '--serve'], cmd: ['--port', '80'], env: { MODE: 'image' }, workingDir: '/' },
  'bare:1': {},
};
const pod: V1Pod = { metadata: { name: 'p', namespace: 'ns', uid: 'u' }, spec: { nodeName: 'n', containers: [] } };
const secrets: Record<string, string> = { 'ns/keys/token': 's3cret' };
const readKey = async (kind: string, namespace: string, name: string, key: string) =>
  kind === 'secret' ? secrets[`${namespace}/${name}/${key}`] : undefined;
const configMaps: Record<string, Record<string, string>> = { 'ns/settings': { LEVEL: 'debug', TOKEN: 'from-map' } };
const readAll = async (kind: string, namespace: string, name: string) =>
  kind === 'configmap'
    ? configMaps[`${namespace}/${name}`]
    : name === 'keys'
      ? { token: secrets[`${namespace}/keys/token`] as string }
      : undefined;
const resolve = (container: Partial<V1Container>, emptyDirs: Record<string, string> = {}) =>
  containerCommand(
    pod,
    { name: 'c', image: 'agent:1', ...container },
    images,
    '/tmp/msg',
    { readKey, readAll },
    { emptyDirs },
  );
const startError = (container: Partial<V1Container>) =>
  resolve(container).then(
    () => undefined,
    (err: unknown) => err as ContainerStartError,
  );

describe('a container as a local process, resolved as Kubernetes resolves it over its image', () => {
  it("runs the image's entrypoint and cmd when the container sets neither command nor args", async () => {
    expect((await resolve({})).argv).toEqual(['/bin/agent', '--serve', '--port', '80']);
  });

  it('replaces cmd with args, and entrypoint and cmd with command', async () => {
    expect((await resolve({ args: ['--once'] })).argv).toEqual(['/bin/agent', '--serve', '--once']);
    expect((await resolve({ command: ['/bin/sh'] })).argv).toEqual(['/bin/sh']);
    expect((await resolve({ command: ['/bin/sh'], args: ['-c', 'true'] })).argv).toEqual(['/bin/sh', '-c', 'true']);
  });

  it("expands $(VAR) from the container's env (not the image's), leaves unknown ones, and takes $$ as $", async () => {
    const { argv, env } = await resolve({
      command: ['echo', '$(GREETING)-$(MODE)', '$(NOPE)', '$$(GREETING)'],
      env: [
        { name: 'GREETING', value: 'hi' },
        { name: 'BOTH', value: '$(GREETING) $(MODE)' },
      ],
    });
    expect(argv).toEqual(['echo', 'hi-$(MODE)', '$(NOPE)', '$(GREETING)']);
    expect(env).toMatchObject({ MODE: 'image', GREETING: 'hi', BOTH: 'hi $(MODE)' });
  });

  it('maps the termination message path in command, args and env to a file it can write', async () => {
    const { argv, env } = await resolve({
      args: ['--out', '/dev/termination-log'],
      env: [{ name: 'OUT', value: '/dev/termination-log' }],
    });
    expect(argv.at(-1)).toBe('/tmp/msg');
    expect(env.OUT).toBe('/tmp/msg');
    expect((await resolve({ terminationMessagePath: '/run/result', args: ['/run/result'] })).argv.at(-1)).toBe(
      '/tmp/msg',
    );
  });

  it("fills env from fieldRef and secretKeyRef, and adds the host's PATH", async () => {
    const { env } = await resolve({
      env: [
        { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'NS', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
        { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'keys', key: 'token' } } },
      ],
    });
    expect(env).toMatchObject({ POD: 'p', NS: 'ns', TOKEN: 's3cret', PATH: process.env.PATH });
  });

  it("adds every key of envFrom's Secrets and ConfigMaps (with a prefix) under the container's own env", async () => {
    const { env } = await resolve({
      envFrom: [{ configMapRef: { name: 'settings' } }, { secretRef: { name: 'keys' }, prefix: 'S_' }],
      env: [{ name: 'LEVEL', value: 'info' }],
    });
    expect(env).toMatchObject({ LEVEL: 'info', TOKEN: 'from-map', S_token: 's3cret' });
    expect(await startError({ envFrom: [{ secretRef: { name: 'absent' } }] })).toMatchObject({
      reason: 'CreateContainerConfigError',
      message: 'secret "absent" not found',
    });
    expect((await resolve({ envFrom: [{ secretRef: { name: 'absent', optional: true } }] })).env).not.toHaveProperty(
      'token',
    );
  });

  it("maps an emptyDir's mount path at the start of paths in args and env to its host folder, and nothing else", async () => {
    const mounts = {
      volumeMounts: [
        { name: 'scratch', mountPath: '/scratch' },
        { name: 'data', mountPath: '/data' },
      ],
    };
    const { argv, env } = await resolve(
      {
        ...mounts,
        args: ['/scratch/out', '--dir=/scratch', '/scratchy', '/data/x', 'a/scratch/b'],
        env: [{ name: 'OUT', value: '/scratch/out' }],
      },
      { scratch: '/host/pod/scratch' },
    );
    expect(argv.slice(2)).toEqual([
      '/host/pod/scratch/out',
      '--dir=/host/pod/scratch',
      '/scratchy',
      '/data/x',
      'a/scratch/b',
    ]);
    expect(env.OUT).toBe('/host/pod/scratch/out');
  });

  it("gives the kubelet's waiting reasons for what cannot start", async () => {
    expect(await startError({ image: 'elsewhere/agent:2' })).toMatchObject({
      reason: 'ErrImagePull',
      message: expect.stringContaining('"elsewhere/agent:2"'),
    });
    expect(
      await startError({ env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 'keys', key: 'missing' } } }] }),
    ).toMatchObject({ reason: 'CreateContainerConfigError', message: "couldn't find key missing in Secret ns/keys" });
    expect(await startError({ image: 'bare:1' })).toMatchObject({ reason: 'CreateContainerError' });
    expect(await startError({ workingDir: '/no/such/dir' })).toMatchObject({ reason: 'CreateContainerError' });
  });
});
