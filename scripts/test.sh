#!/usr/bin/env bash
# The test suite: vitest, and the PyTorch trainer's pytest suite beside it at low priority (most
# vitest files wait on child processes, so the two share the cores well). Exits non-zero if
# either fails; pytest's output follows vitest's.
set -uo pipefail
cd "$(dirname "$0")/.."
python_log=$(mktemp)
(cd trainer && nice -n 10 ../.tools/trainer/bin/python -m pytest -q) > "$python_log" 2>&1 &
python_tests=$!
npx vitest run "$@"
vitest_status=$?
wait "$python_tests"
python_status=$?
echo "--- trainer tests (pytest, trainer/) ---"
cat "$python_log"
rm -f "$python_log"
[ "$vitest_status" -eq 0 ] && [ "$python_status" -eq 0 ]
