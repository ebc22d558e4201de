import type { RunReport } from '../client/runs.js';
import { discordantPairs, mcnemarExactP } from '../gate/paired-tests.js';
import type { RunStatus } from '../../workflows/index.js';
import { formatTable, wrapLine } from '../text-table.js';
import { variantsBlock, type IterationVariantsReport } from './variants-format.js';

// How a run's progress lines and its final table read.

export const STAGE_NAMES: Record<string, string> = {
  'heldout-base': 'held-out replay of the starting policy',
  rollouts: 'training rollouts',
  batch: 'building the batch',
  update: 'policy update',
  heldout: 'held-out replay of the candidate',
  'release-replay': 'held-out replay of the candidate and of production',
  gate: 'release gate',
  promote: 'promotion',
  'heldout-production': 'held-out replay of production',
};

export const formatReward = (value: number | null | undefined) =>
  value === null || value === undefined ? '-' : value.toFixed(3);

/** An iteration as the run status reports it, with its environment variants when the run has an environment. */
type ReportedIteration = RunStatus['iterations'][number] & { variants?: IterationVariantsReport };

/**
 * The iteration's line, then (when its run has an environment) its variants block: where training
 * ran, the variants checked, and the rigger's weaknesses and proposals.
 */
export function iterationLine(it: ReportedIteration): string {
  return [iterationHeadline(it), ...variantsBlock(it.variants)].join('\n');
}

function iterationHeadline(it: RunStatus['iterations'][number]): string {
  if (it.failed) return `iteration ${it.iteration}: failed (${it.failed})`;
  const failures =
    it.failures && Object.keys(it.failures).length > 0 ? `; failed rollouts: ${failuresByStage(it.failures)}` : '';
  return `iteration ${it.iteration}: ${it.candidate ?? '-'}  train mean reward ${formatReward(it.meanReward)}, held-out ${formatReward(it.heldoutMeanReward)}${failures}${staleSamples(it)}${it.gate ? `; gate ${gateLabel(it.gate)}` : ''}`;
}

/**
 * "; sampled from run.v1 (rollouts by versions behind: 1 x 96), importance ratio max 1.31, masked
 * 2.0%": only when the samples were stale.
 */
function staleSamples(it: RunStatus['iterations'][number]): string {
  const samples = it.samples;
  const behind = Object.entries(samples?.keptByVersionsBehind ?? {}).filter(([n]) => n !== '0');
  if (!samples || behind.length === 0) return '';
  const importance = samples.importance
    ? `, importance ratio max ${samples.importance.ratioMax.toFixed(2)}, masked ${(100 * samples.importance.maskedFraction).toFixed(1)}%`
    : '';
  return `; sampled from ${samples.sampledFrom} (rollouts by versions behind: ${behind.map(([n, count]) => `${n} x ${count}`).join(', ')})${importance}`;
}

/**
 * The asynchronous schedule at a glance: the iteration that updates and replays, beside the next
 * iteration's rollouts (and the version they sample); null when nothing overlaps.
 */
export function pipelineLine(status: RunStatus): string | null {
  const ahead = status.rolloutsAhead;
  if (!ahead) return null;
  return `pipeline: iteration ${ahead.iteration - 1} trains ${status.policyVersion} (batch, update, held-out) | iteration ${ahead.iteration}'s rollouts sample ${ahead.policyVersion} (${ahead.workflowId})`;
}

/** "harness 2, infrastructure 1": failed rollouts by failure class, most first. */
export function classes(byClass: Record<string, number>): string {
  return Object.entries(byClass)
    .sort(([a, x], [b, y]) => y - x || a.localeCompare(b))
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
}

/** "training rollouts harness 2; held-out replay of the candidate harness 1": failed rollouts by class per stage. */
export function failuresByStage(byStage: Record<string, Record<string, number>>): string {
  return Object.entries(byStage)
    .map(([stage, byClass]) => `${STAGE_NAMES[stage] ?? stage} ${classes(byClass)}`)
    .join('; ');
}

