import os from 'node:os';
import type { Command } from 'commander';
import { adapterBaseOf } from '../../policy/checkpoint.js';
import { releaseInput, runRelease } from '../../client/release.js';
import { gatewayControlFromConfig, gatewayUrl } from '../../gateway/from-config.js';
import type { LedgerEntry } from '../../ledger/ledger.js';
import { withLedger } from '../../ledger/open.js';
import { withRegistry } from '../../registry/open.js';
import { storeLocation } from '../../store/location.js';
import { notifyAliasMove } from '../../notify/alias-move.js';
import { PRODUCTION_ALIAS, promote, rollback, type AliasMove } from '../../registry/promotion.js';
import { cliContext, type GlobalOptions } from '../context.js';
import { terminalWidth } from '../terminal-width.js';
import { wrapLine } from '../../text-table.js';
import { formatDecision, formatDecisionList, listDecisions } from '../decision-format.js';
import { formatLedger, formatLedgerChanges } from '../ledger-format.js';
import { connectOrStartServices } from '../connect-services.js';
import { positiveInteger } from './train.js';

const actor = () => `cli:${os.userInfo().username}`;
const say = (line: string) => process.stdout.write(`${line}\n`);

/** A webhook delivery problem: the move is made, so it is a warning, not a failure. */
const warn = (problem: string) => void process.stderr.write(`warning: ${problem}\n`);

function reportMove(move: AliasMove): void {
  const { change } = move;
  say(
    `production: ${change.from ?? '(unset)'} → ${change.to} (${change.operation}${change.override ? ', OVERRIDE' : ''}${change.decisionId ? `, decision ${change.decisionId}` : ''})`,
  );
  say(
    move.gatewayUpdated
      ? 'The gateway routes production to it now.'
      : `The gateway was not told (${move.gatewayError}); it picks production up from the registry when it starts.`,
  );
}

/** `rein register`, `rein gate`, `rein promote`, `rein rollback`, `rein decision`, `rein decisions`, `rein ledger`. */
export function registerReleaseCommands(program: Command): void {
  addRegisterCommand(program);
  addGateCommand(program);
  addPromoteCommand(program);
  addRollbackCommand(program);
  addDecisionCommand(program);
  addDecisionsCommand(program);
  addLedgerCommand(program);
}

/** `rein register` */
function addRegisterCommand(program: Command): void {
  program
    .command('register')
    .description('record a policy version trained or served outside Rein, so it can be gated and promoted')
    .argument('<version>', 'the version name (the gateway routes it as configured in gateway.policies)')
    .requiredOption(
      '--checkpoint <uri>',
      'where its weights are: a folder, an object store URI, a model name on the backend',
    )
    .option('--parent <version>', 'the version it was trained from')
    .action(async (version: string, options: { checkpoint: string; parent?: string }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const adapterBase = adapterBaseOf(options.checkpoint);
      const policy = await withRegistry(storeLocation(config), (r) =>
        r.register({
          version,
          parent: options.parent ?? null,
          runId: null,
          iteration: null,
          checkpointUri: options.checkpoint,
          batchContentHash: null,
          trainerMetrics: {},
          ...(adapterBase && { format: 'lora' as const, baseCheckpointUri: adapterBase }),
        }),
      );
      say(
        `registered ${policy.version} (${policy.status}) at ${policy.checkpointUri}${adapterBase ? ` (a LoRA adapter on ${adapterBase})` : ''}${policy.parent ? `, from ${policy.parent}` : ''}`,
      );
    });
}

