import { writeFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { POLICY_SERVER_KEY_ENV, policyServerKey, policyServerKeyFile } from '../../policy/admin-key.js';
import { runTrainJob } from '../../policy/local-trainer.js';
import { artifactStoreFromConfig, stagingDir } from '../../artifacts/from-config.js';
import { startPolicyServer } from '../../policy/server.js';
import type { ReinConfig } from '../../config/schema.js';
import { cliContext, untilInterrupted, type GlobalOptions } from '../context.js';
import { listenAs } from '../port-in-use.js';

export function registerPolicyCommands(program: Command, settings: ReinConfig): void {
  const policy = program.command('policy').description('the embedded policy: serve it, train it');
  addServeCommand(policy, settings);
  addTrainCommand(policy);
}

function addServeCommand(policy: Command, settings: ReinConfig): void {
  policy
    .command('serve')
    .description('serve policy checkpoints over an OpenAI-compatible API (vLLM-style token ids and log-probs)')
    .option('--model <name=dir...>', 'a checkpoint directory to serve under a model name (repeatable)', [])
    // Where the config's policy server listens (the gateway's embedded backend points there), unless told otherwise.
    .addOption(
      new Option('--host <host>', 'address to listen on').default(
        settings.policyServer.host,
        `${settings.policyServer.host}, the config's policyServer.host`,
      ),
    )
    .addOption(
      new Option('--port <port>', 'port to listen on').default(
        String(settings.policyServer.port),
        `${settings.policyServer.port}, the config's policyServer.port`,
      ),
    )
    .option(
      '--admin-key-env <name>',
      `variable holding the key that loading and unloading versions needs (default ${POLICY_SERVER_KEY_ENV}; unset: the key generated into dataDir/policy-server/admin-key)`,
    )
    .action(
      async (options: { model: string[]; host: string; port: string; adminKeyEnv?: string }, command: Command) => {
        const models: Record<string, string> = {};
        for (const spec of options.model) {
          const [name, dir] = spec.split('=');
          if (!name || !dir) throw new Error(`--model expects name=dir, got "${spec}"`);
          models[name] = dir;
        }
        const adminKey = adminKeyFor(
          options.adminKeyEnv,
          () => cliContext(command.optsWithGlobals<GlobalOptions>()).config.dataDir,
        );
        // s3:// checkpoints (--model or loaded later) come from the config's artifact store.
        const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
        const artifacts = { store: artifactStoreFromConfig(config), stagingDir: stagingDir(config.dataDir) };
        // Not given: the config's policy server address, read from the config this command runs with.
        const configured = (name: 'host' | 'port') => command.getOptionValueSource(name) === 'default';
        const host = configured('host') ? config.policyServer.host : options.host;
        const port = configured('port') ? config.policyServer.port : Number(options.port);
        const interrupted = untilInterrupted();
        const server = await listenAs(
          'policy server',
          configured('port') ? 'policyServer.port' : '--port',
          { host, port },
          () => startPolicyServer({ host, port, models, adminKey: adminKey.key, artifacts }),
        );
        process.stdout.write(
          `Policy server ready at ${server.url} serving ${server.models().join(', ') || 'nothing yet'}\nLoading and unloading versions needs the admin key (${adminKey.source}).\nPress Ctrl-C to stop.\n`,
        );
        await interrupted;
        await server.close();
      },
    );
}

function addTrainCommand(policy: Command): void {
  policy
    .command('train')
    .description(
      'one policy update with the tfjs trainer (docs/training-objective.md): read a batch artifact and a checkpoint, write a new checkpoint, rein.json and metrics.json',
    )
    .requiredOption('--checkpoint <dir>', 'the current policy checkpoint')
    .requiredOption('--batch <file>', 'the batch artifact (safetensors) from the sample builder')
    .requiredOption('--out <dir>', 'where the new checkpoint goes')
    .option('--seed <n>', 'seed for minibatch order', '0')
    .option('--lr <rate>', 'learning rate', '0.001')
    .option('--epochs <n>', 'passes over the batch', '1')
    .option('--minibatch <n>', 'sequences per optimizer step', '32')
    .option('--clip <eps>', 'PPO clip range', '0.2')
    .option('--max-grad-norm <n>', 'gradient norm limit', '1')
    .option('--no-shuffle', "keep the batch's sequence order (no seeded shuffle per epoch)")
    .action(
      async (o: {
        checkpoint: string;
        batch: string;
        out: string;
        seed: string;
        lr: string;
        epochs: string;
        minibatch: string;
        clip: string;
        maxGradNorm: string;
        shuffle: boolean;
      }) => {
        const result = await runTrainJob({
          checkpointDir: o.checkpoint,
          batchPath: o.batch,
          outputDir: o.out,
          seed: Number(o.seed),
          learningRate: Number(o.lr),
          epochs: Number(o.epochs),
          minibatchSize: Number(o.minibatch),
          clipEpsilon: Number(o.clip),
          maxGradNorm: Number(o.maxGradNorm),
          shuffle: o.shuffle,
        });
        process.stdout.write(`${JSON.stringify(result)}\n`);
        // In a Kubernetes Job Rein reads the result from the termination message file it names.
        if (process.env.REIN_RESULT_FILE) writeFileSync(process.env.REIN_RESULT_FILE, JSON.stringify(result));
      },
    );
}

/** The admin key `rein policy serve` asks for: the named variable's, else the data directory's (what workers read). */
function adminKeyFor(envName: string | undefined, dataDir: () => string): { key: string; source: string } {
  if (envName !== undefined) {
    const key = process.env[envName];
    if (!key)
      throw new Error(
        `--admin-key-env names ${envName}, which is not set: export it (the key workers send) or leave the option out`,
      );
    return { key, source: `$${envName}` };
  }
  const dir = dataDir();
  return {
    key: policyServerKey(dir),
    source: process.env[POLICY_SERVER_KEY_ENV] ? `$${POLICY_SERVER_KEY_ENV}` : policyServerKeyFile(dir),
  };
}