function gateLabel(gate: NonNullable<RunStatus['iterations'][number]['gate']>): string {
  if (gate.verdict === 'insufficient')
    return `INSUFFICIENT EVIDENCE against ${gate.incumbent}, not promoted (${gate.reasons.join(' ')}) — \`rein decision ${gate.decisionId}\``;
  if (gate.verdict === 'fail')
    return `FAIL against ${gate.incumbent} (${gate.reasons.join(' ')}) — \`rein decision ${gate.decisionId}\``;
  return gate.promoted
    ? `pass, promoted over ${gate.incumbent}`
    : `pass against ${gate.incumbent} (not promoted: gate.autoPromote is off)`;
}

/**
 * The final table: each iteration, then the base and the final candidate on the same held-out tasks. With a terminal
 * `width`, the tables leave out what does not fit (saying so) and the prose wraps.
 */
export function formatRunSummary(report: RunReport, width?: number): string {
  const lines = runStateLines(report);
  const status = report.status;
  if (status) {
    if (status.iterations.length > 0) lines.push('', iterationTable(status.iterations, width));
    lines.push(...failureReasonLines(status.iterations));
    lines.push(...environmentBlocks(status.iterations));
    lines.push(...heldoutComparison(status, width));
  }
  const fitted = lines.flatMap((line) => line.split('\n').flatMap((l) => (isTableLine(l) ? [l] : wrapLine(l, width))));
  return `${fitted.join('\n')}\n`;
}

/** A line of a table (columns two spaces apart): fitted by leaving columns out, never wrapped. */
const isTableLine = (line: string) => /\S {2,}\S/.test(line.trimStart());

/** Where the run stands, its last continuation, and how to continue it if it ended. */
function runStateLines(report: RunReport): string[] {
  const lines: string[] = [];
  const status = report.status;
  // The run's own state is the last it reported; a run that failed or was ended did not report that.
  const ended = ['FAILED', 'TERMINATED', 'CANCELLED', 'TIMED_OUT'].includes(report.execution);
  lines.push(
    `run ${report.runId}: ${ended ? report.execution.toLowerCase().replace('_', ' ') : (status?.state ?? report.execution.toLowerCase())}${report.problem ? ` (${report.problem})` : ''}`,
  );
  const lastResume = report.resumes.at(-1);
  if (lastResume) {
    const times = report.resumes.length === 1 ? 'once' : `${report.resumes.length} times`;
    lines.push(
      `continued ${times}; last from iteration ${lastResume.fromIteration} with ${lastResume.policyVersion} after it ${lastResume.previousStatus.toLowerCase().replace('_', ' ')} (${lastResume.reason}) at ${lastResume.at}`,
    );
  }
  if (ended) lines.push(`\`rein resume ${report.runId}\` continues it from its first unfinished iteration.`);
  return lines;
}

/** One row per iteration: its policy, rewards, gate verdict and failed rollouts. */
function iterationTable(iterations: RunStatus['iterations'], width: number | undefined): string {
  const verdict = (it: RunStatus['iterations'][number]) =>
    it.gate ? `${it.gate.verdict}${it.gate.promoted ? ', promoted' : ''}` : '-';
  const failed = (it: RunStatus['iterations'][number]) =>
    it.failures && Object.keys(it.failures).length > 0 ? failuresByStage(it.failures) : '-';
  const rows = iterations.map((it) => [
    String(it.iteration),
    it.candidate ?? (it.failed ? `failed: ${it.failed}` : '-'),
    formatReward(it.meanReward),
    formatReward(it.heldoutMeanReward),
    verdict(it),
    failed(it),
  ]);
  return formatTable(['iteration', 'policy', 'train reward', 'held-out reward', 'gate', 'failed rollouts'], rows, {
    width,
    dropFirst: [5, 3],
    more: 'see --json',
  });
}

