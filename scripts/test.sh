#!/usr/bin/env bash
# The test suite: vitest, and the PyTorch trainer's pytest suite beside it at low priority (most
# vitest files wait on child processes, so the two share the cores well); then the integration
# files whose subject is what Rein stores again, with every store on PostgreSQL. Exits non-zero
# if any fails; pytest's output follows vitest's.
#
# The contract suites, the release, SIGKILL, many-gateway and compose tests choose both backends
# themselves. `REIN_TEST_STORE=postgres npm test` runs the whole suite on PostgreSQL (it passes;
# twice the time, so CI runs the list below).
set -uo pipefail
cd "$(dirname "$0")/.."
python_log=$(mktemp)
(cd trainer && nice -n 10 ../.tools/trainer/bin/python -m pytest -q) > "$python_log" 2>&1 &
python_tests=$!
npx vitest run "$@"
vitest_status=$?
postgres_status=0
if [ $# -eq 0 ] && [ -z "${REIN_TEST_STORE:-}" ]; then
  echo "--- the store-touching integration files again, every store on PostgreSQL ---"
  REIN_TEST_STORE=postgres npx vitest run \
    test/integration/{gateway-journal,gateway-control,gateway-proxy,gateway-transparency,gateway-names,fuzz,shadow,serving-restore}.test.ts \
    test/integration/{api,api-hostile,cancel-run,continue-run,notifications,training-run-paths,rollout-runner}.test.ts
  postgres_status=$?
fi
wait "$python_tests"
python_status=$?
echo "--- trainer tests (pytest, trainer/) ---"
cat "$python_log"
rm -f "$python_log"
[ "$vitest_status" -eq 0 ] && [ "$postgres_status" -eq 0 ] && [ "$python_status" -eq 0 ]
