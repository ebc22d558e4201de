import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  loadAllYaml,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { CertificateAuthority } from './certificates.js';
import { advertiseAddress, issueCredentials } from './kube-control-plane/credentials.js';
import type { Daemon } from './kube-control-plane/daemon.js';
import { base64, certKubeconfig, tokenKubeconfig } from './kube-control-plane/kubeconfigs.js';
import { apiserverDaemon, controllerManagerDaemon, etcdDaemon } from './kube-control-plane/programs.js';
import { waitForDefaultServiceAccount, waitForReadyz } from './kube-control-plane/readiness.js';
import { freePort } from './ports.js';

/**
 * A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager
 * (every controller: Jobs, garbage collection, service accounts, node lifecycle, TTL) on free
 * loopback ports, with their own CA and certificates in a temp dir. Authorization is Node,RBAC
 * with NodeRestriction, as kubeadm sets it up; the controllers run as their own service accounts.
 * There is no scheduler and no kubelet: test/helpers/node-agent binds and runs pods.
 *
 * The binaries come from scripts/build-kube.sh (run by scripts/setup-tests.sh, which npm test runs), or
 * REIN_KUBE_BIN_DIR.
 * Starts in a few seconds, so each test file starts its own.
 *
 * The pieces, in kube-control-plane/: credentials.ts (the CA, certificates, keys and admin token),
 * programs.ts (each program's flags), daemon.ts (a program as a child process), readiness.ts
 * (waiting for the apiserver and the controllers), kubeconfigs.ts.
 */
export interface KubeControlPlane {
  /** https://127.0.0.1:port of the apiserver. */
  server: string;
  /** The CA that signed every certificate here (and that the apiserver trusts for client certificates). */
  ca: CertificateAuthority;
  /** Cluster admin (a bearer token in group system:masters), namespace 'default'. */
  kubeConfig(): KubeConfig;
  /** The admin kubeconfig as a file, for code that takes a kubeconfig path. */
  kubeconfigFile: string;
  /** A user authenticated by a client certificate signed by the cluster's CA (user = CN, groups = O). */
  kubeConfigFor(user: string, groups?: string[]): KubeConfig;
  /** A token for a ServiceAccount, made with the TokenRequest API (as kubectl create token). */
  serviceAccountToken(namespace: string, name: string, expirationSeconds?: number): Promise<string>;
  /**
   * A config that authenticates as a ServiceAccount (its token from serviceAccountToken), namespace set to its
   * namespace.
   */
  kubeConfigForServiceAccount(namespace: string, name: string): Promise<KubeConfig>;
  /** Creates every object of a YAML file's documents, as admin (kubectl create -f). */
  createFromYaml(yamlText: string): Promise<KubernetesObject[]>;
  /** The end of the three programs' logs, for failure messages. */
  logs(): string;
  /** The process ids of etcd, kube-apiserver and kube-controller-manager. */
  pids(): number[];
  /**
   * Kills kube-apiserver (SIGKILL, as a crash: its watches are cut at once; a SIGTERM waits a
   * minute for them to drain) and starts it again on the same port and etcd;
   * resolves once it is ready. Its watch cache starts over, so a watch from a resourceVersion older
   * than the restart is answered 410 Gone, as after etcd compaction. Its Node authorizer then
   * refuses the node agent's pod status writes (403) until its caches sync, about a minute here.
   */
  restartApiServer(): Promise<void>;
  close(): Promise<void>;
}

const root = path.resolve(import.meta.dirname, '../..');
const BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager'] as const;

/** The folder with the control plane's binaries; throws saying how to build them when they are missing. */
export function kubeBinaryDir(): string {
  const dir = process.env.REIN_KUBE_BIN_DIR ?? path.join(root, '.tools', 'kube');
  const missing = BINARIES.filter((b) => !existsSync(path.join(dir, b)));
  if (missing.length > 0) {
    throw new Error(
      `the Kubernetes control plane for the Kubernetes tests is not built on this machine: ${missing.map((b) => path.join(dir, b)).join(', ')} missing. ` +
        'Build it with scripts/build-kube.sh (needs Go 1.26+ and the Go module proxy; about 8 minutes once per machine; scripts/setup-tests.sh, which npm test runs, runs it), ' +
        'or point REIN_KUBE_BIN_DIR at a folder with kube-apiserver, kube-controller-manager and etcd (Kubernetes 1.34, etcd 3.6).',
    );
  }
  return dir;
}

