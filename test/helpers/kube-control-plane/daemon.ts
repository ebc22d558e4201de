import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Control plane processes still running when the test process exits are killed with it. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** One program of the control plane: its output in a log file, stopped with SIGTERM unless told otherwise. */
export class Daemon {
  private child: ChildProcess | undefined;
  private exit: Promise<void> | undefined;
  private exited: string | undefined;
  private readonly logFile: string;

  constructor(
    private readonly name: string,
    private readonly binary: string,
    private readonly args: string[],
    dir: string,
  ) {
    mkdirSync(path.join(dir, 'logs'), { recursive: true });
    this.logFile = path.join(dir, 'logs', `${name}.log`);
  }

  start(): void {
    // Appended: a restarted program's log follows its first run's.
    const log = createWriteStream(this.logFile, { flags: 'a' });
    this.exited = undefined;
    const child = spawn(this.binary, this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    this.child = child;
    running.add(child);
    this.exit = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exited = `exited with ${code ?? signal}`;
        running.delete(child);
        resolve();
      });
      child.once('error', (err) => {
        this.exited = `could not start: ${err.message}`;
        running.delete(child);
        resolve();
      });
    });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  assertRunning(when: string): void {
    if (this.exited) throw new Error(`${this.name} ${this.exited} ${when}:\n${this.tail()}`);
  }

  tail(): string {
    try {
      return `--- ${this.name} ---\n${readFileSync(this.logFile, 'utf8').slice(-4000)}`;
    } catch {
      return `--- ${this.name}: no log ---`;
    }
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (!this.child || this.exited) return;
    this.child.kill(signal);
    await this.exit;
  }
}
