import { existsSync } from 'node:fs';
import path from 'node:path';
import type { V1Container, V1Pod } from '@kubernetes/client-node';

/**
 * What an image would run, for the node agent's image map: no image is pulled, a container of a
 * mapped image runs as a local process made from this and the container's spec.
 */
export interface ImageSpec {
  /** The image's ENTRYPOINT: runs unless the container sets `command`. */
  entrypoint?: string[];
  /** The image's CMD: the arguments when the container sets neither `command` nor `args`. */
  cmd?: string[];
  /** The image's ENV, under the container's `env`. */
  env?: Record<string, string>;
  /** The image's WORKDIR; default the node agent's working directory. */
  workingDir?: string;
}

export interface ContainerCommand {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
}

/** Why a container cannot start, as the kubelet says it in the container's waiting state. */
export class ContainerStartError extends Error {
  constructor(
    readonly reason: 'ErrImagePull' | 'CreateContainerConfigError' | 'CreateContainerError',
    message: string,
  ) {
    super(message);
  }
}

/** A value an env var's valueFrom points at in another object (secretKeyRef, configMapKeyRef). */
export type ReadKey = (
  kind: 'secret' | 'configmap',
  namespace: string,
  name: string,
  key: string,
) => Promise<string | undefined>;
/** Every key of a Secret or ConfigMap (envFrom); undefined when there is no such object. */
export type ReadAll = (
  kind: 'secret' | 'configmap',
  namespace: string,
  name: string,
) => Promise<Record<string, string> | undefined>;

export interface PodVolumes {
  /** Host folders of the pod's emptyDir volumes, by volume name. */
  emptyDirs: Record<string, string>;
}

const DEFAULT_TERMINATION_MESSAGE_PATH = '/dev/termination-log';

/**
 * The local process a container becomes, resolved as Kubernetes resolves a container over its
 * image: `command` replaces ENTRYPOINT (and drops CMD), `args` replaces CMD, $(VAR) in them
 * expands from the container's `env`, and `env` is the image's ENV, then the container's
 * (`value`, fieldRef, secretKeyRef, configMapKeyRef). The host's PATH and HOME are added where
 * the image sets none, so commands resolve as they do on this machine.
 *
 * `envFrom` adds every key of a Secret or ConfigMap (with its prefix) under the container's `env`.
 *
 * A container cannot write to its terminationMessagePath here (/dev/termination-log by default):
 * every occurrence of that path in command, args and env values becomes `messageFile`. Nor is an
 * emptyDir mounted: a mount path at the start of a path in command, args and env values becomes
 * the volume's host folder, which every container of the pod shares (other volumes are this
 * machine's disk, seen at the same paths).
 */
export async function containerCommand(
  pod: V1Pod,
  container: V1Container,
  images: Record<string, ImageSpec>,
  messageFile: string,
  objects: { readKey: ReadKey; readAll: ReadAll },
  volumes: PodVolumes = { emptyDirs: {} },
): Promise<ContainerCommand> {
  const { readKey, readAll } = objects;
  const image = container.image ? images[container.image] : undefined;
  if (!image) {
    throw new ContainerStartError(
      'ErrImagePull',
      `Failed to pull image "${container.image ?? ''}": the node agent's image map has no such image (it knows ${
        Object.keys(images)
          .map((i) => `"${i}"`)
          .join(', ') || 'none'
      })`,
    );
  }
  const mapPath = hostPaths(container, messageFile, volumes);
  // $(VAR) refers to the container's own env only: the kubelet does not know the image's.
  const declared: Record<string, string> = await envFromObjects(pod, container, readAll);
  for (const entry of container.env ?? []) {
    const value = entry.value ?? (entry.valueFrom ? await valueFrom(pod, entry.name, entry.valueFrom, readKey) : '');
    declared[entry.name] = mapPath(expand(value, declared));
  }
  const env: Record<string, string> = { ...image.env, ...declared };
  const entrypoint = container.command ?? image.entrypoint ?? [];
  const args = container.args ?? (container.command ? [] : (image.cmd ?? []));
  const argv = [...entrypoint, ...args].map((a) => mapPath(expand(a, declared)));
  if (argv.length === 0)
    throw new ContainerStartError(
      'CreateContainerError',
      `no command specified: image "${container.image}" has no entrypoint and the container sets no command`,
    );
  const cwd = container.workingDir ?? image.workingDir ?? process.cwd();
  if (!existsSync(cwd))
    throw new ContainerStartError(
      'CreateContainerError',
      `the working directory ${cwd} does not exist on the node agent's machine`,
    );
  for (const name of ['PATH', 'HOME']) {
    if (env[name] === undefined && process.env[name] !== undefined) env[name] = process.env[name] as string;
  }
  return { argv, env, cwd };
}

