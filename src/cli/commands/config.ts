import type { Command } from 'commander';
import { stringify } from 'yaml';
import { configJsonSchema } from '../../config/schema.js';
import { loadConfig } from '../../config/load.js';
import { checkPaths } from '../../config/paths.js';
import { redactedStoreUrl } from '../../store/location.js';
import type { GlobalOptions } from '../context.js';

export function registerConfigCommands(program: Command): void {
  const config = program.command('config').description('inspect and validate Rein configuration');
  config
    .command('schema')
    .description('print the JSON Schema of the config file')
    .action(() => {
      process.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    });
  config
    .command('check')
    .argument('[file]', 'config file (default: --config, REIN_CONFIG, or rein.yaml in this folder)')
    .description(
      'validate a config file (its settings, and that the files and folders it names are there) and print it with defaults and environment applied',
    )
    .action((file: string | undefined) => {
      const global = program.opts<GlobalOptions>();
      const loaded = loadConfig({ file: file ?? global.config });
      checkPaths(loaded);
      const redacted = {
        ...loaded.config,
        temporal: { ...loaded.config.temporal, ...(loaded.config.temporal.apiKey && { apiKey: '***' }) },
        store: {
          ...loaded.config.store,
          ...(loaded.config.store.url && { url: redactedStoreUrl(loaded.config.store.url) }),
        },
      };
      process.stdout.write(`# ${loaded.file ?? 'no config file: defaults and environment'}\n${stringify(redacted)}`);
    });
}
