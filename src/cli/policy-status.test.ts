import { describe, expect, it } from 'vitest';
import { policiesTable, type PolicyView } from './policy-status.js';

const view = (version: string, more: Partial<PolicyView> = {}): PolicyView =>
  ({
    version,
    parent: 'v0',
    runId: 'nightly-2026-12-05',
    iteration: 2,
    format: 'lora',
    baseCheckpointUri: 's3://rein-artifacts/models/Qwen3-0.6B/checkpoint-final',
    batchContentHash: 'a'.repeat(64),
    createdAt: '2026-12-05T14:03:11.123Z',
    aliases: [],
    state: 'undecided (gate insufficient)',
    decision: undefined,
    heldout: '41.7% (production v0 45.8%)',
    trainer: 'loss -0.0123, approxKl 0.000412, clipFraction 0.0312, entropy 1.23, gradNorm 0.871, steps 16',
    ...more,
  }) as PolicyView;

describe('rein policies as a table', () => {
  const policies = [view('nightly-2026-12-05.v2'), view('v0', { aliases: ['production'], state: 'promoted' })];

  it('fits a terminal by default: version, aliases, status, held-out success, when', () => {
    const lines = policiesTable(policies, false).split('\n');
    expect(lines[0]).toMatch(/^version +aliases +status +held-out success +registered$/);
    expect(lines[1]).toBe(
      'nightly-2026-12-05.v2  -           undecided (gate insufficient)  41.7% (production v0 45.8%)  2026-12-05 14:03',
    );
    // The longest status and a 21-character version: ~110 characters, where every column made ~300.
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(112);
  });

  it('shows every column with --wide', () => {
    const [header, row] = policiesTable(policies, true).split('\n');
    expect(header).toMatch(
      /^version +aliases +parent +status +weights +run +iteration +batch +held-out success +trainer +registered$/,
    );
    expect(row).toContain('lora on s3://rein-artifacts/models/Qwen3-0.6B/checkpoint-final');
    expect(row).toContain('loss -0.0123, approxKl 0.000412');
    expect(row).toMatch(/2026-12-05 14:03:11$/);
  });
});
