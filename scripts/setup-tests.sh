#!/usr/bin/env bash
# Sets up what the tests need beyond the main job (`npm test` runs this first; it is quick once
# done): the PyTorch trainer's, the conformance tests' and moto's pinned Python environments,
# Debian's Chromium for the console's browser test, and the Go-built Jaeger (tracing test) and
# Kubernetes control plane (Kubernetes tests). Each heavy part is installed once per machine in a
# cache keyed by its lock file's hash (REIN_CACHE_DIR, default ~/.cache/rein) and linked into
# .tools/. Needs `npm run setup` first (npm packages, the temporal CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/cached-python.sh

install_test_pythons() {
  # The PyTorch trainer's pinned environment (torch with its CUDA libraries, transformers, peft,
  # accelerate, safetensors, pytest; ~5.6 GB, minutes to install cold): the trainer's pytest suite
  # and the tests that run the PyTorch engine (cross-engine log-probs, both trainers on one batch).
  install_cached_python trainer trainer/requirements.lock
  # The official Python openai SDK for the conformance suite (small).
  install_cached_python conformance test/conformance/requirements.lock
  # moto in server mode: the S3-compatible server the S3 artifact-store tests run against.
  install_cached_python s3 test/s3/requirements.lock
}

# Debian's Chromium, which the console's browser test drives (puppeteer's own download needs the internet).
install_chromium() {
  if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null || [ -n "${REIN_CHROMIUM:-}" ]; then return; fi
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "setup-tests: installing Debian's chromium (the console's browser test)"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    echo "setup-tests: no Chromium for the console's browser test: install Debian's chromium (apt-get install chromium), or point REIN_CHROMIUM at a Chrome" >&2
  fi
}

mkdir -p .tools
# Before the background jobs: apt must not run twice at once.
install_chromium
install_test_pythons &
pythons=$!
scripts/build-jaeger.sh &
jaeger=$!
scripts/build-kube.sh &
kube=$!
status=0
wait "$pythons" || status=1
# Without Go, the build scripts say so (and which Go to install); the rest is set up all the same.
wait "$jaeger" || status=1
wait "$kube" || status=1
if [ "$status" -ne 0 ]; then
  echo "setup-tests: the test setup failed (see above); once fixed, run: npm test" >&2
  exit 1
fi