/** Why rollouts failed: one reason per stage and class, of the latest iteration that has any. */
function failureReasonLines(iterations: RunStatus['iterations']): string[] {
  const latest = iterations.findLast((it) => Object.keys(it.failureReasons ?? {}).length > 0);
  if (!latest?.failureReasons) return [];
  return [
    '',
    `Why rollouts failed in iteration ${latest.iteration} (one rollout's reason per class):`,
    ...Object.entries(latest.failureReasons).flatMap(([stage, byClass]) =>
      Object.entries(byClass).map(
        ([failureClass, reason]) => `  ${STAGE_NAMES[stage] ?? stage}, ${failureClass}: ${reason}`,
      ),
    ),
  ];
}

/** Per iteration with variants: the environments its training ran in, the checks, the rigger's findings. */
function environmentBlocks(iterations: readonly ReportedIteration[]): string[] {
  return iterations.flatMap((it) => {
    const block = variantsBlock(it.variants);
    return block.length === 0 ? [] : ['', `iteration ${it.iteration}, environment:`, ...block];
  });
}

/**
 * The base, production and the last candidate on the held-out tasks both replays scored, with the
 * paired test of the final policy against the base; nothing before the first held-out replay.
 */
function heldoutComparison(status: RunStatus, width: number | undefined): string[] {
  const heldout = status.heldout;
  if (!heldout?.latest) return [];
  const { base, latest } = heldout;
  // "final" is what production serves; runs from before the run kept it know it only when the last candidate was
  // promoted.
  const lastGate = status.iterations.filter((i) => i.gate).at(-1)?.gate;
  const production =
    heldout.production ??
    (lastGate?.promoted && lastGate && status.iterations.at(-1)?.candidate === latest.policyVersion
      ? latest
      : undefined);
  // What the run changed: production when it moved off the base, else the last candidate (never the base
  // against itself).
  const final = production && production.policyVersion !== base.policyVersion ? production : latest;
  // Only tasks scored in both replays are compared; a task a fault cost one side is set aside.
  const tasks = Object.keys(base.meanRewardByTask).filter((t) => t in final.meanRewardByTask);
  const setAside =
    new Set([...Object.keys(base.meanRewardByTask), ...Object.keys(final.meanRewardByTask)]).size - tasks.length;
  const byTask = (r: typeof base) => Object.fromEntries(tasks.map((t) => [t, r.meanRewardByTask[t] as number]));
  const success = (r: typeof base) =>
    tasks.filter((t) => ((r.meanRewardByTask[t] ?? 0) as number) > 0).length / Math.max(1, tasks.length);
  const { gained, lost } = discordantPairs(byTask(base), byTask(final));
  const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
  const row = (label: string, r: typeof base, note: string) => [
    label,
    r.policyVersion,
    percent(success(r)),
    formatReward(r.meanReward),
    r.byFailureClass ? classes(r.byFailureClass) : '-',
    note,
  ];
  const candidateGate = status.iterations.find((i) => i.candidate === latest.policyVersion)?.gate;
  const rows = [row('base', base, 'starting policy')];
  if (production) rows.push(row('final', production, 'production'));
  if (production?.policyVersion !== latest.policyVersion)
    rows.push(
      row('last candidate', latest, candidateGate ? `not promoted (gate ${candidateGate.verdict})` : 'not promoted'),
    );
  const lines = [
    '',
    formatTable([`held-out, ${tasks.length} tasks`, 'policy', 'success', 'mean reward', 'failed rollouts', ''], rows, {
      width,
      dropFirst: [4, 3],
      more: 'see --json',
    }),
    `${final === production ? 'production' : 'last candidate'} ${final.policyVersion} against the base ${base.policyVersion}: ${gained.length} tasks gained, ${lost.length} lost (paired by task); exact McNemar p = ${mcnemarExactP(gained.length, lost.length).toExponential(1)}`,
  ];
  if (setAside > 0)
    lines.push(
      `${setAside} held-out tasks set aside: not scored in one of the replays (lost to a fault, not failed by a policy)`,
    );
  return lines;
}
