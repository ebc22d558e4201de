import { existsSync, mkdirSync, renameSync } from 'node:fs';
import path from 'node:path';

/**
 * The log file of a policy update into `outputDir`. A log an earlier try left there is moved
 * aside first (`NAME.train.log.1`, `.2`, …): a retry never overwrites the evidence of the try
 * that was killed or failed.
 */
export function trainerLogFile(logDir: string, outputDir: string): string {
  mkdirSync(logDir, { recursive: true });
  const file = path.join(logDir, `${path.basename(outputDir)}.train.log`);
  if (existsSync(file)) {
    let n = 1;
    while (existsSync(`${file}.${n}`)) n++;
    renameSync(file, `${file}.${n}`);
  }
  return file;
}