/** `rein gate` */
function addGateCommand(program: Command): void {
  program
    .command('gate')
    .description(
      'replay the held-out tasks with a candidate and with production, paired, and apply the gate rules (config: gate); exits 1 when the gate refuses the candidate, 3 when too few rollouts were scored to decide',
    )
    .argument('<version>', 'the candidate policy version')
    .option('--promote', 'move production to the candidate when the gate passes')
    .option('--heldout <n>', 'replay only the first n held-out tasks', positiveInteger)
    .option('--json', 'print the decision record as JSON')
    .action(
      async (version: string, options: { promote?: boolean; heldout?: number; json?: boolean }, command: Command) => {
        const { config, file, logger } = cliContext(command.optsWithGlobals<GlobalOptions>());
        const input = releaseInput(
          config,
          version,
          { promote: options.promote ?? false, heldoutLimit: options.heldout, actor: actor() },
          file ?? 'config',
        );
        const { client, close } = await connectOrStartServices(config, logger, say);
        try {
          say(
            `Replaying ${input.heldout.taskIds.length} held-out tasks × ${input.samplesPerTask} with ${version} and with production…`,
          );
          const result = await runRelease(client, config.temporal.taskQueue, input, config);
          const decision = await withRegistry(storeLocation(config), (r) => r.decision(result.gate.decisionId));
          if (options.json) say(JSON.stringify(decision, null, 2));
          else if (decision) process.stdout.write(formatDecision(decision, { gatewayUrl: gatewayUrl(config.gateway) }));
          if (result.promoted) say(`Promoted: production is ${version} now.`);
          else if (result.gate.verdict === 'pass') say(`Passed. Promote with \`rein promote ${version}\`.`);
          // Exit 3 tells a script "no decision, try again" apart from a refused candidate (1).
          if (result.gate.verdict === 'insufficient')
            say(
              `No decision: too few rollouts were scored. Fix the fault, then run \`rein gate ${version}\` again; only the unscored rollouts run again.`,
            );
          if (result.gate.verdict !== 'pass') process.exitCode = result.gate.verdict === 'insufficient' ? 3 : 1;
        } finally {
          await close();
        }
      },
    );
}

/** `rein promote` */
function addPromoteCommand(program: Command): void {
  program
    .command('promote')
    .description(
      'move production to a version: needs a passing gate decision against the current production, or --override',
    )
    .argument('<version>', 'the policy version')
    .option('--decision <id>', 'the gate decision that allows it (default: the newest against the current production)')
    .option(
      '--override <reason>',
      'promote without a passing decision; the reason is recorded and the change is marked as an override',
    )
    .action(async (version: string, options: { decision?: string; override?: string }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const move = await withRegistry(storeLocation(config), (registry) =>
        promote(registry, gatewayControlFromConfig(config.gateway), {
          version,
          actor: actor(),
          ...(options.decision && { decisionId: options.decision }),
          ...(options.override !== undefined && { override: { reason: options.override } }),
        }),
      );
      reportMove(move);
      await notifyAliasMove(config.notifications, move, warn);
    });
}

/** `rein rollback` */
function addRollbackCommand(program: Command): void {
  program
    .command('rollback')
    .description('move production back to the version it served before the current one')
    .option('--reason <text>', 'why; recorded with the change')
    .action(async (options: { reason?: string }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const move = await withRegistry(storeLocation(config), (registry) =>
        rollback(registry, gatewayControlFromConfig(config.gateway), {
          actor: actor(),
          ...(options.reason && { reason: options.reason }),
        }),
      );
      reportMove(move);
      await notifyAliasMove(config.notifications, move, warn);
    });
}

/** `rein decision` */
function addDecisionCommand(program: Command): void {
  program
    .command('decision')
    .description("a gate decision: the rules, each check's evidence and the rollouts behind it")
    .argument('[id]', 'decision id (default: the newest about --candidate)')
    .option('--candidate <version>', 'the newest decision about this version')
    .option('--json', 'print JSON')
    .action(async (id: string | undefined, options: { candidate?: string; json?: boolean }, command: Command) => {
      if (!id && !options.candidate)
        command.error('rein decision: name a decision id, or --candidate VERSION for its newest decision', {
          exitCode: 2,
          code: 'rein.usage',
        });
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const decision = await withRegistry(storeLocation(config), async (r) =>
        id ? r.decision(id) : options.candidate ? (await r.decisionsFor(options.candidate))[0] : undefined,
      );
      if (!decision)
        throw new Error(
          id
            ? `no gate decision ${id}; \`rein decisions\` lists them`
            : `no gate decision about ${options.candidate}; \`rein decisions\` lists them`,
        );
      process.stdout.write(
        options.json
          ? `${JSON.stringify(decision, null, 2)}\n`
          : formatDecision(decision, { rolloutsPerCheck: 20, gatewayUrl: gatewayUrl(config.gateway) }),
      );
    });
}

