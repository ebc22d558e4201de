import { readFileSync } from 'node:fs';
import type { TemporalSettings } from './schema.js';

/** What both the client's Connection and the worker's NativeConnection take. */
export interface TemporalConnectionOptions {
  address: string;
  tls?:
    | boolean
    | {
        serverNameOverride?: string;
        serverRootCACertificate?: Buffer;
        clientCertPair?: { crt: Buffer; key: Buffer };
      };
  apiKey?: string;
}

/** True when Rein should start its own dev server, i.e. no external server is configured. */
export function usesEmbeddedServer(settings: TemporalSettings): boolean {
  return settings.address === undefined;
}

export function temporalConnectionOptions(settings: TemporalSettings): TemporalConnectionOptions {
  const { devServer } = settings;
  const options: TemporalConnectionOptions = {
    address: settings.address ?? `${devServer.ip}:${devServer.port}`,
  };
  if (settings.apiKey) options.apiKey = settings.apiKey;
  const tls = settings.tls;
  if (typeof tls === 'boolean') options.tls = tls;
  else if (tls) {
    if (Boolean(tls.clientCertPath) !== Boolean(tls.clientKeyPath)) {
      throw new Error(
        'temporal.tls: clientCertPath and clientKeyPath go together for mTLS; set both (or neither, for server-only TLS).',
      );
    }
    options.tls = {
      ...(tls.serverName && { serverNameOverride: tls.serverName }),
      ...(tls.serverCaCertPath && { serverRootCACertificate: readPem(tls.serverCaCertPath, 'serverCaCertPath') }),
      ...(tls.clientCertPath &&
        tls.clientKeyPath && {
          clientCertPair: {
            crt: readPem(tls.clientCertPath, 'clientCertPath'),
            key: readPem(tls.clientKeyPath, 'clientKeyPath'),
          },
        }),
    };
  } else if (settings.apiKey) {
    // API keys are only accepted over TLS (as Temporal Cloud requires).
    options.tls = true;
  }
  return options;
}

function readPem(file: string, setting: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`temporal.tls.${setting}: cannot read ${file}: ${(err as Error).message}`);
  }
}
