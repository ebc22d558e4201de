import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { createCertificateAuthority, createKeyPair, type CertificateAuthority } from './certificates.js';
import { freePort } from './ports.js';

/**
 * A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager
 * (every controller: Jobs, garbage collection, service accounts, node lifecycle, TTL) on free
 * loopback ports, with their own CA and certificates in a temp dir. Authorization is Node,RBAC
 * with NodeRestriction, as kubeadm sets it up; the controllers run as their own service accounts.
 * There is no scheduler and no kubelet: test/helpers/node-agent binds and runs pods.
 *
 * The binaries come from scripts/build-kube.sh (run by scripts/setup-tests.sh, which npm test runs), or REIN_KUBE_BIN_DIR.
 * Starts in a few seconds, so each test file starts its own.
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
  /** A config that authenticates as a ServiceAccount (its token from serviceAccountToken), namespace set to its namespace. */
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
const SERVICE_CIDR = '10.0.0.0/24';
const KUBERNETES_SERVICE_IP = '10.0.0.1';
const ADMIN_TOKEN_USER = 'rein-test-admin';

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
    const ca = createCertificateAuthority(dir, 'rein-test-kubernetes-ca');
    const advertise = advertiseAddress();
    const apiserverCert = ca.issue('apiserver', {
      commonName: 'kube-apiserver',
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'],
      ips: [...new Set(['127.0.0.1', advertise, KUBERNETES_SERVICE_IP])],
    });
    // How the apiserver proves itself to kubelets (the node agent) when it proxies pods/log.
    const kubeletClient = ca.issue('apiserver-kubelet-client', { commonName: 'kube-apiserver-kubelet-client', organizations: ['system:masters'] });
    const controllerManagerCert = ca.issue('controller-manager', { commonName: 'system:kube-controller-manager' });
    const saKey = path.join(dir, 'sa.key');
    const saPub = path.join(dir, 'sa.pub');
    createKeyPair(saKey, saPub);
    const adminToken = `rein-admin-${Math.random().toString(36).slice(2)}`;
    const tokenFile = path.join(dir, 'tokens.csv');
    writeFileSync(tokenFile, `${adminToken},${ADMIN_TOKEN_USER},${ADMIN_TOKEN_USER},"system:masters"\n`);

    const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const etcd = new Daemon('etcd', path.join(bin, 'etcd'), [
      '--name=default',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
      // A test's cluster does not outlive its machine: no fsync, as the test PostgreSQL.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ], dir);
    daemons.push(etcd);

    const server = `https://127.0.0.1:${apiPort}`;
    const apiserver = new Daemon('kube-apiserver', path.join(bin, 'kube-apiserver'), [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      // Not loopback: the apiserver publishes it as the kubernetes Service's endpoint and complains every 10 s about a loopback one.
      `--advertise-address=${advertise}`,
      `--cert-dir=${path.join(dir, 'apiserver-certs')}`,
      `--tls-cert-file=${apiserverCert.certFile}`,
      `--tls-private-key-file=${apiserverCert.keyFile}`,
      `--client-ca-file=${ca.certFile}`,
      `--token-auth-file=${tokenFile}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      `--kubelet-client-certificate=${kubeletClient.certFile}`,
      `--kubelet-client-key=${kubeletClient.keyFile}`,
      `--kubelet-certificate-authority=${ca.certFile}`,
      '--kubelet-preferred-address-types=InternalIP',
      '--profiling=false',
    ], dir);
    daemons.push(apiserver);
    etcd.start();
    apiserver.start();
    await waitForReadyz(server, ca.cert, adminToken, apiserver, etcd);

    const controllerManagerConfig = path.join(dir, 'controller-manager.kubeconfig');
    writeFileSync(controllerManagerConfig, certKubeconfig(server, ca.certFile, 'system:kube-controller-manager', controllerManagerCert.certFile, controllerManagerCert.keyFile));
    const controllerManager = new Daemon('kube-controller-manager', path.join(bin, 'kube-controller-manager'), [
      `--kubeconfig=${controllerManagerConfig}`,
      `--authentication-kubeconfig=${controllerManagerConfig}`,
      `--authorization-kubeconfig=${controllerManagerConfig}`,
      "--controllers=*",
      '--leader-elect=false',
      // Each controller as its own service account, so the cluster's RBAC is the real one.
      '--use-service-account-credentials',
      `--service-account-private-key-file=${saKey}`,
      `--root-ca-file=${ca.certFile}`,
      `--cluster-signing-cert-file=${ca.certFile}`,
      `--cluster-signing-key-file=${ca.keyFile}`,
      // Nothing here asks the controller-manager's own health endpoints.
      '--secure-port=0',
      '--profiling=false',
    ], dir);
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
    // The controller-manager's service account controller makes every namespace's `default`
    // ServiceAccount; pods cannot be created before it has (the ServiceAccount admission plugin).
    await waitForDefaultServiceAccount(kubeConfig(), controllerManager);

    let clientCerts = 0;
    const plane: KubeControlPlane = {
      server,
      ca,
      kubeconfigFile,
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
        const request = await kubeConfig().makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({ namespace, name, body: { spec: { audiences: [], expirationSeconds } } });
        const token = request.status?.token;
        if (!token) throw new Error(`the apiserver made no token for ServiceAccount ${namespace}/${name}`);
        return token;
      },
      async kubeConfigForServiceAccount(namespace, name) {
        const config = new KubeConfig();
        config.loadFromString(tokenKubeconfig(server, ca.cert, `system:serviceaccount:${namespace}:${name}`, await plane.serviceAccountToken(namespace, name), namespace));
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
      async restartApiServer() {
        await apiserver.stop('SIGKILL');
        apiserver.start();
        await waitForReadyz(server, ca.cert, adminToken, apiserver, etcd);
      },
      close: stopAll,
    };
    return plane;
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** A non-loopback IPv4 address of this machine, else loopback. */
function advertiseAddress(): string {
  for (const addresses of Object.values(os.networkInterfaces())) {
    const address = addresses?.find((a) => a.family === 'IPv4' && !a.internal);
    if (address) return address.address;
  }
  return '127.0.0.1';
}

const base64 = (text: string) => Buffer.from(text).toString('base64');

function tokenKubeconfig(server: string, caPem: string, user: string, token: string, namespace: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority-data': base64(caPem) } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user, namespace } }],
    'current-context': 'test',
  });
}

function certKubeconfig(server: string, caFile: string, user: string, certFile: string, keyFile: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: user, user: { 'client-certificate': certFile, 'client-key': keyFile } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user } }],
    'current-context': 'test',
  });
}

async function waitForReadyz(server: string, caPem: string, token: string, ...daemons: Daemon[]): Promise<void> {
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
    if (Date.now() > deadline) throw new Error(`kube-apiserver was not ready after 90 s (/readyz: ${last}):\n${daemons.map((d) => d.tail()).join('\n')}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function waitForDefaultServiceAccount(config: KubeConfig, controllerManager: Daemon): Promise<void> {
  const core = config.makeApiClient(CoreV1Api);
  const deadline = Date.now() + 90_000;
  for (;;) {
    controllerManager.assertRunning('before it made the default ServiceAccount');
    const found = await core.readNamespacedServiceAccount({ namespace: 'default', name: 'default' }).then(() => true, () => false);
    if (found) return;
    if (Date.now() > deadline) throw new Error(`kube-controller-manager made no default ServiceAccount within 90 s:\n${controllerManager.tail()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Control plane processes still running when the test process exits are killed with it. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** One program of the control plane: its output in a log file, stopped with SIGTERM unless told otherwise. */
class Daemon {
  private child: ChildProcess | undefined;
  private exit: Promise<void> | undefined;
  private exited: string | undefined;
  private readonly logFile: string;

  constructor(private readonly name: string, private readonly binary: string, private readonly args: string[], dir: string) {
    mkdirSync(path.join(dir, 'logs'), { recursive: true });
    this.logFile = path.join(dir, 'logs', `${name}.log`);
  }

  start(): void {
    // Appended: a restarted program's log follows its first run's.
    const log = createWriteStream(this.logFile, { flags: 'a' });
    this.exited = undefined;
    const child = spawn(this.binary, this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    this.child = child;
    running.add(child);
    this.exit = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exited = `exited with ${code ?? signal}`;
        running.delete(child);
        resolve();
      });
      child.once('error', (err) => {
        this.exited = `could not start: ${err.message}`;
        running.delete(child);
        resolve();
      });
    });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  assertRunning(when: string): void {
    if (this.exited) throw new Error(`${this.name} ${this.exited} ${when}:\n${this.tail()}`);
  }

  tail(): string {
    try {
      return `--- ${this.name} ---\n${readFileSync(this.logFile, 'utf8').slice(-4000)}`;
    } catch {
      return `--- ${this.name}: no log ---`;
    }
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (!this.child || this.exited) return;
    this.child.kill(signal);
    await this.exit;
  }
}