/** `rein decisions` */
function addDecisionsCommand(program: Command): void {
  program
    .command('decisions')
    .description(
      'gate decisions, newest first: candidate against production, verdict, held-out success, and whether production moved',
    )
    .option('--run <id>', "only decisions about this run's candidates")
    .option('--json', 'print JSON')
    .action(async (options: { run?: string; json?: boolean }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const decisions = await withRegistry(storeLocation(config), (r) =>
        listDecisions(r, options.run === undefined ? {} : { runId: options.run }),
      );
      if (options.run !== undefined && decisions.length === 0)
        throw new Error(
          `no gate decision about run ${options.run} (its gate records one after each held-out replay); \`rein runs\` lists the runs`,
        );
      if (options.json) return void say(JSON.stringify(decisions, null, 2));
      process.stdout.write(
        decisions.length === 0
          ? '(no gate decisions yet: each held-out gate records one)\n'
          : formatDecisionList(decisions, terminalWidth()),
      );
    });
}

/** `rein ledger` */
function addLedgerCommand(program: Command): void {
  program
    .command('ledger')
    .description(
      'the model, harness and environment ledgers: a row per iteration and release, and what changed between releases',
    )
    .option('--run <id>', "only this run's rows")
    .option('--diff <entries...>', 'two entries (ids, or release versions) to compare: which ledger changed')
    .option('--json', 'print JSON')
    .action(async (options: { run?: string; diff?: string[]; json?: boolean }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      if (options.diff) {
        const ids = options.diff;
        if (ids.length !== 2)
          command.error('rein ledger: --diff takes two entries, e.g. --diff release.run-1.v1 release.run-1.v3', {
            exitCode: 2,
            code: 'rein.usage',
          });
        const [a, b] = await withLedger(storeLocation(config), (ledger) =>
          Promise.all(
            ids.map(async (id) => {
              const entry = (await ledger.get(id)) ?? (await ledger.get(`release.${id}`));
              if (!entry) throw new Error(`no ledger entry ${id}; \`rein ledger\` lists them`);
              return entry;
            }),
          ),
        );
        process.stdout.write(
          options.json
            ? `${JSON.stringify({ a, b }, null, 2)}\n`
            : formatLedgerChanges(a as LedgerEntry, b as LedgerEntry)
                .split('\n')
                .flatMap((line) => wrapLine(line, terminalWidth()))
                .join('\n'),
        );
        return;
      }
      const entries = await withLedger(storeLocation(config), (ledger) =>
        ledger.list(options.run === undefined ? {} : { runId: options.run }),
      );
      if (options.run !== undefined && entries.length === 0)
        throw new Error(
          `no ledger row from run ${options.run} (a run adds one per finished iteration); \`rein runs\` lists the runs`,
        );
      if (options.json) return void say(JSON.stringify(entries, null, 2));
      const verdicts = await withRegistry(storeLocation(config), async (r) => {
        const ids = [...new Set(entries.flatMap((e) => (e.decisionId ? [e.decisionId] : [])))];
        return new Map(await Promise.all(ids.map(async (id) => [id, (await r.decision(id))?.verdict ?? '?'] as const)));
      });
      process.stdout.write(
        entries.length === 0
          ? '(the ledgers are empty: each training iteration and release adds a row)\n'
          : formatLedger(entries, verdicts, terminalWidth()),
      );
      const production = await withRegistry(storeLocation(config), (r) => r.alias(PRODUCTION_ALIAS));
      if (production) say(`production: ${production}`);
    });
}
