import { z } from 'zod';
import { UNSCORED_FAILURE_CLASSES, type FailureClass } from '../rollouts/failure-classes.js';
import { median, percent, type RolloutEvidence, type Weakness, type WeaknessKind } from './rigger-evidence.js';

/**
 * The rigger's diagnosis: recurring weaknesses in the last iterations' training rollouts, each
 * with the numbers behind it. Only scored rollouts count (an unscored one failed on Rein's
 * machinery, not on the policy). A weakness is kept only with enough support: at least
 * `minCount` of what its kind counts and at least `minShare` of what that is a share of, so a
 * single unlucky rollout never sends the rigger after a variant.
 *
 * | kind          | count                          | a share of            | severity: scored rollouts' share |
 * |---------------|--------------------------------|-----------------------|----------------------------------|
 * | tool_errors   | failed calls of the tool (*)   | the tool's calls      | failures of runs with its errors |
 * |               |                                |                       | beyond the others' failure rate  |
 * | gives_up      | failures that were give-ups    | failures              | the give-ups                     |
 * | long_episodes | solved runs over longFactor ×  | solved runs (steps    | ½ × the long runs                |
 * |               | the median solved run's steps  | known)                |                                  |
 * | task_failures | tasks failing every sample     | tasks with that many  | the rollouts of those tasks      |
 * |               | (≥ minSamplesPerTask samples)  | samples               |                                  |
 * | format        | failures of a malformed-output | failures              | those failures                   |
 * |               | class (MALFORMED_OUTPUT_...)   |                       |                                  |
 *
 * (*) kept only when runs that hit its errors fail more often than the runs that did not (or,
 * when every run hit them, fail at least `minShare` of the time).
 */
export const weaknessOptionsSchema = z
  .strictObject({
    minCount: z.number().int().min(1).default(3).describe('Least count a weakness needs'),
    minShare: z.number().min(0).max(1).default(0.2).describe('Least share a weakness needs'),
    longFactor: z.number().min(1).default(2).describe('A solved run is long past this many times the median'),
    minSamplesPerTask: z.number().int().min(1).default(2).describe('Samples a task needs to count as always failing'),
  })
  .prefault({});

export type WeaknessOptions = z.input<typeof weaknessOptionsSchema>;
type Thresholds = z.output<typeof weaknessOptionsSchema>;

/** Failure classes that say the model's output was malformed (failure-classes.ts: `policy_output`). */
export const MALFORMED_OUTPUT_CLASSES: readonly FailureClass[] = ['policy_output'];

const KIND_ORDER: readonly WeaknessKind[] = ['tool_errors', 'gives_up', 'task_failures', 'format', 'long_episodes'];

