import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { ArtifactNameError, ArtifactNotFoundError, nameInStore } from '../../artifacts/artifact-store.js';
import { downloadFolder, folderExists, putFolder } from '../../artifacts/folders.js';
import { artifactStoreFromConfig } from '../../artifacts/from-config.js';
import { cliContext, type GlobalOptions } from '../context.js';

/**
 * `rein artifacts pull|push`: copies between a local path and the configured artifact store
 * (artifacts.url, or REIN_ARTIFACTS_URL and REIN_S3_* in a pod without a config file). A
 * Kubernetes trainer Job runs these around its trainer, so the trainer reads and writes local
 * paths while the batch, the parent and the new checkpoint live in S3.
 */
export function registerArtifactsCommands(program: Command): void {
  const artifacts = program
    .command('artifacts')
    .description('copy batches and checkpoints between local paths and the artifact store');
  artifacts
    .command('pull')
    .description(
      'download an artifact (a file) or a folder (a checkpoint) to a local path, every file checked against the sha256 its writer recorded',
    )
    .argument('<uri>', 'an artifact or folder URI of the configured store (s3://… or file://…)')
    .argument('<path>', 'where the copy goes (replaced if it exists)')
    .action(async (uri: string, target: string) =>
      refusingBadNames(async () => {
        const store = artifactStoreFromConfig(cliContext(program.opts<GlobalOptions>()).config);
        nameInStore(store, uri);
        if (await folderExists(store, uri)) {
          await downloadFolder(store, uri, target);
          say({ pulled: uri, to: target, folder: true, ...(await sizeOf(target)) });
        } else {
          const bytes = await store.get(uri);
          await mkdir(path.dirname(target), { recursive: true });
          await writeFile(target, bytes);
          say({ pulled: uri, to: target, folder: false, files: 1, bytes: bytes.length });
        }
      }),
    );
  artifacts
    .command('push')
    .description(
      'upload a local folder (a checkpoint) to a URI of the configured store: its files, then the manifest that marks it whole',
    )
    .argument('<dir>', 'the local folder')
    .argument('<uri>', 'where it goes in the configured store (s3://… or file://…)')
    .action(async (dir: string, uri: string) =>
      refusingBadNames(async () => {
        const store = artifactStoreFromConfig(cliContext(program.opts<GlobalOptions>()).config);
        const name = nameInStore(store, uri);
        if (!(await stat(dir).catch(() => undefined))?.isDirectory())
          throw new PushSourceError(`${dir} is not a folder: the trainer wrote no output there`);
        await putFolder(store, name, dir);
        say({ pushed: dir, to: uri, ...(await sizeOf(dir)) });
      }),
    );
}

const say = (result: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(result)}\n`);

class PushSourceError extends Error {}

/**
 * A URI of another store, one that is not there, or nothing to push: a retry would fail the same way, so exit 2 (a
 * refusal).
 */
async function refusingBadNames(work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (err) {
    if (!(err instanceof ArtifactNameError || err instanceof ArtifactNotFoundError || err instanceof PushSourceError))
      throw err;
    process.stderr.write(`rein: ${err.message}\n`);
    process.exitCode = 2;
  }
}

async function sizeOf(dir: string): Promise<{ files: number; bytes: number }> {
  const entries = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile());
  const sizes = await Promise.all(entries.map(async (e) => (await stat(path.join(e.parentPath, e.name))).size));
  return { files: entries.length, bytes: sizes.reduce((a, b) => a + b, 0) };
}
