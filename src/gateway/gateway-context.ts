import type { IncomingMessage } from 'node:http';
import type { Logger } from '../log/logger.js';
import type { GatewayMetrics } from '../metrics/gateway-metrics.js';
import type { CoordinationStore } from '../store/coordination-store.js';
import type { TraceStore } from '../store/trace-store.js';
import type { GatewayTracing } from '../telemetry/gateway-tracing.js';
import type { GatewayCredentials } from './credentials.js';
import type { ModelCallProxy } from './proxy.js';
import type { Router } from './routing.js';

/** What the gateway's route plugins share (a type, not an interface: Fastify's plugin options are a record). */
export type GatewayContext = {
  /** The journal, behind redaction (see RedactingStore). */
  store: TraceStore;
  router: Router;
  credentials: GatewayCredentials;
  proxy: ModelCallProxy;
  metrics: GatewayMetrics;
  tracing: GatewayTracing | undefined;
  log: Logger;
  /** The bytes each JSON body arrived as (see jsonBodyParser): the backend gets them, not a re-serialisation. */
  rawBodies: WeakMap<IncomingMessage, string>;
  /** Launch slots' leases (and gateway membership); undefined where the store is not on SQL. */
  coordination: CoordinationStore | undefined;
  /** How harnesses reach the gateway: its listening address unless configured, so known once it listens. */
  publicUrl(): string;
};
