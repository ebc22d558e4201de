#!/usr/bin/env bash
# The test suite: vitest, and the PyTorch trainer's pytest suite beside it at low priority (most
# vitest files wait on child processes, so the two share the cores well); then every integration
# file whose services keep stores again, with every store on PostgreSQL (REIN_TEST_STORE, read by
# test/helpers/postgres.ts and the helpers that start gateways, workers, the API and configs).
# Exits non-zero if any fails; pytest's output follows vitest's.
#
# Left out of the PostgreSQL pass, each for its reason:
# - they run on both backends themselves: release, gateway-crash, gateway-many,
#   gateway-many-promotion, many-services-postgres (and the store contract suites under src/,
#   and test/docker-compose.test.ts, which is PostgreSQL only);
# - SQLite by design: faults (reads the journal's SQLite files with SQL; many-services-postgres
#   is its PostgreSQL counterpart), gc-cli (gc.test.ts covers PostgreSQL), dev (the embedded default);
# - they open no store: kube-control-plane, kubernetes-trainer, batch-python, engines-agree,
#   local-trainer, policy-server-metrics, cli (config and Temporal connection), follow-reconnect.
set -uo pipefail
cd "$(dirname "$0")/.."
# The Rein processes tests start (the CLI, gateways, workers, trainers) run compiled from dist/, as
# users run them, and start in about half the time they take through tsx; dist/ is rebuilt first
# when a source is newer. (`npx vitest run FILE` alone runs them from the sources.)
if [ ! -f dist/src/cli/cli.js ] || [ -n "$(find src workflows activities workers bin tsconfig*.json package.json -newer dist/src/cli/cli.js -print -quit)" ]; then
  echo "--- dist/ is older than the sources: npm run build ---"
  npm run build || exit 1
fi
export REIN_TEST_CLI=dist
python_log=$(mktemp)
(cd trainer && nice -n 10 ../.tools/trainer/bin/python -m pytest -q) > "$python_log" 2>&1 &
python_tests=$!
npx vitest run "$@"
vitest_status=$?
postgres_status=0
if [ $# -eq 0 ] && [ -z "${REIN_TEST_STORE:-}" ]; then
  echo "--- the integration files whose services keep stores, again with every store on PostgreSQL ---"
  skip=(release gateway-crash gateway-many gateway-many-promotion many-services-postgres faults gc-cli dev
        kube-control-plane kubernetes-trainer batch-python engines-agree local-trainer policy-server-metrics cli follow-reconnect)
  excludes=()
  for name in "${skip[@]}"; do excludes+=("--exclude=test/integration/$name.test.ts"); done
  REIN_TEST_STORE=postgres npx vitest run test/integration "${excludes[@]}"
  postgres_status=$?
fi
wait "$python_tests"
python_status=$?
echo "--- trainer tests (pytest, trainer/) ---"
cat "$python_log"
rm -f "$python_log"
[ "$vitest_status" -eq 0 ] && [ "$postgres_status" -eq 0 ] && [ "$python_status" -eq 0 ]
