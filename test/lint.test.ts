import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');
const fixtures = path.join(root, 'test/fixtures/lint');

async function lint(file: string): Promise<string[]> {
  // The fixtures are ignored by `npm run lint`; here they are linted with the project's config.
  const eslint = new ESLint({ cwd: root, ignore: false });
  const [result] = await eslint.lintFiles([path.join(fixtures, file)]);
  return (result?.messages ?? []).map((m) => `${m.ruleId ?? 'fatal'}: ${m.message}`);
}

describe('the lint step', () => {
  it('rejects Node built-ins in workflow code', async () => {
    const messages = await lint('workflows/reads-file.ts');
    expect(messages).toEqual([expect.stringMatching(/^no-restricted-imports: .*node:fs.*deterministic/)]);
  });

  it('rejects value imports of activities in workflow code', async () => {
    const messages = await lint('workflows/calls-activity-directly.ts');
    expect(messages).toEqual([expect.stringMatching(/^no-restricted-imports: .*import type/)]);
  });

  it('accepts activities reached through proxyActivities with a type import', async () => {
    expect(await lint('workflows/proxies-activity.ts')).toEqual([]);
  });

  it('rejects floating promises', async () => {
    const messages = await lint('floating-promise.ts');
    expect(messages).toEqual([expect.stringMatching(/^@typescript-eslint\/no-floating-promises:/)]);
  });
});
