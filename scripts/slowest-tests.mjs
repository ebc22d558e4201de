#!/usr/bin/env node
// Prints the slowest test files of a vitest run from its JSON report (`--reporter=json
// --outputFile.json=FILE`): where CI's time goes, at the end of every run.
//   node scripts/slowest-tests.mjs REPORT.json [COUNT]
import { readFileSync } from 'node:fs';
import path from 'node:path';

const [file, count = '15'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/slowest-tests.mjs REPORT.json [COUNT]');
  process.exit(2);
}
let report;
try {
  report = JSON.parse(readFileSync(file, 'utf8'));
} catch (err) {
  console.error(`slowest-tests: cannot read the vitest JSON report ${file}: ${err.message}`);
  process.exit(1);
}
const files = report.testResults
  .map((r) => ({
    name: path.relative(process.cwd(), r.name),
    seconds: (r.endTime - r.startTime) / 1000,
    tests: r.assertionResults.length,
    status: r.status,
  }))
  .sort((a, b) => b.seconds - a.seconds);
const total = files.reduce((sum, f) => sum + f.seconds, 0);
console.log(
  `${files.length} files, ${report.numTotalTests} tests; file time summed over workers ${total.toFixed(0)} s; the ${Math.min(Number(count), files.length)} slowest:`,
);
for (const f of files.slice(0, Number(count))) {
  console.log(
    `${f.seconds.toFixed(1).padStart(8)} s  ${String(f.tests).padStart(3)} tests  ${f.status === 'passed' ? '' : `${f.status}  `}${f.name}`,
  );
}
