import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import {
  RolloutSetupError,
  RolloutsHandedBack,
  runRollouts,
  type RolloutBatchSpec,
  type VerifierSpec,
} from '../../src/rollouts/runner.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MODEL } from '../helpers/vllm-like-server.js';
import { isRunning } from '../helpers/processes.js';

const example = path.resolve(import.meta.dirname, '../../examples/calculator-agent');
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
const node = (script: string, ...args: string[]) => ({ command: process.execPath, args: [script, ...args] });

let t: TestGateway;
let gateway: GatewayControlClient;
let workDir: string;
beforeAll(async () => {
  t = await startTestGateway();
  gateway = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
  workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-runner-'));
});
afterAll(async () => {
  await t.close();
  rmSync(workDir, { recursive: true, force: true });
});

const exampleHarness = localExecutor({
  ...node(path.join(example, 'harness.mjs'), '{task}', '{output}'),
  timeoutMs: 20_000,
});
const exampleVerifier: VerifierSpec = {
  ...node(path.join(example, 'verifier.mjs'), '{task}', '{output}'),
  timeoutMs: 20_000,
};
const batch = (overrides: Partial<RolloutBatchSpec>): RolloutBatchSpec => ({
  batchId: 'b',
  tasks: [],
  samplesPerTask: 1,
  mode: 'train',
  policyVersion: 'policy-v1',
  hiddenFields: ['answer'],
  rewardWeights: { success: 1 },
  concurrency: 4,
  maxAttempts: 2,
  workDir,
  ...overrides,
});

