/**
 * bench:envharness's figures from the held-out rollouts: success gains with the gate's paired
 * bootstrap interval (tasks resampled, so seeds pooled by task stay paired), steps per solved
 * task, and the share of failures that are give-ups (isGiveUp), so that fewer steps is read right.
 */
import { isGiveUp, typicalSolvedSteps } from '../src/environments/rigger-evidence.js';
import { pairedBootstrap, type PairedValue } from '../src/gate/paired-tests.js';
import type { HeldoutRollout } from './envharness-journal.js';

/** A gain in points with its 95% interval, over `tasks` distinct tasks (`pairs` pairs in all). */
export interface Gain {
  points: number;
  interval95: [number, number];
  tasks: number;
  pairs: number;
}

const points = (x: number) => Math.round(1000 * x) / 10;
const success = (r: HeldoutRollout | undefined) => (r?.success === true ? 1 : 0);

/** Candidate − incumbent over pairs keyed by task, with the interval the release gate computes. */
export function gainOf(pairs: PairedValue[]): Gain {
  const { gain, lower, upper } = pairedBootstrap(pairs, { resamples: 2000, confidence: 0.95, seed: 1 });
  return {
    points: points(gain),
    interval95: [points(lower), points(upper)],
    tasks: new Set(pairs.map((p) => p.task)).size,
    pairs: pairs.length,
  };
}

/** One seed's held-out replays of one arm: the base's and the final production version's, by task. */
export interface ArmReplays {
  base: HeldoutRollout[];
  final: HeldoutRollout[];
}

const byTask = (rollouts: HeldoutRollout[]) => new Map(rollouts.map((r) => [r.taskId, r]));

/** Per task, final success − base success (−1, 0, 1): what the arm gained on it. */
export function taskGains(replays: ArmReplays): Map<string, number> {
  const base = byTask(replays.base);
  return new Map(replays.final.map((r) => [r.taskId, success(r) - success(base.get(r.taskId))]));
}

/** Final over base, pairs keyed by task (several seeds' pairs of one task resample together). */
export function armGain(seeds: ArmReplays[]): Gain {
  return gainOf(
    seeds.flatMap((replays) => {
      const base = byTask(replays.base);
      return replays.final.map((r) => ({
        task: r.taskId,
        incumbent: success(base.get(r.taskId)),
        candidate: success(r),
      }));
    }),
  );
}

/** The variants arm's per-task gain minus the plain arm's, same seed paired with same seed, keyed by task. */
export function gainDifference(pairs: Array<{ plain: ArmReplays; variants: ArmReplays }>): Gain {
  return gainOf(
    pairs.flatMap(({ plain, variants }) => {
      const plainGains = taskGains(plain);
      return [...taskGains(variants)].flatMap(([task, gain]) => {
        const other = plainGains.get(task);
        return other === undefined ? [] : [{ task, incumbent: other, candidate: gain }];
      });
    }),
  );
}

export interface StepsAndGiveUps {
  rollouts: number;
  solved: number;
  /** Mean tool calls (environment events) per solved rollout; model calls when a rollout lacks the event. */
  stepsPerSolved: number | null;
  stepsSource: 'environment tool calls' | 'model calls';
  /** Failures: scored and not solved. */
  failures: number;
  /** Mean tool calls per failed rollout (model calls without the event), beside stepsPerSolved. */
  stepsPerFailure: number | null;
  giveUps: number;
  giveUpShare: number | null;
  /** Give-ups with no final answer (ran out of turns or stopped): the rest answered too early or refused. */
  giveUpsUnanswered: number;
  /** Failures that made no tool call (answered from memory, or nothing). */
  failuresWithoutToolCall: number;
  /** Failures of tasks no held-out run of the bench solved: no typical steps for isGiveUp's rule 3. */
  failuresWithoutYardstick: number;
}

/**
 * Steps and give-ups over held-out rollouts. `typical` is each task's median tool calls over its
 * solved held-out rollouts (typicalSolvedSteps), from every replay the bench ran, so both arms
 * are judged against the same yardstick.
 */
export function stepsAndGiveUps(rollouts: HeldoutRollout[], typical: Map<string, number>): StepsAndGiveUps {
  const withEvents = rollouts.every((r) => r.toolCalls !== null);
  const stepsOf = (r: HeldoutRollout) => (withEvents ? (r.toolCalls ?? 0) : r.modelCalls);
  const solved = rollouts.filter((r) => r.success === true);
  const failures = rollouts.filter((r) => r.success === false);
  const giveUps = failures.filter((r) =>
    isGiveUp(
      {
        success: r.success,
        failureClass: r.failureClass,
        steps: r.toolCalls,
        toolErrors: r.toolErrors,
        answered: r.answered,
        refused: r.refused,
      },
      typical.get(r.taskId) ?? null,
    ),
  );
  const mean = (xs: number[]) =>
    xs.length === 0 ? null : Math.round((100 * xs.reduce((a, b) => a + b, 0)) / xs.length) / 100;
  return {
    rollouts: rollouts.length,
    solved: solved.length,
    stepsPerSolved: mean(solved.map(stepsOf)),
    stepsSource: withEvents ? 'environment tool calls' : 'model calls',
    failures: failures.length,
    stepsPerFailure: mean(failures.map(stepsOf)),
    giveUps: giveUps.length,
    giveUpShare: failures.length === 0 ? null : Math.round((100 * giveUps.length) / failures.length) / 100,
    giveUpsUnanswered: giveUps.filter((r) => !r.answered).length,
    failuresWithoutToolCall: failures.filter((r) => r.toolCalls === 0).length,
    failuresWithoutYardstick: failures.filter((r) => !typical.has(r.taskId)).length,
  };
}

/** The yardstick for isGiveUp's rule 3: typicalSolvedSteps over all the held-out rollouts given. */
export function typicalSteps(rollouts: HeldoutRollout[]): Map<string, number> {
  return typicalSolvedSteps(rollouts.map((r) => ({ taskId: r.taskId, success: r.success, steps: r.toolCalls })));
}

/** Held-out success share of a replay, in percent (one decimal). */
export function successPercent(rollouts: HeldoutRollout[]): number {
  return rollouts.length === 0 ? 0 : points(rollouts.filter((r) => r.success === true).length / rollouts.length);
}