export async function startKubeControlPlane(): Promise<KubeControlPlane> {
  const bin = kubeBinaryDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-kube-'));
  const daemons: Daemon[] = [];
  const stopAll = async () => {
    // The apiserver first: stopping etcd under it makes it log errors until it exits.
    for (const daemon of [...daemons].reverse()) await daemon.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const advertise = advertiseAddress();
    const credentials = issueCredentials(dir, advertise);
    const { ca, adminToken } = credentials;

    const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const etcd = etcdDaemon(bin, dir, etcdUrl, etcdPeer);
    daemons.push(etcd);
    const server = `https://127.0.0.1:${apiPort}`;
    const apiserver = apiserverDaemon(bin, dir, etcdUrl, apiPort, advertise, credentials);
    daemons.push(apiserver);
    etcd.start();
    apiserver.start();
    await waitForReadyz(server, ca.cert, adminToken, apiserver, etcd);

    const controllerManagerConfig = path.join(dir, 'controller-manager.kubeconfig');
    writeFileSync(
      controllerManagerConfig,
      certKubeconfig(
        server,
        ca.certFile,
        'system:kube-controller-manager',
        credentials.controllerManager.certFile,
        credentials.controllerManager.keyFile,
      ),
    );
    const controllerManager = controllerManagerDaemon(bin, dir, controllerManagerConfig, credentials);
    daemons.push(controllerManager);
    controllerManager.start();

    const kubeconfigYaml = tokenKubeconfig(server, ca.cert, 'admin', adminToken, 'default');
    const kubeconfigFile = path.join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfigFile, kubeconfigYaml);
    const kubeConfig = () => {
      const config = new KubeConfig();
      config.loadFromString(kubeconfigYaml);
      return config;
    };
    await waitForDefaultServiceAccount(kubeConfig(), controllerManager);

    const restartApiServer = async () => {
      await apiserver.stop('SIGKILL');
      apiserver.start();
      await waitForReadyz(server, ca.cert, adminToken, apiserver, etcd);
    };
    return controlPlane({ server, ca, kubeconfigFile, kubeConfig, daemons, restartApiServer, close: stopAll });
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** The running control plane as tests use it: its clients, its credentials for any user, its programs' logs. */
function controlPlane(
  started: Pick<KubeControlPlane, 'server' | 'ca' | 'kubeconfigFile' | 'kubeConfig' | 'restartApiServer' | 'close'> & {
    daemons: Daemon[];
  },
): KubeControlPlane {
  const { server, ca, kubeConfig, daemons } = started;
  let clientCerts = 0;
  const plane: KubeControlPlane = {
    server,
    ca,
    kubeconfigFile: started.kubeconfigFile,
    kubeConfig,
    kubeConfigFor(user, groups = []) {
      const cert = ca.issue(`client-${++clientCerts}`, { commonName: user, organizations: groups });
      const config = new KubeConfig();
      config.loadFromOptions({
        clusters: [{ name: 'test', server, caData: base64(ca.cert) }],
        users: [{ name: user, certData: base64(cert.cert), keyData: base64(cert.key) }],
        contexts: [{ name: 'test', cluster: 'test', user, namespace: 'default' }],
        currentContext: 'test',
      });
      return config;
    },
    async serviceAccountToken(namespace, name, expirationSeconds = 3600) {
      const request = await kubeConfig()
        .makeApiClient(CoreV1Api)
        .createNamespacedServiceAccountToken({ namespace, name, body: { spec: { audiences: [], expirationSeconds } } });
      const token = request.status?.token;
      if (!token) throw new Error(`the apiserver made no token for ServiceAccount ${namespace}/${name}`);
      return token;
    },
    async kubeConfigForServiceAccount(namespace, name) {
      const config = new KubeConfig();
      config.loadFromString(
        tokenKubeconfig(
          server,
          ca.cert,
          `system:serviceaccount:${namespace}:${name}`,
          await plane.serviceAccountToken(namespace, name),
          namespace,
        ),
      );
      return config;
    },
    async createFromYaml(yamlText) {
      const objects = KubernetesObjectApi.makeApiClient(kubeConfig());
      const created: KubernetesObject[] = [];
      for (const spec of loadAllYaml(yamlText) as KubernetesObject[]) {
        if (spec) created.push(await objects.create(spec));
      }
      return created;
    },
    logs: () => daemons.map((d) => d.tail()).join('\n'),
    pids: () => daemons.flatMap((d) => (d.pid === undefined ? [] : [d.pid])),
    restartApiServer: started.restartApiServer,
    close: started.close,
  };
  return plane;
}
