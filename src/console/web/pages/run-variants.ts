import { h, num, pct, table } from '../dom.js';
import type { IterationView } from '../types.js';

type Variants = NonNullable<IterationView['variants']>;
type Rigger = NonNullable<Variants['rigger']>;

/**
 * The run's environment, iteration by iteration: where training ran (the original and each variant, why, rollouts,
 * mean reward), the variants checked (kept or rejected, and why), and the rigger's weaknesses and proposals. Nothing
 * for a run without an environment.
 */
export function environmentSection(its: IterationView[]): HTMLElement[] {
  const withVariants = its.flatMap((i) => (i.variants ? [{ iteration: i.iteration, variants: i.variants }] : []));
  if (withVariants.length === 0) return [];
  const rows = <T>(pick: (v: Variants) => readonly T[] | undefined) =>
    withVariants.flatMap(({ iteration, variants }) => (pick(variants) ?? []).map((row) => ({ iteration, row })));
  const used = rows((v) => v.used);
  const checked = rows((v) => v.verdicts);
  const weaknesses = rows((v) => v.rigger?.weaknesses);
  const proposals = rows((v) => v.rigger?.proposals);
  const rigged = withVariants.some(({ variants }) => variants.rigger);
  return [
    h('h2', {}, 'Environment: where training ran'),
    table(
      ['It', 'Environment', 'Origin', 'Why', 'Rollouts', 'Solved', 'Mean reward'],
      used.map(({ iteration, row: u }) => [
        String(iteration),
        u.name,
        u.origin,
        u.why,
        String(u.rollouts),
        `${u.solved} of ${u.scored} scored`,
        num(u.meanReward),
      ]),
      { id: 'variants-used' },
    ),
    h('h2', {}, 'Environment: variants checked'),
    checked.length === 0
      ? h('p', { class: 'muted' }, 'No variant was checked yet.')
      : table(
          ['It', 'Variant', 'Origin', 'Verdict', 'Reason', 'Changes', 'Why'],
          checked.map(({ iteration, row: v }) => [
            String(iteration),
            v.name,
            v.origin,
            h('span', { class: v.kept ? 'pass' : 'fail', 'data-kept': String(v.kept) }, v.kept ? 'kept' : 'rejected'),
            v.reason,
            v.changes,
            v.why,
          ]),
          { id: 'variant-checks' },
        ),
    ...(rigged ? riggerTables(weaknesses, proposals) : []),
  ];
}

/** The rigger's recurring weaknesses per iteration (kind, subject, evidence, share) and the variants it proposed. */
function riggerTables(
  weaknesses: Array<{ iteration: number; row: Rigger['weaknesses'][number] }>,
  proposals: Array<{ iteration: number; row: Rigger['proposals'][number] }>,
): HTMLElement[] {
  return [
    h('h2', {}, "Environment: the rigger's weaknesses"),
    weaknesses.length === 0
      ? h('p', { class: 'muted' }, 'No recurring weakness with enough support.')
      : table(
          ['It', 'Kind', 'Subject', 'Evidence', 'Share'],
          weaknesses.map(({ iteration, row: w }) => [String(iteration), w.kind, w.subject, w.detail, pct(w.share)]),
          { id: 'weaknesses' },
        ),
    ...(proposals.length === 0
      ? []
      : [
          table(
            ['It', 'Proposed', 'Aimed at', 'Why'],
            proposals.map(({ iteration, row: p }) => [
              String(iteration),
              p.name,
              `${p.aimedAt.kind} ${p.aimedAt.subject}`,
              p.why,
            ]),
            { id: 'proposals' },
          ),
        ]),
  ];
}
