import type { CoreV1Api } from '@kubernetes/client-node';
import type { ReadAll, ReadKey } from './container-command.js';

/**
 * What a container's env reads from Secrets and ConfigMaps (valueFrom, envFrom), through the
 * node's own credentials, as the kubelet reads them. A Secret's values are decoded from base64.
 */
export function envSourceReaders(core: CoreV1Api): { readKey: ReadKey; readAll: ReadAll } {
  const readKey: ReadKey = async (kind, namespace, name, key) => {
    const object =
      kind === 'secret'
        ? await core.readNamespacedSecret({ namespace, name }).catch(() => undefined)
        : await core.readNamespacedConfigMap({ namespace, name }).catch(() => undefined);
    const data = object && 'binaryData' in object ? { ...object.data } : object?.data;
    const value = data?.[key];
    return value === undefined ? undefined : kind === 'secret' ? Buffer.from(value, 'base64').toString('utf8') : value;
  };
  const readAll: ReadAll = async (kind, namespace, name) => {
    const object =
      kind === 'secret'
        ? await core.readNamespacedSecret({ namespace, name }).catch(() => undefined)
        : await core.readNamespacedConfigMap({ namespace, name }).catch(() => undefined);
    if (!object) return undefined;
    return Object.fromEntries(
      Object.entries(object.data ?? {}).map(([key, value]) => [
        key,
        kind === 'secret' ? Buffer.from(value, 'base64').toString('utf8') : value,
      ]),
    );
  };
  return { readKey, readAll };
}
