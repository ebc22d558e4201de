#!/usr/bin/env bash
# The test suite: first what the tests need beyond the main job (scripts/setup-tests.sh: Python
# environments, Chromium, Go-built Jaeger and Kubernetes control plane, cached per machine), then
# vitest, and the PyTorch trainer's pytest suite beside it at low priority (most vitest files wait
# on child processes, so the two share the cores well). Ends with the slowest test files.
#
# PostgreSQL: the store contract suites run every store on both backends, and the end-to-end files
# that pick PostgreSQL themselves (many-services-postgres, release, gateway-crash, gateway-many*)
# run it through real services; docs/testing-postgres.md says what covers each file that once ran a
# second time on PostgreSQL. `REIN_TEST_STORE=postgres npm test` runs the whole suite with every
# store the tests' services open on PostgreSQL.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-tests.sh || exit 1
# The Rein processes tests start (the CLI, gateways, workers, trainers) run compiled from dist/, as
# users run them, and start in about half the time they take through tsx; dist/ is rebuilt first
# when a source is newer. (`npx vitest run FILE` alone runs them from the sources.)
if [ ! -f dist/src/cli/cli.js ] || [ -n "$(find src workflows activities workers bin tsconfig*.json package.json -newer dist/src/cli/cli.js -print -quit)" ]; then
  echo "--- dist/ is older than the sources: npm run build ---"
  npm run build || exit 1
fi
export REIN_TEST_CLI=dist
python_log=$(mktemp)
# vitest's JSON report stays in test-artifacts/ (with the console's screenshots) for a closer look.
mkdir -p test-artifacts
report=test-artifacts/vitest-report.json
(cd trainer && nice -n 10 ../.tools/trainer/bin/python -m pytest -q) > "$python_log" 2>&1 &
python_tests=$!
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@"
vitest_status=$?
wait "$python_tests"
python_status=$?
echo "--- trainer tests (pytest, trainer/) ---"
cat "$python_log"
echo "--- the slowest test files ---"
node scripts/slowest-tests.mjs "$report" 15 || true
rm -f "$python_log"
[ "$vitest_status" -eq 0 ] && [ "$python_status" -eq 0 ]
