import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A throwaway certificate authority for tests that need real TLS and client certificates (the
 * Kubernetes control plane, the node agent's kubelet port). Made with the openssl CLI: Node can
 * make keys but not certificates, and openssl is on every machine these tests run on.
 */
export interface CertificateAuthority {
  certFile: string;
  keyFile: string;
  /** The CA certificate, PEM. */
  cert: string;
  /** A key and a certificate signed by this CA, written to `dir`/`name`.{key,crt}. */
  issue(name: string, subject: CertificateSubject): IssuedCertificate;
}

export interface CertificateSubject {
  /** Common name: for Kubernetes client certificates, the user name. */
  commonName: string;
  /** Organizations: for Kubernetes client certificates, the groups. */
  organizations?: string[];
  /** DNS names and IP addresses the certificate serves (server certificates). */
  dnsNames?: string[];
  ips?: string[];
}

export interface IssuedCertificate {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

export function createCertificateAuthority(dir: string, commonName = 'rein-test-ca'): CertificateAuthority {
  const certFile = path.join(dir, 'ca.crt');
  const keyFile = path.join(dir, 'ca.key');
  openssl([
    'req',
    '-x509',
    '-new',
    ...newKey(keyFile),
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    `/CN=${commonName}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
  ]);
  return {
    certFile,
    keyFile,
    cert: readFileSync(certFile, 'utf8'),
    issue(name, subject) {
      const leafCert = path.join(dir, `${name}.crt`);
      const leafKey = path.join(dir, `${name}.key`);
      const names = [
        ...(subject.dnsNames ?? []).map((d) => `DNS:${d}`),
        ...(subject.ips ?? []).map((ip) => `IP:${ip}`),
      ];
      const subj = [...(subject.organizations ?? []).map((o) => `/O=${o}`), `/CN=${subject.commonName}`].join('');
      openssl([
        'req',
        '-x509',
        '-new',
        ...newKey(leafKey),
        '-out',
        leafCert,
        '-days',
        '2',
        '-subj',
        subj,
        '-CA',
        certFile,
        '-CAkey',
        keyFile,
        '-addext',
        'basicConstraints=critical,CA:FALSE',
        '-addext',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        '-addext',
        'extendedKeyUsage=serverAuth,clientAuth',
        ...(names.length ? ['-addext', `subjectAltName=${names.join(',')}`] : []),
      ]);
      return {
        certFile: leafCert,
        keyFile: leafKey,
        cert: readFileSync(leafCert, 'utf8'),
        key: readFileSync(leafKey, 'utf8'),
      };
    },
  };
}

/** A new P-256 key pair, PEM (PKCS#8 private key, SPKI public key): e.g. for signing service account tokens. */
export function createKeyPair(privateFile: string, publicFile: string): void {
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', privateFile]);
  openssl(['pkey', '-in', privateFile, '-pubout', '-out', publicFile]);
}

const newKey = (keyFile: string) => [
  '-newkey',
  'ec',
  '-pkeyopt',
  'ec_paramgen_curve:P-256',
  '-nodes',
  '-keyout',
  keyFile,
];

function openssl(args: string[]): void {
  try {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT')
      throw new Error(
        'the openssl command is needed to make the test certificates; install OpenSSL 3 (apt-get install openssl)',
      );
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString().trim() ?? e.message}`);
  }
}
