/**
 * The three programs of the control plane, each with the flags a kubeadm cluster gives it, adapted to one test machine.
 */
import path from 'node:path';
import type { ControlPlaneCredentials } from './credentials.js';
import { Daemon } from './daemon.js';

const SERVICE_CIDR = '10.0.0.0/24';

export function etcdDaemon(bin: string, dir: string, clientUrl: string, peerPort: number): Daemon {
  return new Daemon(
    'etcd',
    path.join(bin, 'etcd'),
    [
      '--name=default',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=${clientUrl}`,
      `--advertise-client-urls=${clientUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
      // A test's cluster does not outlive its machine: no fsync, as the test PostgreSQL.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
    dir,
  );
}

/** kube-apiserver on 127.0.0.1:`port`: Node,RBAC authorization with NodeRestriction, as kubeadm sets it up. */
export function apiserverDaemon(
  bin: string,
  dir: string,
  etcdUrl: string,
  port: number,
  advertise: string,
  credentials: ControlPlaneCredentials,
): Daemon {
  const { ca, apiserver, kubeletClient } = credentials;
  return new Daemon(
    'kube-apiserver',
    path.join(bin, 'kube-apiserver'),
    [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      // Not loopback: the apiserver publishes it as the kubernetes Service's endpoint and complains every 10 s about a
      // loopback one.
      `--advertise-address=${advertise}`,
      `--cert-dir=${path.join(dir, 'apiserver-certs')}`,
      `--tls-cert-file=${apiserver.certFile}`,
      `--tls-private-key-file=${apiserver.keyFile}`,
      `--client-ca-file=${ca.certFile}`,
      `--token-auth-file=${credentials.tokenFile}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${credentials.serviceAccountPublicKey}`,
      `--service-account-signing-key-file=${credentials.serviceAccountKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      `--kubelet-client-certificate=${kubeletClient.certFile}`,
      `--kubelet-client-key=${kubeletClient.keyFile}`,
      `--kubelet-certificate-authority=${ca.certFile}`,
      '--kubelet-preferred-address-types=InternalIP',
      '--profiling=false',
    ],
    dir,
  );
}

/** kube-controller-manager with every controller (Jobs, garbage collection, service accounts, node lifecycle, TTL). */
export function controllerManagerDaemon(
  bin: string,
  dir: string,
  kubeconfigFile: string,
  credentials: ControlPlaneCredentials,
): Daemon {
  const { ca } = credentials;
  return new Daemon(
    'kube-controller-manager',
    path.join(bin, 'kube-controller-manager'),
    [
      `--kubeconfig=${kubeconfigFile}`,
      `--authentication-kubeconfig=${kubeconfigFile}`,
      `--authorization-kubeconfig=${kubeconfigFile}`,
      '--controllers=*',
      '--leader-elect=false',
      // Each controller as its own service account, so the cluster's RBAC is the real one.
      '--use-service-account-credentials',
      `--service-account-private-key-file=${credentials.serviceAccountKey}`,
      `--root-ca-file=${ca.certFile}`,
      `--cluster-signing-cert-file=${ca.certFile}`,
      `--cluster-signing-key-file=${ca.keyFile}`,
      // Nothing here asks the controller-manager's own health endpoints.
      '--secure-port=0',
      '--profiling=false',
    ],
    dir,
  );
}
