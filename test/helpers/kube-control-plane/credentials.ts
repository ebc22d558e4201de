import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createCertificateAuthority,
  createKeyPair,
  type CertificateAuthority,
  type IssuedCertificate,
} from '../certificates.js';

export const KUBERNETES_SERVICE_IP = '10.0.0.1';
const ADMIN_TOKEN_USER = 'rein-test-admin';

/** The cluster's CA and what each program proves itself with, as files in the control plane's folder. */
export interface ControlPlaneCredentials {
  ca: CertificateAuthority;
  /**
   * The apiserver's serving certificate: loopback, the advertised address and the kubernetes Service's names and IP.
   */
  apiserver: IssuedCertificate;
  /** How the apiserver proves itself to kubelets (the node agent) when it proxies pods/log. */
  kubeletClient: IssuedCertificate;
  controllerManager: IssuedCertificate;
  /** The key pair that signs and checks ServiceAccount tokens. */
  serviceAccountKey: string;
  serviceAccountPublicKey: string;
  /** The admin's bearer token (group system:masters), in `tokenFile` for --token-auth-file. */
  adminToken: string;
  tokenFile: string;
}

export function issueCredentials(dir: string, advertise: string): ControlPlaneCredentials {
  const ca = createCertificateAuthority(dir, 'rein-test-kubernetes-ca');
  const apiserver = ca.issue('apiserver', {
    commonName: 'kube-apiserver',
    dnsNames: [
      'localhost',
      'kubernetes',
      'kubernetes.default',
      'kubernetes.default.svc',
      'kubernetes.default.svc.cluster.local',
    ],
    ips: [...new Set(['127.0.0.1', advertise, KUBERNETES_SERVICE_IP])],
  });
  const kubeletClient = ca.issue('apiserver-kubelet-client', {
    commonName: 'kube-apiserver-kubelet-client',
    organizations: ['system:masters'],
  });
  const controllerManager = ca.issue('controller-manager', { commonName: 'system:kube-controller-manager' });
  const serviceAccountKey = path.join(dir, 'sa.key');
  const serviceAccountPublicKey = path.join(dir, 'sa.pub');
  createKeyPair(serviceAccountKey, serviceAccountPublicKey);
  const adminToken = `rein-admin-${Math.random().toString(36).slice(2)}`;
  const tokenFile = path.join(dir, 'tokens.csv');
  writeFileSync(tokenFile, `${adminToken},${ADMIN_TOKEN_USER},${ADMIN_TOKEN_USER},"system:masters"\n`);
  return {
    ca,
    apiserver,
    kubeletClient,
    controllerManager,
    serviceAccountKey,
    serviceAccountPublicKey,
    adminToken,
    tokenFile,
  };
}

/** A non-loopback IPv4 address of this machine, else loopback. */
export function advertiseAddress(): string {
  for (const addresses of Object.values(os.networkInterfaces())) {
    const address = addresses?.find((a) => a.family === 'IPv4' && !a.internal);
    if (address) return address.address;
  }
  return '127.0.0.1';
}