describe('the local rollout runner', () => {
  it('runs the harness on every task × sample through the gateway and stores the verified reward', async () => {
    const progress: number[] = [];
    const outcomes = await runRollouts(
      batch({
        batchId: 'calc',
        tasks: [
          { id: 'six-seven', question: '6*7', answer: 42 },
          { id: 'wrong', question: '2*2', answer: 5 },
        ],
        samplesPerTask: 2,
        rewardWeights: { success: 1, format: 0.5 },
      }),
      { gateway, harness: exampleHarness, verifier: exampleVerifier, onFinished: (_, done) => progress.push(done) },
    );
    expect(progress).toEqual([1, 2, 3, 4]);
    expect(outcomes.map((o) => [o.rolloutId, o.status, o.reward])).toEqual([
      ['calc.six-seven.0', 'succeeded', 1.5],
      ['calc.six-seven.1', 'succeeded', 1.5],
      ['calc.wrong.0', 'succeeded', 0.5],
      ['calc.wrong.1', 'succeeded', 0.5],
    ]);
    const rollout = await t.store.getRollout('calc.six-seven.0');
    expect(rollout).toMatchObject({
      status: 'succeeded',
      taskId: 'six-seven',
      mode: 'train',
      policyVersion: 'policy-v1',
      metadata: { batchId: 'calc', sample: 0 },
    });
    const events = await t.store.listEvents('calc.six-seven.0');
    expect(events.find((e) => e.type === 'reward')).toMatchObject({
      source: 'admin',
      payload: { value: 1.5, components: { success: 1, format: 1 } },
    });
    expect(await t.store.listCalls('calc.six-seven.0')).toHaveLength(2);
  });

  it('resumes a batch instead of running finished rollouts again', async () => {
    const spec = batch({ batchId: 'resume', tasks: [{ id: 'x', question: '6*7', answer: 42 }] });
    const first = await runRollouts(spec, { gateway, harness: exampleHarness, verifier: exampleVerifier });
    // Were it launched again, this harness would fail the rollout.
    const again = await runRollouts(spec, {
      gateway,
      harness: localExecutor({ command: process.execPath, args: ['-e', 'process.exit(9)'], timeoutMs: 5000 }),
      verifier: exampleVerifier,
    });
    expect(again).toEqual(first);
    expect(await t.store.listCalls('resume.x.0')).toHaveLength(2);
  });

  it('gives the harness neither hidden task fields nor the runner environment, only its own credentials', async () => {
    process.env.RUNNER_SECRET = 'do-not-leak';
    const [outcome] = await runRollouts(
      batch({ batchId: 'inspect', tasks: [{ id: 'q', question: 'what?', answer: 7 }] }),
      {
        gateway,
        harness: localExecutor({
          ...node(path.join(fixtures, 'inspect.mjs'), '{task}', '{output}'),
          env: { TOOL_MODE: 'sandbox' },
          timeoutMs: 20_000,
        }),
        verifier: exampleVerifier,
      },
    );
    delete process.env.RUNNER_SECRET;
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 0 });
    const seen = JSON.parse(readFileSync(path.join(workDir, 'inspect.q.0', 'attempt-1', 'output.json'), 'utf8'));
    expect(seen.task).toEqual({ id: 'q', question: 'what?' });
    expect(seen.env).toContain('TOOL_MODE');
    expect(seen.env).toEqual(
      expect.arrayContaining([
        'OPENAI_API_KEY',
        'OPENAI_BASE_URL',
        'ANTHROPIC_API_KEY',
        'ANTHROPIC_BASE_URL',
        'REIN_ROLLOUT_ID',
        'REIN_TASK_FILE',
        'REIN_OUTPUT_FILE',
      ]),
    );
    expect(seen.env).not.toContain('RUNNER_SECRET');

    // A harness that reads its task from standard input and writes where $REIN_OUTPUT_FILE says.
    const [fromStdin] = await runRollouts(
      batch({ batchId: 'stdin', tasks: [{ id: 's', question: '6*7', answer: 42 }] }),
      {
        gateway,
        harness: localExecutor({ ...node(path.join(example, 'harness.mjs')), taskOnStdin: true, timeoutMs: 20_000 }),
        verifier: exampleVerifier,
      },
    );
    expect(fromStdin).toMatchObject({ status: 'succeeded', reward: 1 });
  });

  it('leaves the hidden answer nowhere a harness can read it, and still gives it to the verifier', async () => {
    const answer = 'hidden-answer-5d1f0c';
    const rolloutsTree = path.join(workDir, 'snoop-tree');
    const tasks = [
      { id: 'a', question: 'what is hidden?', answer },
      { id: 'b', question: 'and here?', answer },
    ];
    const harness = localExecutor({
      ...node(path.join(fixtures, 'snoop.mjs'), answer, rolloutsTree),
      timeoutMs: 20_000,
    });
    // The verifier scores from the hidden field, says where its task lay, and how that file was kept.
    const judge = `const { readFileSync, statSync } = require('node:fs');
      const [taskFile, outputFile] = process.argv.slice(1);
      const task = taskFile ? JSON.parse(readFileSync(taskFile, 'utf8')) : JSON.parse(readFileSync(0, 'utf8'));
      if (taskFile) process.stderr.write(JSON.stringify({ taskFile, mode: statSync(taskFile).mode & 0o777, dirMode: statSync(require('node:path').dirname(taskFile)).mode & 0o777 }) + '\\n');
      const output = JSON.parse(readFileSync(outputFile, 'utf8'));
      console.log(JSON.stringify({ components: { knows: task.answer === '${answer}' ? 1 : 0, leaked: output.found.length } }));`;
    const fromFile: VerifierSpec = {
      command: process.execPath,
      args: ['-e', judge, '{task}', '{output}'],
      timeoutMs: 20_000,
    };
    const fromStdin: VerifierSpec = {
      command: process.execPath,
      args: ['-e', judge, '', '{output}'],
      taskOnStdin: true,
      timeoutMs: 20_000,
    };
    for (const [batchId, verifier] of [
      ['snoop-file', fromFile],
      ['snoop-stdin', fromStdin],
    ] as const) {
      // Three at a time: one rollout's verifier runs while the others' harnesses search.
      const outcomes = await runRollouts(
        batch({
          batchId,
          tasks,
          samplesPerTask: 3,
          concurrency: 3,
          workDir: rolloutsTree,
          rewardWeights: { knows: 1, leaked: -1 },
        }),
        { gateway, harness, verifier },
      );
      expect(outcomes.map((o) => [o.status, o.components])).toEqual(
        Array.from({ length: 6 }, () => ['succeeded', { knows: 1, leaked: 0 }]),
      );
    }
    const rolloutDir = path.join(rolloutsTree, 'snoop-file.a.0');
    expect(statSync(rolloutDir).mode & 0o777).toBe(0o700);
    expect(statSync(path.join(rolloutDir, 'attempt-1')).mode & 0o777).toBe(0o700);
    const where = JSON.parse(
      readFileSync(path.join(rolloutDir, 'verifier.log'), 'utf8').trim().split('\n')[0] ?? '',
    ) as { taskFile: string; mode: number; dirMode: number };
    expect(where).toMatchObject({ mode: 0o600, dirMode: 0o700 });
    expect(path.relative(rolloutsTree, where.taskFile).startsWith('..')).toBe(true);
    expect(existsSync(where.taskFile)).toBe(false);
    // The private folder (one per process) keeps no task of a verifier that has exited.
    expect(readdirSync(path.dirname(where.taskFile))).toEqual([]);
  });

  it('classifies a crash, a timeout (killing the whole process group), a missing command and a broken verifier', async () => {
    const crashed = await runRollouts(batch({ batchId: 'crash', tasks: [{ id: 'c', question: '1', answer: 1 }] }), {
      gateway,
      harness: localExecutor({
        command: process.execPath,
        args: ['-e', 'process.stderr.write("tool exploded"); process.exit(3)'],
        timeoutMs: 20_000,
      }),
      verifier: exampleVerifier,
    });
    // A crash is the policy's failure: it is scored (0 here) and trained on.
    expect(crashed[0]).toMatchObject({
      status: 'failed',
      failureClass: 'harness',
      reward: 0,
      reason: expect.stringContaining('exited with 3: tool exploded'),
    });
    expect(await t.store.getRollout('crash.c.0')).toMatchObject({ status: 'failed', failureClass: 'harness' });

    const pidFile = path.join(workDir, 'sleeper.pid');
    const slept = await runRollouts(batch({ batchId: 'sleep', tasks: [{ id: 's', question: '1', answer: 1 }] }), {
      gateway,
      harness: localExecutor({ ...node(path.join(fixtures, 'sleeper.mjs'), pidFile), timeoutMs: 1500 }),
      verifier: exampleVerifier,
    });
    expect(slept[0]).toMatchObject({ status: 'failed', failureClass: 'timeout', reward: 0 });
    const toolPid = Number(readFileSync(pidFile, 'utf8'));
    expect(isRunning(toolPid)).toBe(false); // the harness's tool subprocess went with it

    // An executable whose interpreter is missing passes the checks but cannot start: the environment's fault.
    const orphanScript = path.join(workDir, 'needs-missing-interpreter');
    writeFileSync(orphanScript, '#!/no/such/interpreter\n', { mode: 0o755 });
    const missing = await runRollouts(batch({ batchId: 'missing', tasks: [{ id: 'm', question: '1', answer: 1 }] }), {
      gateway,
      harness: localExecutor({ command: orphanScript, args: [], timeoutMs: 5000 }),
      verifier: exampleVerifier,
    });
    expect(missing[0]).toMatchObject({
      status: 'failed',
      failureClass: 'environment',
      reward: null,
      reason: expect.stringContaining('ENOENT'),
    });

    const garbled = await runRollouts(
      batch({ batchId: 'garbled', tasks: [{ id: 'g', question: '6*7', score: 'garbage' }] }),
      {
        gateway,
        harness: exampleHarness,
        verifier: { ...node(path.join(fixtures, 'score.mjs'), '{task}'), timeoutMs: 5000 },
      },
    );
    expect(garbled[0]).toMatchObject({
      status: 'failed',
      failureClass: 'verifier',
      reason: expect.stringContaining('printed no JSON'),
    });

    const unweighted = await runRollouts(
      batch({
        batchId: 'unweighted',
        tasks: [{ id: 'u', question: '6*7', score: 1 }],
        rewardWeights: { success: 1, cost: -0.1 },
      }),
      {
        gateway,
        harness: exampleHarness,
        verifier: { ...node(path.join(fixtures, 'score.mjs'), '{task}'), timeoutMs: 5000 },
      },
    );
    expect(unweighted[0]).toMatchObject({
      failureClass: 'verifier',
      reason: 'the verifier reported no cost, which the reward weights use',
    });
  });

  it('reads model, tool and permission failures from the journal, and keeps a self-reported reward apart', async () => {
    const modes = ['max_tokens', 'refusal', 'tool', 'permission', 'self-graded'];
    const outcomes = await runRollouts(
      batch({
        batchId: 'misbehaving',
        tasks: modes.map((mode) => ({ id: mode, mode, answer: 42 })),
        refusalPatterns: ['^Echo: I refuse'],
      }),
      {
        gateway,
        harness: localExecutor({
          ...node(path.join(fixtures, 'misbehaving.mjs'), '{task}', '{output}'),
          timeoutMs: 20_000,
        }),
        verifier: exampleVerifier,
      },
    );
    const byTask = Object.fromEntries(outcomes.map((o) => [o.taskId, o]));
    // Failures of the policy's own making are scored (0 here) and trained on; each names its evidence.
    expect(byTask.max_tokens).toMatchObject({
      status: 'failed',
      failureClass: 'model',
      reward: 0,
      reason: expect.stringMatching(/after model call .* stopped at max tokens/),
    });
    expect(byTask.refusal).toMatchObject({
      status: 'failed',
      failureClass: 'model',
      reason: expect.stringContaining('refused'),
    });
    expect(byTask.tool).toMatchObject({
      status: 'failed',
      failureClass: 'tool',
      reason: expect.stringContaining('tool "calc" failed: division by zero'),
    });
    expect(byTask.permission).toMatchObject({
      status: 'failed',
      failureClass: 'permission',
      reason: expect.stringContaining('permission for tool "shell" was denied'),
    });
    const evidenceOf = async (id: string) =>
      (await t.store.listEvents(id)).find((e) => e.type === 'status' && e.payload.to === 'failed')?.payload.evidence;
    expect(await evidenceOf('misbehaving.max_tokens.0')).toMatchObject({
      problem: 'max_tokens',
      exitCode: 1,
      callId: expect.any(String),
      logTail: expect.stringContaining('cut off'),
    });
    expect(await evidenceOf('misbehaving.refusal.0')).toMatchObject({
      problem: 'refusal',
      detail: 'Echo: I refuse to do this',
    });
    expect(await evidenceOf('misbehaving.permission.0')).toMatchObject({
      actionId: 'call-2',
      span: 'shell',
      permission: 'denied',
      exitCode: 4,
    });

    // The harness graded itself 1; the verifier says 0. Only the verifier's reward counts; the disagreement is
    // recorded.
    expect(byTask['self-graded']).toMatchObject({
      status: 'succeeded',
      reward: 0,
      harnessReportedReward: 1,
      rewardDisagrees: true,
    });
    const rewards = (await t.store.listEvents('misbehaving.self-graded.0')).filter((e) => e.type === 'reward');
    expect(rewards.map((e) => [e.source, e.payload.value])).toEqual([
      ['rollout', 1],
      ['admin', 0],
    ]);
    expect(rewards[1]?.payload.data).toMatchObject({ harnessReported: 1, disagrees: true });
  });

  it('paces harness launches at launchesPerSecond, though all could run at once', async () => {
    const tasks = Array.from({ length: 5 }, (_, i) => ({ id: `p${i}`, question: '1', answer: 1 }));
    const started = performance.now();
    const outcomes = await runRollouts(batch({ batchId: 'paced', tasks, concurrency: 5, launchesPerSecond: 10 }), {
      gateway,
      harness: localExecutor({ command: process.execPath, args: ['-e', ''], timeoutMs: 5000 }),
      verifier: exampleVerifier,
    });
    expect(outcomes).toHaveLength(5);
    // The fifth launch waits 400 ms after the first (load can only add to that); the spacing
    // itself is src/rollouts/pacer.test.ts's.
    expect(performance.now() - started).toBeGreaterThanOrEqual(400);
  });

  it('lets the verifier read the journaled calls of its rollout with its own key, and nothing more', async () => {
    const [outcome] = await runRollouts(
      batch({ batchId: 'journal-verifier', tasks: [{ id: 'j', question: '6*7', answer: 42 }] }),
      {
        gateway,
        harness: exampleHarness,
        verifier: {
          ...node(path.join(fixtures, 'calls-verifier.mjs')),
          env: { OTHER_ROLLOUT: 'calc.six-seven.0' },
          timeoutMs: 20_000,
        },
      },
    );
    expect(outcome).toMatchObject({
      status: 'succeeded',
      reward: 1,
      components: { success: 1, calls: 2, otherStatus: 403, writeStatus: 401 },
    });
  });

  it('checks the harness and verifier before launching anything', async () => {
    const attempt = runRollouts(batch({ batchId: 'unlaunchable', tasks: [{ id: 'u', question: '1', answer: 1 }] }), {
      gateway,
      harness: localExecutor({ command: 'no-such-agent', args: [], timeoutMs: 5000 }),
      verifier: { command: path.join(workDir, 'no-verifier'), args: [], timeoutMs: 5000 },
    });
    await expect(attempt).rejects.toThrow(RolloutSetupError);
    await expect(attempt).rejects.toThrow(
      /harness.command: "no-such-agent" is not on PATH.*verifier.command: .*no-verifier is not an executable file/,
    );
    expect(await t.store.getRollout('unlaunchable.u.0')).toBeUndefined();
  });

  it('refuses unpinned train rollouts: training must know the version it samples', async () => {
    const attempt = runRollouts(
      batch({ batchId: 'unpinned', policyVersion: null, tasks: [{ id: 'u', question: '1', answer: 1 }] }),
      { gateway, harness: exampleHarness, verifier: exampleVerifier },
    );
    await expect(attempt).rejects.toThrow('train rollouts must be pinned to a policy version (policyVersion is null)');
    expect(await t.store.getRollout('unpinned.u.0')).toBeUndefined();
  });

  it('retries a rollout whose backend failed as a new attempt, and gives up after maxAttempts', async () => {
    const [outcome] = await runRollouts(
      batch({
        batchId: 'infra',
        policyVersion: 'fault:500',
        tasks: [{ id: 'i', question: '6*7', answer: 42 }],
        maxAttempts: 2,
      }),
      {
        gateway,
        harness: exampleHarness,
        verifier: exampleVerifier,
      },
    );
    expect(outcome).toMatchObject({ status: 'failed', failureClass: 'infrastructure', attempts: 2, reward: null });
    const calls = await t.store.listCalls('infra.i.0');
    // The openai client retried each call itself before the harness gave up.
    expect(new Set(calls.map((c) => c.attempt))).toEqual(new Set([1, 2]));
    expect(calls.every((c) => c.upstreamStatus === 500)).toBe(true);
  });

  it("scores each attempt on its own output: a lost attempt's answer is never credited to the next", async () => {
    // Attempt 1 writes the right answer, then its model call fails upstream (infrastructure);
    // attempt 2 crashes before writing anything. Its score must be its own: no answer, reward 0.
    const script = `
      const fs = require('node:fs');
      if (process.env.REIN_ATTEMPT === '1') {
        fs.writeFileSync(process.argv[1], JSON.stringify({ answer: 42 }));
        fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
          method: 'POST',
          headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy-v1', messages: [{ role: 'user', content: 'hi' }] }),
        }).then((r) => process.exit(r.ok ? 0 : 1));
      } else process.exit(1);`;
    const [outcome] = await runRollouts(
      batch({ batchId: 'own-output', policyVersion: 'fault:500', tasks: [{ id: 'o', question: '6*7', answer: 42 }] }),
      {
        gateway,
        harness: localExecutor({ command: process.execPath, args: ['-e', script, '{output}'], timeoutMs: 20_000 }),
        verifier: exampleVerifier,
      },
    );
    expect(outcome).toMatchObject({ status: 'failed', failureClass: 'harness', attempts: 2, reward: 0 });
    expect(JSON.parse(readFileSync(path.join(workDir, 'own-output.o.0', 'attempt-1', 'output.json'), 'utf8'))).toEqual({
      answer: 42,
    });
  });

  it('leaves a rollout to the runner that took its attempt over: a superseded attempt is never scored', async () => {
    // While attempt 1 runs, another runner (this one presumed dead: its activity timed out and ran
    // again elsewhere) starts attempt 2. Attempt 1's answer must not become attempt 2's reward,
    // whose journal has none of the calls that earned it.
    const script = `
      const fs = require('node:fs');
      fs.writeFileSync(process.argv[1], JSON.stringify({ answer: 42 }));
      const api = process.env.OPENAI_BASE_URL.replace(/\\/v1$/, '') + '/api/rollouts/' + process.env.REIN_ROLLOUT_ID;
      fetch(api + '/attempts', { method: 'POST', headers: { authorization: 'Bearer ${ADMIN_KEY}' } })
        .then((r) => process.exit(r.ok ? 0 : 1));`;
    await expect(
      runRollouts(batch({ batchId: 'taken-over', tasks: [{ id: 't', question: '6*7', answer: 42 }] }), {
        gateway,
        harness: localExecutor({ command: process.execPath, args: ['-e', script, '{output}'], timeoutMs: 20_000 }),
        verifier: exampleVerifier,
      }),
    ).rejects.toThrow(/attempt 1 of rollout taken-over.t.0 was superseded by attempt 2/);
    expect(await t.store.getRollout('taken-over.t.0')).toMatchObject({ status: 'running', attempts: 2 });
    expect((await t.store.listEvents('taken-over.t.0')).filter((e) => e.type === 'reward')).toEqual([]);
  });

  it('runs a rollout lost to a fault again when its batch runs again, and keeps what it was reopened from', async () => {
    await gateway.registerPolicy('flaky', { backend: 'toy', model: 'fault:500' });
    const spec = batch({
      batchId: 'reopen',
      policyVersion: 'flaky',
      maxAttempts: 1,
      tasks: [{ id: 'r', question: '6*7', answer: 42 }],
    });
    const [lost] = await runRollouts(spec, { gateway, harness: exampleHarness, verifier: exampleVerifier });
    expect(lost).toMatchObject({ status: 'failed', failureClass: 'infrastructure', reward: null, attempts: 1 });

    await gateway.registerPolicy('flaky', { backend: 'toy', model: MODEL }); // the backend is healthy again
    const [again] = await runRollouts(spec, { gateway, harness: exampleHarness, verifier: exampleVerifier });
    expect(again).toMatchObject({ status: 'succeeded', reward: 1, attempts: 2 });
    const reopened = (await t.store.listEvents('reopen.r.0')).find((e) => e.type === 'status' && e.payload.reopened);
    expect(reopened).toMatchObject({
      attempt: 2,
      payload: { from: 'failed', to: 'queued', reopened: { failureClass: 'infrastructure' } },
    });
    // Scored now: a third run reads it back.
    expect(await runRollouts(spec, { gateway, harness: exampleHarness, verifier: exampleVerifier })).toEqual([again]);
  });

  it('finishes a rollout scored just before its runner died from the score, without running the verifier again', async () => {
    await t.store.createRollout({
      id: 'scored-then-lost.s.0',
      taskId: 's',
      policyVersion: 'policy-v1',
      metadata: { sample: 0 },
    });
    await t.store.setRolloutStatus('scored-then-lost.s.0', { status: 'running' }, 'admin');
    await t.store.appendEvent(
      'scored-then-lost.s.0',
      1,
      {
        type: 'reward',
        value: 0,
        components: { success: 0 },
        data: { failure: { failureClass: 'tool', reason: 'calc failed' } },
      },
      'admin',
    );
    const never = localExecutor({ command: process.execPath, args: ['-e', 'process.exit(9)'], timeoutMs: 5000 });
    const [outcome] = await runRollouts(
      batch({ batchId: 'scored-then-lost', tasks: [{ id: 's', question: '1', answer: 1 }] }),
      {
        gateway,
        harness: never,
        verifier: { command: process.execPath, args: ['-e', 'process.exit(9)'], timeoutMs: 5000 },
      },
    );
    expect(outcome).toMatchObject({ status: 'failed', failureClass: 'tool', reward: 0, attempts: 1 });
    expect((await t.store.listEvents('scored-then-lost.s.0')).filter((e) => e.type === 'reward')).toHaveLength(1);
  });

  it('finishes from the score a quiet runner recorded while this one took the rollout over: scored once', async () => {
    const id = 'scored-during-takeover.s.0';
    await t.store.createRollout({ id, taskId: 's', policyVersion: 'policy-v1', metadata: { sample: 0 } });
    await t.store.setRolloutStatus(id, { status: 'running' }, 'admin');
    // The runner presumed dead (its activity timed out under load) records its reward just before this one's new
    // attempt reaches the store.
    class Racing extends GatewayControlClient {
      override async startAttempt(rolloutId: string) {
        await t.store.appendEvent(rolloutId, 1, { type: 'reward', value: 1, components: { success: 1 } }, 'admin');
        return super.startAttempt(rolloutId);
      }
    }
    const never = { command: process.execPath, args: ['-e', 'process.exit(9)'], timeoutMs: 5000 };
    const [outcome] = await runRollouts(
      batch({ batchId: 'scored-during-takeover', tasks: [{ id: 's', question: '1', answer: 1 }] }),
      {
        gateway: new Racing(t.gateway.url, ADMIN_KEY),
        harness: localExecutor(never),
        verifier: never,
      },
    );
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1, attempts: 1 });
    expect(await t.store.getRollout(id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect((await t.store.listEvents(id)).filter((e) => e.type === 'reward')).toHaveLength(1);
  });

  it('scores an attempt two runners follow at once one time: both report the reward that stands', async () => {
    const id = 'followed-twice.s.0';
    await t.store.createRollout({ id, taskId: 's', policyVersion: 'policy-v1', metadata: { sample: 0 } });
    await t.store.setRolloutStatus(id, { status: 'running' }, 'admin');
    // A run both can follow, as a Job is: the runner presumed dead still follows it, and the one that took it over.
    const job = localExecutor({
      command: process.execPath,
      args: ['-e', 'setTimeout(() => {}, 300)'],
      timeoutMs: 5000,
    });
    const harness = { ...job, resume: job.run };
    // Each verifier run scores differently: the store decides which reward stands.
    const verifier = {
      ...node('-e', 'console.log(JSON.stringify({ components: { success: Math.random() } }))'),
      timeoutMs: 5000,
    };
    const spec = batch({ batchId: 'followed-twice', tasks: [{ id: 's', question: '1', answer: 1 }] });
    const [[one], [other]] = await Promise.all([
      runRollouts(spec, { gateway, harness, verifier }),
      runRollouts(spec, { gateway, harness, verifier }),
    ]);
    const rewards = (await t.store.listEvents(id)).filter((e) => e.type === 'reward');
    expect(rewards).toHaveLength(1);
    expect(one).toMatchObject({ status: 'succeeded', reward: rewards[0]!.payload.value, attempts: 1 });
    expect(other).toEqual(one);
  });

  it('hands rollouts back when its worker goes away, and cancels them only when the cancel is final', async () => {
    const sleeper = localExecutor({
      command: process.execPath,
      args: ['-e', 'setTimeout(() => {}, 60_000)'],
      timeoutMs: 60_000,
    });
    const interrupt = async (batchId: string, cancelIsFinal: () => boolean) => {
      const abort = new AbortController();
      const running = runRollouts(batch({ batchId, tasks: [{ id: 'h', question: '6*7', answer: 42 }] }), {
        gateway,
        harness: sleeper,
        verifier: exampleVerifier,
        signal: abort.signal,
        cancelIsFinal,
      });
      for (let i = 0; i < 200 && (await t.store.getRollout(`${batchId}.h.0`))?.status !== 'running'; i++)
        await new Promise((r) => setTimeout(r, 50));
      abort.abort();
      return running;
    };
    await expect(interrupt('handed-back', () => false)).rejects.toThrow(RolloutsHandedBack);
    expect(await t.store.getRollout('handed-back.h.0')).toMatchObject({ status: 'running', attempts: 1 });
    // Another runner resumes it: the interrupted attempt is recorded as lost, a new one runs.
    const [resumed] = await runRollouts(
      batch({ batchId: 'handed-back', tasks: [{ id: 'h', question: '6*7', answer: 42 }] }),
      { gateway, harness: exampleHarness, verifier: exampleVerifier },
    );
    expect(resumed).toMatchObject({ status: 'succeeded', reward: 1, attempts: 2 });

    const [cancelled] = await interrupt('cancelled-for-good', () => true);
    expect(cancelled).toMatchObject({ status: 'cancelled', reward: null });
    expect(await t.store.getRollout('cancelled-for-good.h.0')).toMatchObject({ status: 'cancelled' });
  });

  it('journals a call the gateway could not route to the pinned version, and blames the infrastructure', async () => {
    const [outcome] = await runRollouts(
      batch({
        batchId: 'unrouted',
        policyVersion: 'never-registered',
        maxAttempts: 1,
        tasks: [{ id: 'u', question: '6*7', answer: 42 }],
      }),
      {
        gateway,
        harness: exampleHarness,
        verifier: exampleVerifier,
      },
    );
    expect(outcome).toMatchObject({ status: 'failed', failureClass: 'infrastructure', reward: null });
    const calls = await t.store.listCalls('unrouted.u.0');
    expect(calls.length).toBeGreaterThan(0);
    expect(calls[0]).toMatchObject({
      status: 'error',
      errorClass: 'policy_unavailable',
      policyVersion: 'never-registered',
      errorMessage: expect.stringContaining('not in the routing table'),
    });
  });
});
