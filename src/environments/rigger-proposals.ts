import { canonicalJson } from '../rollouts/harness-spec.js';
import { percent, type Weakness } from './rigger-evidence.js';
import { variantId, variantSchema, type VariantSpec } from './variant-spec.js';

/**
 * The rigger's rule-based proposals: environment variants aimed at the weaknesses found, for
 * validation by fresh rollouts (validation.ts) before the curriculum mixes the kept ones into
 * training. The verifier never changes; only the environment's state, rules or observations.
 *
 * | weakness         | candidates, in order                         | so that                              |
 * |------------------|----------------------------------------------|--------------------------------------|
 * | tool_errors on T | rules.transientErrors {every: 3, tools: [T]} | calls of T fail once and succeed     |
 * |                  | then {every: 2, tools: [T]}; none when T is  | when repeated: reading the error and |
 * |                  | not one of the environment's tools           | retrying pays                        |
 * | gives_up         | rules.paging {pageSize: 1000}, then each     | the answer lies past the first page  |
 * |                  | declared stateParams entry as `state`        | or in another world: persisting pays |
 * | long_episodes    | observations.noise {lines: 3}, then          | reading what matters pays (they act  |
 * |                  | observations.reorder                         | on every tool; the why names the     |
 * |                  |                                              | tools long runs use most)            |
 * | task_failures    | each declared stateParams entry as `state`;  | the same tasks in other initial      |
 * |                  | none when the environment declares none      | conditions, some within reach        |
 * | format           | none: the output's format is the model's,    |                                      |
 * |                  | and strictFormat needs a pattern             |                                      |
 *
 * strictFormat and removeTool are never proposed: each needs knowledge of the tools (a format, an
 * equivalent tool) that only the environment's authors have; they declare such variants in config.
 *
 * Choice: round by round over the weaknesses in the order given (weaknesses() gives the most
 * severe first), each takes its next candidate that is new, until `max` proposals. A candidate is
 * new when no existing variant and no earlier proposal changes the same things (variantId, which
 * ignores the label), so a variant already declared under another name is never proposed again.
 */
export interface Proposal {
  variant: VariantSpec;
  aimedAt: Weakness;
  why: string;
}

/** What proposals may use of the environment: its tools, and the parameter sets its vary() accepts, when declared. */
export interface RiggedEnvironment {
  tools: string[];
  stateParams?: Record<string, unknown>[];
}

export interface ProposalOptions {
  /** Proposals at most (default 4): each costs validation rollouts. */
  max?: number;
}

export const DEFAULT_MAX_PROPOSALS = 4;

/**
 * variantId compares what two variants change *in one environment*; proposals and the existing
 * variants are of the same environment, so any fixed id compares them by content alone.
 */
const SAME_ENVIRONMENT = 'rigger';

type Changes = Omit<VariantSpec, 'name'>;
interface Candidate {
  changes: Changes;
  label: string;
  why: string;
}

/** Rule-based variants aimed at the weaknesses, never repeating an existing one; deterministic. */
export function proposeVariants(
  found: readonly Weakness[],
  environment: RiggedEnvironment,
  existing: readonly VariantSpec[],
  options: ProposalOptions = {},
): Proposal[] {
  const max = options.max ?? DEFAULT_MAX_PROPOSALS;
  if (!Number.isInteger(max) || max < 0)
    throw new RangeError(`rigger: "max" proposals must be a whole number ≥ 0, not ${max}`);
  const taken = new Set(existing.map((v) => variantId(SAME_ENVIRONMENT, v)));
  const names = new Set(existing.map((v) => v.name));
  const queues = found.map((weakness) => ({ weakness, candidates: candidatesFor(weakness, environment) }));
  const proposals: Proposal[] = [];
  while (proposals.length < max && queues.some((q) => q.candidates.length > 0)) {
    for (const queue of queues) {
      if (proposals.length >= max) break;
      const proposal = nextNew(queue, taken, names);
      if (proposal) proposals.push(proposal);
    }
  }
  return proposals;
}

/** The weaknesses no proposal is aimed at, each with the reason, for the run report. */
export function weaknessesWithoutProposal(
  found: readonly Weakness[],
  environment: RiggedEnvironment,
  proposals: readonly Proposal[],
): Array<{ weakness: Weakness; why: string }> {
  return (
    found
      // By kind and subject, not identity: the proposals may have been read back from the ledger.
      .filter(
        (weakness) =>
          !proposals.some((p) => p.aimedAt.kind === weakness.kind && p.aimedAt.subject === weakness.subject),
      )
      .map((weakness) => ({
        weakness,
        why:
          candidatesFor(weakness, environment).length === 0
            ? noRuleFits(weakness, environment)
            : 'every variant aimed at it already exists, or the cap on proposals was reached',
      }))
  );
}

