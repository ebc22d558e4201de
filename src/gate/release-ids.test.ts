import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decisionIdFor, heldoutBatchId } from './release-ids.js';

const hex16 = fc.stringMatching(/^[0-9a-f]{16}$/);
const harness = hex16.map((h) => `h-${h}`);

describe('held-out replay and decision ids', () => {
  it('differ between harnesses with the same version and config, and are the same for the same harness', () => {
    fc.assert(
      fc.property(hex16, harness, harness, (config, h1, h2) => {
        fc.pre(h1.slice(0, 10) !== h2.slice(0, 10));
        expect(heldoutBatchId('v1', config, h1)).not.toBe(heldoutBatchId('v1', config, h2));
        expect(decisionIdFor('v2', 'v1', config, 4, 2, h1)).not.toBe(decisionIdFor('v2', 'v1', config, 4, 2, h2));
        expect(heldoutBatchId('v1', config, h1)).toBe(heldoutBatchId('v1', config, h1));
      }),
    );
  });

  it('stay as they were for inputs made before the harness was in them', () => {
    expect(heldoutBatchId('v1', '0123456789abcdef')).toBe('heldout.v1.0123456789ab');
    expect(heldoutBatchId('v1', '0123456789abcdef', 'h-fedcba9876543210')).toBe('heldout.v1.0123456789ab.h-fedcba98');
    expect(decisionIdFor('v2', 'v1', '0123456789abcdef', 4, 2)).toBe('v2.vs.v1.0123456789ab.4x2');
  });
});