/**
 * Where the container's paths are on this machine: its terminationMessagePath is `messageFile`,
 * and an emptyDir's mount path (at the start of a path) is the volume's host folder.
 */
function hostPaths(container: V1Container, messageFile: string, volumes: PodVolumes): (s: string) => string {
  const messagePath = container.terminationMessagePath ?? DEFAULT_TERMINATION_MESSAGE_PATH;
  const mounts = (container.volumeMounts ?? []).flatMap((m) => {
    const hostDir = volumes.emptyDirs[m.name];
    return hostDir === undefined
      ? []
      : [{ mountPath: m.mountPath.replace(/\/+$/, ''), hostDir: path.join(hostDir, m.subPath ?? '') }];
  });
  return (s: string) => {
    let mapped = s.split(messagePath).join(messageFile);
    for (const { mountPath, hostDir } of mounts)
      mapped = mapped.replace(
        new RegExp(`(^|[=:\\s])${escapeRegExp(mountPath)}(?=/|$|[\\s:])`, 'g'),
        (_m, lead: string) => `${lead}${hostDir}`,
      );
    return mapped;
  };
}

/**
 * The container's `envFrom`: every key of each Secret or ConfigMap, with its prefix; a missing one that is not optional
 * fails the start.
 */
async function envFromObjects(pod: V1Pod, container: V1Container, readAll: ReadAll): Promise<Record<string, string>> {
  const fromObjects: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    const ref = source.secretRef
      ? { kind: 'secret' as const, ...source.secretRef }
      : source.configMapRef
        ? { kind: 'configmap' as const, ...source.configMapRef }
        : undefined;
    if (!ref) continue;
    const namespace = pod.metadata?.namespace ?? 'default';
    const values = await readAll(ref.kind, namespace, ref.name ?? '');
    if (values === undefined && !ref.optional)
      throw new ContainerStartError(
        'CreateContainerConfigError',
        `${ref.kind === 'secret' ? 'secret' : 'configmap'} "${ref.name}" not found`,
      );
    for (const [key, value] of Object.entries(values ?? {})) fromObjects[`${source.prefix ?? ''}${key}`] = value;
  }
  return fromObjects;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Kubernetes' $(VAR) expansion: a defined var is replaced, an undefined one left as written, $$ is a literal $. */
function expand(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match: string, name?: string) =>
    name === undefined ? '$' : (env[name] ?? match),
  );
}

async function valueFrom(
  pod: V1Pod,
  name: string,
  from: NonNullable<V1Container['env']>[number]['valueFrom'] & object,
  readKey: ReadKey,
): Promise<string> {
  const namespace = pod.metadata?.namespace ?? 'default';
  if (from.fieldRef) {
    const fields: Record<string, string | undefined> = {
      'metadata.name': pod.metadata?.name,
      'metadata.namespace': namespace,
      'metadata.uid': pod.metadata?.uid,
      'spec.nodeName': pod.spec?.nodeName,
      'spec.serviceAccountName': pod.spec?.serviceAccountName,
      'status.hostIP': '127.0.0.1',
      'status.podIP': '127.0.0.1',
    };
    const value = fields[from.fieldRef.fieldPath];
    if (value === undefined)
      throw new ContainerStartError(
        'CreateContainerConfigError',
        `env ${name}: fieldRef ${from.fieldRef.fieldPath} is not supported by the node agent`,
      );
    return value;
  }
  const ref = from.secretKeyRef
    ? { kind: 'secret' as const, ...from.secretKeyRef }
    : from.configMapKeyRef
      ? { kind: 'configmap' as const, ...from.configMapKeyRef }
      : undefined;
  if (!ref)
    throw new ContainerStartError(
      'CreateContainerConfigError',
      `env ${name}: this valueFrom is not supported by the node agent (fieldRef, secretKeyRef and configMapKeyRef are)`,
    );
  const value = await readKey(ref.kind, namespace, ref.name ?? '', ref.key);
  if (value === undefined && !ref.optional)
    throw new ContainerStartError(
      'CreateContainerConfigError',
      `couldn't find key ${ref.key} in ${ref.kind === 'secret' ? 'Secret' : 'ConfigMap'} ${namespace}/${ref.name}`,
    );
  return value ?? '';
}
