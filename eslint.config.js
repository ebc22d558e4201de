// @ts-check
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

/** Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no client/worker SDK. */
const workflowImportRules = {
  'no-restricted-imports': [
    'error',
    {
      // Bare names here; every `node:` specifier is caught by the pattern below.
      paths: builtinModules
        .filter((name) => !name.startsWith('node:'))
        .map((name) => ({
          name,
          message: 'Workflow code must be deterministic: do I/O in an activity, not in workflows/.',
        })),
      patterns: [
        {
          group: ['node:*'],
          message: 'Workflow code must be deterministic: do I/O in an activity, not in workflows/.',
        },
        {
          group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity', '@temporalio/testing'],
          message: 'Workflow code may import @temporalio/workflow and @temporalio/common only.',
        },
        {
          group: ['**/activities/**'],
          allowTypeImports: true,
          message: 'Import activities with `import type` and call them through proxyActivities.',
        },
      ],
    },
  ],
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tools/**', '.rein/**', '.bench/**', 'test/fixtures/lint/**'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // A switch over a union that misses a member is a bug the day the union grows.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Strings stay whole so messages remain greppable; Prettier keeps the code itself within 120 columns.
      'max-len': [
        'error',
        { code: 120, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true },
      ],
    },
  },
  {
    files: ['workflows/**/*.ts', 'test/fixtures/lint/workflows/**/*.ts'],
    rules: workflowImportRules,
  },
);