function noRuleFits(weakness: Weakness, environment: RiggedEnvironment): string {
  switch (weakness.kind) {
    case 'tool_errors':
      return `"${weakness.subject}" is not one of the environment's tools (${environment.tools.join(', ')}), so its rules cannot change it`;
    case 'task_failures':
      return 'the environment declares no state parameters (stateParams) for other initial conditions';
    case 'format':
      return "the output's format is the model's, not the environment's; a stricter format needs a pattern only the environment's authors know";
    default:
      return 'no rule of the table fits it';
  }
}

/** The queue's next candidate that changes something no existing or earlier variant changes. */
function nextNew(
  queue: { weakness: Weakness; candidates: Candidate[] },
  taken: Set<string>,
  names: Set<string>,
): Proposal | null {
  while (queue.candidates.length > 0) {
    const candidate = queue.candidates.shift()!;
    const parsed = variantSchema.safeParse({ name: 'candidate', ...candidate.changes });
    if (!parsed.success) continue; // e.g. a tool name the schema refuses: no variant can name it
    const id = variantId(SAME_ENVIRONMENT, parsed.data);
    if (taken.has(id)) continue;
    taken.add(id);
    const name = freeName(candidate.label, id, names);
    names.add(name);
    return { variant: { ...parsed.data, name }, aimedAt: queue.weakness, why: candidate.why };
  }
  return null;
}

/** The label made a valid variant name; when another variant holds it, made unique with the id. */
function freeName(label: string, id: string, names: Set<string>): string {
  const clean = label.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '');
  const base = (clean || 'variant').slice(0, 64);
  if (!names.has(base)) return base;
  return `${base.slice(0, 64 - 9)}-${id.slice(2, 10)}`;
}

/** The rule table's candidates for one weakness, in order. */
function candidatesFor(weakness: Weakness, environment: RiggedEnvironment): Candidate[] {
  const states = environment.stateParams ?? [];
  switch (weakness.kind) {
    case 'tool_errors':
      return environment.tools.includes(weakness.subject) ? flakyTool(weakness) : [];
    case 'gives_up':
      return [pagedOutput(weakness), ...states.map((params) => otherState(weakness, params))];
    case 'long_episodes':
      return noisyObservations(weakness);
    case 'task_failures':
      return states.map((params) => otherState(weakness, params));
    case 'format':
      return [];
  }
}

function flakyTool(weakness: Weakness): Candidate[] {
  const tool = weakness.subject;
  return [3, 2].map((every) => ({
    changes: { rules: { transientErrors: { every, tools: [tool] } } },
    label: `flaky-${tool}-every-${every}`,
    why:
      `${tool} fails on ${percent(weakness.share)} of its calls and runs with such errors fail more often: ` +
      `here every ${every}${ordinalSuffix(every)} ${tool} call fails once and succeeds when repeated, ` +
      'so reading the error and retrying pays.',
  }));
}

const PAGE_SIZE = 1000;

function pagedOutput(weakness: Weakness): Candidate {
  return {
    changes: { rules: { paging: { pageSize: PAGE_SIZE } } },
    label: `paged-${PAGE_SIZE}`,
    why:
      `${percent(weakness.share)} of failures are give-ups: long tool output comes ${PAGE_SIZE} characters ` +
      'a page, so the answer can take asking for the next page and persisting pays.',
  };
}

function otherState(weakness: Weakness, params: Record<string, unknown>): Candidate {
  const shown = canonicalJson(params);
  const words = Object.entries(params)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, value]) => `${key}-${typeof value === 'string' ? value : canonicalJson(value)}`);
  const lesson =
    weakness.kind === 'gives_up'
      ? `${percent(weakness.share)} of failures are give-ups: the same tasks in other initial conditions (state ${shown}), so persisting is practised on other worlds.`
      : `${weakness.subject} fail every sample: the same tasks in other initial conditions (state ${shown}), so some instances come within reach under the same verifier.`;
  return {
    changes: { state: params },
    label: words.length > 0 ? `state-${words.join('-')}` : 'state-fresh',
    why: lesson,
  };
}

function noisyObservations(weakness: Weakness): Candidate[] {
  const used = weakness.tools.length > 0 ? `, mostly calling ${weakness.tools.join(' and ')}` : '';
  const finding = `${percent(weakness.share)} of solved runs take far more steps than the median solved run${used}`;
  return [
    {
      changes: { observations: { noise: { lines: 3 } } },
      label: 'noise-3',
      why: `${finding}: 3 distractor lines come before every tool output, so picking out what matters pays.`,
    },
    {
      changes: { observations: { reorder: true } },
      label: 'reordered',
      why: `${finding}: JSON output's keys and items come in another order, so reading by meaning rather than position pays.`,
    },
  ];
}

const ordinalSuffix = (n: number): string => (n === 1 ? 'st' : n === 2 ? 'nd' : n === 3 ? 'rd' : 'th');
