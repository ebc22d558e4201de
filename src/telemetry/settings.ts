import { z } from 'zod';
import { environmentName } from '../config/setting-types.js';

/** `gateway.tracing`: OpenTelemetry traces of rollouts, model calls and tool spans, sent over OTLP/HTTP. */
export const tracingSettings = z
  .strictObject({
    enabled: z.boolean().default(false).describe('Export traces (off by default)'),
    endpoint: z
      .url()
      .refine((url) => /^https?:$/.test(new URL(url).protocol) && new URL(url).pathname.replace(/\/+$/, '') !== '', {
        message:
          'the OTLP/HTTP traces URL, with its path (usually ending in /v1/traces), e.g. http://localhost:4318/v1/traces',
      })
      .default('http://127.0.0.1:4318/v1/traces')
      .describe(
        'OTLP/HTTP traces URL: Jaeger and the OpenTelemetry Collector http://HOST:4318/v1/traces, Phoenix http://HOST:6006/v1/traces, Langfuse https://HOST/api/public/otel/v1/traces',
      ),
    headers: z
      .record(z.string().min(1), z.string())
      .default({})
      .describe('Headers sent with every export (not secret ones: see headersEnv)'),
    headersEnv: z
      .record(z.string().min(1), environmentName)
      .default({})
      .describe(
        'Header name -> environment variable holding its value (API keys, Basic auth), so secrets stay out of config files',
      ),
    serviceName: z.string().min(1).default('rein-gateway').describe('service.name of the spans'),
    content: z
      .boolean()
      .default(false)
      .describe(
        "Record messages on model call spans and tools' inputs and outputs on tool spans, redacted by gateway.redact (off by default)",
      ),
    maxQueueSize: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(2048)
      .describe('Spans waiting for export at most; past it (a slow or down backend) new spans are dropped and counted'),
    batchDelayMs: z.number().int().min(1).max(60_000).default(2000).describe('How long spans wait to be sent together'),
    exportTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(120_000)
      .default(10_000)
      .describe('Longest one export may take; its spans are dropped after it'),
  })
  .describe(
    'OpenTelemetry traces: a rollout attempt is a trace, each model call a GenAI span, each reported tool span a child span',
  );

export type TracingSettings = z.output<typeof tracingSettings>;

/** `gateway.tracing` as the gateway uses it (header values read from their environment variables). */
export interface TracingOptions {
  /** The OTLP/HTTP traces URL (…/v1/traces). */
  endpoint: string;
  headers: Record<string, string>;
  serviceName: string;
  /** Record messages (redacted) on call spans and tool inputs and outputs on tool spans. */
  content: boolean;
  maxQueueSize: number;
  batchDelayMs: number;
  exportTimeoutMs: number;
}

/** What the gateway's tracing runs with, or undefined when it is off; header values come from the environment here. */
export function tracingOptions(
  settings: TracingSettings,
  env: NodeJS.ProcessEnv = process.env,
): TracingOptions | undefined {
  if (!settings.enabled) return undefined;
  const headers = { ...settings.headers };
  for (const [name, variable] of Object.entries(settings.headersEnv)) {
    const value = env[variable];
    if (!value)
      throw new Error(
        `gateway.tracing.headersEnv.${name} names ${variable}, which is not set in the environment; set it, or remove the header`,
      );
    headers[name] = value;
  }
  return {
    endpoint: settings.endpoint,
    headers,
    serviceName: settings.serviceName,
    content: settings.content,
    maxQueueSize: settings.maxQueueSize,
    batchDelayMs: settings.batchDelayMs,
    exportTimeoutMs: settings.exportTimeoutMs,
  };
}