/** Recurring weaknesses in the evidence, most severe first; deterministic for the same evidence in any order. */
export function weaknesses(evidence: readonly RolloutEvidence[], options?: WeaknessOptions): Weakness[] {
  const parsed = weaknessOptionsSchema.safeParse(options);
  if (!parsed.success)
    throw new RangeError(
      `rigger options: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(options)'}: ${i.message}`).join('; ')}`,
    );
  const thresholds = parsed.data;
  const scored = evidence
    .filter(
      (r) => r.success !== null && !(UNSCORED_FAILURE_CLASSES as readonly string[]).includes(r.failureClass ?? ''),
    )
    .sort(byRollout);
  if (scored.length === 0) return [];
  const found = [
    ...toolErrors(scored, thresholds),
    ...givesUp(scored),
    ...longEpisodes(scored, thresholds),
    ...taskFailures(scored, thresholds),
    ...format(scored),
  ];
  return found
    .filter((w) => w.count >= thresholds.minCount && w.share >= thresholds.minShare)
    .sort(
      (a, b) =>
        b.severity - a.severity ||
        KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind) ||
        compareText(a.subject, b.subject),
    );
}

const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const byRollout = (a: RolloutEvidence, b: RolloutEvidence) =>
  compareText(a.taskId, b.taskId) || a.iteration - b.iteration;
const failed = (runs: readonly RolloutEvidence[]) => runs.filter((r) => r.success === false).length;

const weakness = (w: Omit<Weakness, 'tools' | 'tasks'> & Partial<Pick<Weakness, 'tools' | 'tasks'>>): Weakness => ({
  tools: [],
  tasks: [],
  ...w,
});

/** Tools whose calls fail often, when runs that hit those failures fail more than the runs that did not. */
function toolErrors(scored: readonly RolloutEvidence[], { minCount, minShare }: Thresholds): Weakness[] {
  const totals = new Map<string, { calls: number; errors: number }>();
  for (const run of scored)
    for (const [tool, { calls, errors }] of Object.entries(run.toolCalls)) {
      const total = totals.get(tool) ?? { calls: 0, errors: 0 };
      totals.set(tool, { calls: total.calls + calls, errors: total.errors + errors });
    }
  return [...totals.keys()].sort(compareText).flatMap((tool) => {
    const { calls, errors } = totals.get(tool)!;
    if (calls === 0 || errors < minCount || errors / calls < minShare) return [];
    const hit = scored.filter((r) => (r.toolCalls[tool]?.errors ?? 0) > 0);
    const spared = scored.filter((r) => (r.toolCalls[tool]?.errors ?? 0) === 0);
    const hitRate = failed(hit) / hit.length;
    const sparedRate = spared.length > 0 ? failed(spared) / spared.length : null;
    // With no run spared there is nothing to compare: the failures must be common on their own.
    if (sparedRate === null ? hitRate < minShare : hitRate <= sparedRate) return [];
    const excess = failed(hit) - (sparedRate ?? 0) * hit.length;
    const comparison =
      sparedRate === null
        ? 'every run hit them'
        : `the others ${percent(sparedRate)} (${failed(spared)} of ${spared.length})`;
    return [
      weakness({
        kind: 'tool_errors',
        subject: tool,
        count: errors,
        share: errors / calls,
        detail:
          `${errors} of ${calls} ${tool} calls failed (${percent(errors / calls)}); runs with such errors ` +
          `failed ${percent(hitRate)} (${failed(hit)} of ${hit.length}), ${comparison}.`,
        severity: excess / scored.length,
        tools: [tool],
      }),
    ];
  });
}

/** Failures that were give-ups (RolloutEvidence.gaveUp), against honest failures. */
function givesUp(scored: readonly RolloutEvidence[]): Weakness[] {
  const failures = scored.filter((r) => r.success === false);
  const gaveUp = failures.filter((r) => r.gaveUp).length;
  if (failures.length === 0 || gaveUp === 0) return [];
  return [
    weakness({
      kind: 'gives_up',
      subject: 'runs',
      count: gaveUp,
      share: gaveUp / failures.length,
      detail:
        `${gaveUp} of ${failures.length} failures (${percent(gaveUp / failures.length)}) were give-ups ` +
        `(a refusal, no answer, or under half the steps solved runs take); ${failures.length - gaveUp} failed after trying.`,
      severity: gaveUp / scored.length,
    }),
  ];
}

/** Solved runs far longer than the median solved run, and the tools they spend their calls on. */
function longEpisodes(scored: readonly RolloutEvidence[], { longFactor }: Thresholds): Weakness[] {
  const solved = scored.filter((r): r is RolloutEvidence & { steps: number } => r.success === true && r.steps !== null);
  const typical = median(solved.map((r) => r.steps));
  if (solved.length === 0 || typical <= 0) return [];
  const long = solved.filter((r) => r.steps > longFactor * typical);
  if (long.length === 0) return [];
  const usage = new Map<string, number>();
  for (const run of long)
    for (const [tool, { calls }] of Object.entries(run.toolCalls)) usage.set(tool, (usage.get(tool) ?? 0) + calls);
  const mostUsed = [...usage]
    .filter(([, calls]) => calls > 0)
    .sort(([a, x], [b, y]) => y - x || compareText(a, b))
    .slice(0, 2);
  const longest = Math.max(...long.map((r) => r.steps));
  const tools = mostUsed.map(([tool, calls]) => `${tool} (${calls} calls)`).join(', ');
  return [
    weakness({
      kind: 'long_episodes',
      subject: 'solved runs',
      count: long.length,
      share: long.length / solved.length,
      detail:
        `${long.length} of ${solved.length} solved runs (${percent(long.length / solved.length)}) took over ` +
        `${longFactor}× the median solved run's ${typical} steps (up to ${longest})` +
        (tools ? `; they call ${tools} most.` : '.'),
      severity: (0.5 * long.length) / scored.length,
      tools: mostUsed.map(([tool]) => tool),
    }),
  ];
}

/** Tasks that failed in every one of enough samples, as one group. */
function taskFailures(scored: readonly RolloutEvidence[], { minSamplesPerTask }: Thresholds): Weakness[] {
  const byTask = new Map<string, RolloutEvidence[]>();
  for (const run of scored) byTask.set(run.taskId, [...(byTask.get(run.taskId) ?? []), run]);
  const sampled = [...byTask].filter(([, runs]) => runs.length >= minSamplesPerTask);
  const hopeless = sampled.filter(([, runs]) => failed(runs) === runs.length);
  if (hopeless.length === 0) return [];
  const tasks = hopeless.map(([taskId]) => taskId).sort(compareText);
  const rollouts = hopeless.reduce((sum, [, runs]) => sum + runs.length, 0);
  const named = tasks.slice(0, 5).join(', ') + (tasks.length > 5 ? `, and ${tasks.length - 5} more` : '');
  return [
    weakness({
      kind: 'task_failures',
      subject: `${tasks.length} task${tasks.length === 1 ? '' : 's'}`,
      count: tasks.length,
      share: tasks.length / sampled.length,
      detail:
        `${tasks.length} of ${sampled.length} tasks with ${minSamplesPerTask}+ samples ` +
        `(${percent(tasks.length / sampled.length)}) failed every sample (${rollouts} rollouts): ${named}.`,
      severity: rollouts / scored.length,
      tasks,
    }),
  ];
}

/** Failures whose class says the model's output was malformed. */
function format(scored: readonly RolloutEvidence[]): Weakness[] {
  const failures = scored.filter((r) => r.success === false);
  return MALFORMED_OUTPUT_CLASSES.flatMap((failureClass) => {
    const count = failures.filter((r) => r.failureClass === failureClass).length;
    if (count === 0) return [];
    return [
      weakness({
        kind: 'format',
        subject: failureClass,
        count,
        share: count / failures.length,
        detail: `${count} of ${failures.length} failures (${percent(count / failures.length)}) were ${failureClass}: output the harness could not parse.`,
        severity: count / scored.length,
      }),
    ];
  });
}

/** The weaknesses as a short Markdown table for the run report. */
export function weaknessTable(found: readonly Weakness[]): string {
  if (found.length === 0) return 'No recurring weakness with enough support.';
  const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  return [
    '| kind | subject | evidence | share |',
    '|---|---|---|---|',
    ...found.map((w) => `| ${w.kind} | ${cell(w.subject)} | ${cell(w.detail)} | ${percent(w.share)} |`),
  ].join('\n');
}
