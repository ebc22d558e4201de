import https from 'node:https';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Daemon } from './daemon.js';

/**
 * Waits until the apiserver's /readyz answers 200; throws with the programs' logs if one of them exits or 90 s pass.
 */
export async function waitForReadyz(server: string, caPem: string, token: string, ...daemons: Daemon[]): Promise<void> {
  let last = 'no answer yet';
  const deadline = Date.now() + 90_000;
  for (;;) {
    for (const daemon of daemons) daemon.assertRunning('before the apiserver was ready');
    const answer = await new Promise<{ status: number; body: string } | Error>((resolve) => {
      const req = https.get(`${server}/readyz`, { ca: caPem, headers: { authorization: `Bearer ${token}` } }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', resolve);
    });
    if (!(answer instanceof Error) && answer.status === 200) return;
    last = answer instanceof Error ? answer.message : `${answer.status} ${answer.body.slice(0, 300)}`;
    if (Date.now() > deadline)
      throw new Error(
        `kube-apiserver was not ready after 90 s (/readyz: ${last}):\n${daemons.map((d) => d.tail()).join('\n')}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Waits for the `default` ServiceAccount of namespace `default`, which the controller-manager's
 * service account controller makes; pods cannot be created before it has (the ServiceAccount
 * admission plugin).
 */
export async function waitForDefaultServiceAccount(config: KubeConfig, controllerManager: Daemon): Promise<void> {
  const core = config.makeApiClient(CoreV1Api);
  const deadline = Date.now() + 90_000;
  for (;;) {
    controllerManager.assertRunning('before it made the default ServiceAccount');
    const found = await core.readNamespacedServiceAccount({ namespace: 'default', name: 'default' }).then(
      () => true,
      () => false,
    );
    if (found) return;
    if (Date.now() > deadline)
      throw new Error(
        `kube-controller-manager made no default ServiceAccount within 90 s:\n${controllerManager.tail()}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
