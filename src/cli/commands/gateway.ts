import type { Command } from 'commander';
import { gatewayOptions } from '../../gateway/from-config.js';
import { startGateway } from '../../gateway/server.js';
import { listenAs } from '../port-in-use.js';
import { withRegistry } from '../../registry/open.js';
import { storeLocation } from '../../store/location.js';
import { followRegistry } from '../../registry/follow.js';
import { restoreRoutes } from '../../registry/serving.js';
import { gatewayInstanceName, traceStoreDescription, traceStoreFromConfig } from '../../store/open.js';
import type { ReinConfig } from '../../config/schema.js';
import { cliContext, listenAddress, untilInterrupted, type GlobalOptions } from '../context.js';

export function registerGatewayCommand(program: Command, settings: ReinConfig): void {
  program
    .command('gateway')
    .description(
      `run the gateway on ${listenAddress(settings.gateway.host, settings.gateway.port)} (gateway.host, gateway.port): the OpenAI-compatible proxy harnesses call, journaling every call, and the rollout API`,
    )
    .action(async () => {
      const { config, logger } = cliContext(program.opts<GlobalOptions>());
      const settings = config.gateway;
      const interrupted = untilInterrupted();
      // On PostgreSQL, gateways share the journal: this one is known by its host and port.
      const store = await traceStoreFromConfig(config, { gateway: gatewayInstanceName(settings) });
      try {
        const { options, adminKeySource } = gatewayOptions(settings, store);
        const gateway = await listenAs('gateway', 'gateway.port', settings, () =>
          startGateway({ ...options, logger }, { host: settings.host, port: settings.port }),
        );
        const { restored, skipped, skippedAliases } = await withRegistry(storeLocation(config), (registry) =>
          restoreRoutes(registry, gateway.router, config.trainer.servingBackend),
        );
        if (restored.length > 0) logger.info({ restored }, 'routing trained policy versions again');
        if (skipped.length > 0)
          logger.warn(
            { skipped },
            'trained policy versions this gateway cannot route (trainer.servingBackend is not among gateway.backends)',
          );
        if (skippedAliases.length > 0)
          logger.warn({ skipped: skippedAliases }, 'aliases in the registry name versions this gateway does not serve');
        // With the registry in PostgreSQL, gateways share it: a promotion made through any of them, or none, reaches
        // this one at once.
        const follower = await followRegistry(
          storeLocation(config),
          gateway.router,
          config.trainer.servingBackend,
          logger,
        );
        logger.info({ url: gateway.url, traceStore: traceStoreDescription(config) }, 'gateway listening');
        process.stdout.write(
          `Gateway ready at ${gateway.url} (OpenAI base URL ${gateway.url}/v1)\n` +
            `Trace store: ${traceStoreDescription(config)}\nAdmin key: ${adminKeySource}\n` +
            `Policies: ${
              gateway.router
                .status()
                .map((p) => `${p.policyVersion}${p.aliases.length ? ` (${p.aliases.join(', ')})` : ''}`)
                .join(', ') || 'none configured'
            }\n` +
            (gateway.lostCalls > 0
              ? `${gateway.lostCalls} call${gateway.lostCalls === 1 ? '' : 's'} left in flight by the previous gateway ended as gateway_lost (an infrastructure error)\n`
              : '') +
            'Press Ctrl-C to stop.\n',
        );
        await interrupted;
        await follower.close();
        await gateway.close();
      } finally {
        await store.close();
      }
    });
}
