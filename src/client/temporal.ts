import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { TemporalSettings } from '../config/schema.js';
import { temporalConnectionOptions } from '../config/temporal-connection.js';
import { REIN_SEARCH_ATTRIBUTES, type SearchAttributeKind } from '../search-attributes.js';

const { IndexedValueType } = proto.temporal.api.enums.v1;

const INDEXED_VALUE_TYPES: Record<SearchAttributeKind, proto.temporal.api.enums.v1.IndexedValueType> = {
  Text: IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
  Keyword: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  Int: IndexedValueType.INDEXED_VALUE_TYPE_INT,
  Double: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
  Bool: IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
  Datetime: IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
  KeywordList: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};

export interface TemporalClient {
  connection: Connection;
  client: Client;
  namespace: string;
  close(): Promise<void>;
}

/** Connects to the configured Temporal server; the error says how to start one when none answers. */
export async function connectTemporal(settings: TemporalSettings, connectTimeoutMs = 10_000): Promise<TemporalClient> {
  const options = temporalConnectionOptions(settings);
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...options, connectTimeout: connectTimeoutMs });
  } catch (err) {
    throw new Error(
      `cannot reach Temporal at ${options.address}: ${(err as Error).message}\n` +
        (settings.address
          ? 'Check TEMPORAL_ADDRESS / temporal.address, the namespace and the TLS or API-key settings.'
          : 'Start the embedded dev server with `rein server` (or `rein dev`), or set TEMPORAL_ADDRESS.'),
    );
  }
  const client = new Client({ connection, namespace: settings.namespace });
  return { connection, client, namespace: settings.namespace, close: () => connection.close() };
}

/**
 * Registers the Rein search attributes that the namespace lacks. Works on the dev server and on
 * self-hosted clusters; where the operator API is not allowed (e.g. Temporal Cloud), the error
 * lists what to create by hand.
 */
export async function ensureSearchAttributes(
  connection: Connection,
  namespace: string,
): Promise<{ created: string[] }> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const present = { ...existing.systemAttributes, ...existing.customAttributes };
  const missing: Record<string, proto.temporal.api.enums.v1.IndexedValueType> = {};
  for (const [name, kind] of Object.entries(REIN_SEARCH_ATTRIBUTES)) {
    const wanted = INDEXED_VALUE_TYPES[kind];
    const actual = present[name];
    if (actual === undefined || actual === null) missing[name] = wanted;
    else if (actual !== wanted) {
      throw new Error(
        `search attribute ${name} exists in namespace ${namespace} with type ${IndexedValueType[actual]}, ` +
          `but Rein needs ${kind}. Remove it (temporal operator search-attribute remove --name ${name}) and retry.`,
      );
    }
  }
  const created = Object.keys(missing);
  if (created.length === 0) return { created };
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
  } catch (err) {
    const commands = created
      .map(
        (name) =>
          `  temporal operator search-attribute create --namespace ${namespace} --name ${name} --type ${REIN_SEARCH_ATTRIBUTES[name as keyof typeof REIN_SEARCH_ATTRIBUTES]}`,
      )
      .join('\n');
    throw new Error(
      `could not register Rein's search attributes (${(err as Error).message}). Create them as an administrator:\n${commands}`,
    );
  }
  return { created };
}
