import type { Command } from 'commander';
import { artifactStoreFromConfig, localArtifactsDir } from '../../artifacts/from-config.js';
import { formatBytes } from '../../preflight/disk-space.js';
import { closingAfter } from '../../registry/policy-registry.js';
import { withRegistry } from '../../registry/open.js';
import { collectGarbage, type GcReport } from '../../retention/gc.js';
import { PROTECTION_LABELS, PROTECTION_REASONS } from '../../retention/protections.js';
import type { ProtectedCounts } from '../../retention/plan.js';
import { storeLocation } from '../../store/location.js';
import { traceStoreFromConfig } from '../../store/open.js';
import { cliContext, type GlobalOptions } from '../context.js';

const say = (line: string) => process.stdout.write(`${line}\n`);

/** `rein gc`: applies the retention settings. */
export function registerGcCommand(program: Command): void {
  program
    .command('gc')
    .description(
      'delete what the retention settings let go (finished rollouts in the journal, rollout folders, staged copies), never what a registered policy was trained on or a gate decision cites; prints what and how much',
    )
    .option('--dry-run', 'say what would be deleted and how much space that frees; delete nothing')
    .option('--json', 'print the report as JSON')
    .action(async (options: { dryRun?: boolean; json?: boolean }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const { retention } = config;
      const dryRun = options.dryRun ?? false;
      const deps = {
        dataDir: config.dataDir,
        artifactsDir: localArtifactsDir(config),
        artifacts: artifactStoreFromConfig(config),
      };
      const run = async (): Promise<GcReport> => {
        // The stores only when a setting needs them: a dry run on a fresh data dir creates no files.
        if (retention.journal === undefined && retention.rolloutFolders === undefined)
          return collectGarbage(deps, { retention, dryRun });
        return closingAfter(await traceStoreFromConfig(config), (store) =>
          withRegistry(storeLocation(config), (registry) =>
            collectGarbage({ ...deps, store, registry }, { retention, dryRun }),
          ),
        );
      };
      const report = await run();
      if (options.json) say(JSON.stringify(report, null, 2));
      else process.stdout.write(formatGcReport(report, storeLocation(config).postgresUrl !== null));
    });
}

export function formatGcReport(report: GcReport, postgres: boolean): string {
  const lines: string[] = [];
  const verb = report.dryRun ? 'would delete' : 'deleted';
  if (!report.journal && !report.rolloutFolders && !report.staging) {
    return 'No retention is configured: Rein keeps everything. Set retention.journal, retention.rolloutFolders or retention.staging (e.g. journal: 30d) for rein gc to delete what is older.\n';
  }
  if (report.dryRun) lines.push('Dry run: nothing was deleted (run rein gc without --dry-run to delete).');
  const keptLines = (kept: Record<string, ProtectedCounts>, unit: string) => {
    const reasons = PROTECTION_REASONS.filter((r) => kept[r]!.rollouts > 0);
    if (reasons.length === 0) return;
    lines.push('  kept though old enough:');
    for (const r of reasons) {
      const k = kept[r]!;
      lines.push(
        `    ${k.rollouts} ${unit} (${formatBytes(k.bytes)}) ${PROTECTION_LABELS[r]}: ${k.by.join(', ')}${k.rollouts > k.by.length ? ', …' : ''}`,
      );
    }
  };
  if (report.journal) {
    const { delete: d, retention, cutoff, oldestKept } = report.journal;
    lines.push(`journal (retention.journal ${retention}): finished rollouts last changed before ${cutoff}`);
    lines.push(
      `  ${verb} ${d.rollouts} rollouts: ${d.calls} calls, ${d.shadowCalls} shadow calls, ${d.events} events, ${formatBytes(d.bytes)}`,
    );
    keptLines(report.journal.protected, 'rollouts');
    lines.push(
      oldestKept
        ? `  oldest kept: ${oldestKept.id}, last changed ${oldestKept.updatedAt} (${PROTECTION_LABELS[oldestKept.reason]})`
        : `  oldest kept: none older than the cutoff`,
    );
    if (d.rollouts > 0) {
      lines.push(
        postgres
          ? '  (PostgreSQL reuses the freed space once autovacuum has run; VACUUM FULL gives it back to the disk)'
          : '  (SQLite reuses the freed pages; the file itself shrinks only with VACUUM)',
      );
    }
  }
  if (report.rolloutFolders) {
    const { delete: d, retention, cutoff } = report.rolloutFolders;
    lines.push(`rollout folders (retention.rolloutFolders ${retention}): last written before ${cutoff}`);
    lines.push(`  ${verb} ${d.folders} folders, ${formatBytes(d.bytes)}`);
    keptLines(report.rolloutFolders.protected, 'folders');
  }
  if (report.rolloutLogs) {
    const { delete: d, retention } = report.rolloutLogs;
    lines.push(
      `rollout logs in the artifact store (retention.rolloutFolders ${retention}): uploaded harness and verifier logs, by the same rule`,
    );
    lines.push(`  ${verb} the logs of ${d.rollouts} rollouts (${d.objects} objects), ${formatBytes(d.bytes)}`);
    keptLines(report.rolloutLogs.protected, 'rollouts');
  }
  if (report.staging) {
    const { delete: d, retention, cutoff } = report.staging;
    lines.push(
      `staging (retention.staging ${retention}): staged copies and leftover temporaries last written before ${cutoff}`,
    );
    lines.push(`  ${verb} ${d.entries} entries, ${formatBytes(d.bytes)}`);
  }
  lines.push(`${report.dryRun ? 'Would free' : 'Freed'} ${formatBytes(report.bytes)} in all.`);
  return `${lines.join('\n')}\n`;
}
