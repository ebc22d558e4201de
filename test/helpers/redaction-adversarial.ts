/**
 * For each default redaction rule, text units that make a backtracking engine stall when repeated:
 * the rule's prefix, and near-misses of a full match (a backtracking engine rescans the rest of
 * the text from every occurrence; 90k characters of "rk-" took 15 s).
 */
export const ADVERSARIAL_UNITS: Record<string, string[]> = {
  'bearer-token': ['Bearer ', 'Bearer abcdefgh '],
  'openai-key': ['sk-', 'sk-abcdefghijklmnopq '],
  'rollout-key': ['rk-', 'rk-a.1.', 'rk-a.1.b'],
  'verifier-key': ['vk-', 'vk-a.', 'vk-a.b'],
  'aws-access-key': ['AKIA', 'AKIAAAAAAAAAAAAAAAAA_'],
  'github-token': ['ghp_', `ghp_${'a'.repeat(29)}_`],
  'private-key': ['-----BEGIN PRIVATE KEY-----', '-----BEGIN '],
};

/** `unit` repeated to exactly `length` characters. */
export function repeatedTo(unit: string, length: number): string {
  return unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
}
