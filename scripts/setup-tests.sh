#!/usr/bin/env bash
# Sets up what the tests need beyond the main job (`npm test` runs this first; it is quick once
# done): the PyTorch trainer's, the conformance tests' and moto's pinned Python environments,
# Debian's Chromium for the console's browser test, and the Go-built Jaeger (tracing test) and
# Kubernetes control plane (Kubernetes tests). Each heavy part is installed once per machine in a
# cache keyed by its lock file's hash (REIN_CACHE_DIR, default ~/.cache/rein) and linked into
# .tools/. Needs `npm run setup` first (npm packages, the temporal CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/node-runtimes.sh

install_test_pythons() {
  # The PyTorch trainer's pinned environment (torch with its CUDA libraries, transformers, peft,
  # accelerate, safetensors, pytest; ~5.6 GB, minutes to install cold): the trainer's pytest suite
  # and the tests that run the PyTorch engine (cross-engine log-probs, both trainers on one batch).
  install_cached_python trainer trainer/requirements.lock
  # The official Python openai SDK for the conformance suite (small).
  install_cached_python conformance test/conformance/requirements.lock
  # moto in server mode: the S3-compatible server the S3 artifact-store tests run against.
  install_cached_python s3 test/s3/requirements.lock
  # The Python agent frameworks of the gallery (openai-agents, LangGraph, smolagents, mini-swe-agent;
  # ~0.9 GB, minutes cold): test/integration/frameworks-python.test.ts.
  install_cached_python frameworks examples/frameworks/python/requirements.lock
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

# The first Node.js MAJOR on PATH (the machine's own, not the cache's), for the main job's check on it.
find_node() {
  local major=$1 candidate
  while read -r candidate; do
    case $candidate in "$(rein_cache_dir)"/*) continue ;; esac
    if [ "$("$candidate" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" = "$major" ]; then echo "$candidate"; return 0; fi
  done < <(which -a node 2>/dev/null)
  return 1
}

# The main job on the other Node.js releases Rein supports (20 and 22; the tests run on the one on
# PATH): its npm packages (npm ci --omit=dev) built by each, once per machine per lock hash, linked
# as .tools/main-job-nodeMAJOR/{node,node_modules}; test/integration/main-job-node-versions.test.ts
# runs a short training with each.
prepare_main_job_node() {
  local major=$1 node_bin nodedir wheel
  case $major in
    22) wheel=$(install_node_wheel 22.20.0) || return 1; node_bin=$wheel/bin/node; nodedir=$wheel/prefix ;;
    20)
      # PyPI's Node 20 wheels stop at 20.18, below Rein's engines (>= 20.19): the machine's own Node 20.
      if ! node_bin=$(find_node 20); then
        echo "setup-tests: no Node.js 20 (>= 20.19) on PATH for the main job's check on Node 20; install one (these machines ship it as /usr/bin/node), then run: npm test" >&2
        return 1
      fi
      nodedir=$(dirname "$(dirname "$(readlink -f "$node_bin")")")
      install_sqlite_driver_for_node20 "$node_bin" || return 1 ;;
  esac
  local cache hash dir
  cache=$(rein_cache_dir)
  hash=$(sha256sum package-lock.json | cut -c1-16)
  dir="$cache/main-job-node$major-$hash"
  (
    flock 9
    if [ ! -f "$dir/.complete" ]; then
      echo "setup-tests: installing the main job's npm packages for Node.js $major into $dir (once per machine)"
      rm -rf "$dir" && mkdir -p "$dir" && cp package.json package-lock.json "$dir/"
      (cd "$dir" && export PATH="$(dirname "$node_bin"):$PATH" npm_config_nodedir="$nodedir" npm_config_omit=dev &&
        npm ci --no-audit --no-fund --loglevel=error)
      touch "$dir/.complete"
    fi
  ) 9>"$cache/main-job-node$major.lock" || return 1
  mkdir -p ".tools/main-job-node$major"
  ln -sfn "$node_bin" ".tools/main-job-node$major/node"
  ln -sfn "$dir/node_modules" ".tools/main-job-node$major/node_modules"
}

# The Node half of the framework gallery (examples/frameworks/node): its own pinned packages
# (@openai/agents needs openai 7, which needs Node >= 22), installed by Node 24 once per machine
# per lock hash and linked as its node_modules, with that Node as .tools/gallery-node/node;
# test/integration/frameworks-node.test.ts runs each framework's harness on it.
prepare_gallery_node() {
  local gallery=examples/frameworks/node wheel dir
  wheel=$(install_node_wheel 24.19.0) || return 1
  dir="$(rein_cache_dir)/gallery-node-$(sha256sum "$gallery/package-lock.json" | cut -c1-16)"
  cached_npm_ci "$dir" "the Node framework gallery's packages" "$wheel/bin/node" "$gallery" || return 1
  mkdir -p .tools/gallery-node
  ln -sfn "$wheel/bin/node" .tools/gallery-node/node
  ln -sfn "$dir/node_modules" "$gallery/node_modules"
}

mkdir -p .tools
# Before the background jobs: apt must not run twice at once.
install_chromium
install_test_pythons &
pythons=$!
(prepare_main_job_node 20 && prepare_main_job_node 22) &
node_versions=$!
prepare_gallery_node &
gallery_node=$!
status=0
if command -v go >/dev/null; then
  scripts/build-jaeger.sh &
  jaeger=$!
  scripts/build-kube.sh &
  kube=$!
  wait "$jaeger" || status=1
  wait "$kube" || status=1
else
  # The rest is set up all the same, so that npm test goes on from there once Go is installed.
  echo "setup-tests: Go 1.26 or newer is needed to build the tests' Jaeger and Kubernetes control plane (once per machine): install it (https://go.dev/dl/), then run: npm test" >&2
  status=1
fi
wait "$pythons" || status=1
wait "$node_versions" || status=1
wait "$gallery_node" || status=1
if [ "$status" -ne 0 ]; then
  echo "setup-tests: the test setup failed (see above); once fixed, run: npm test" >&2
  exit 1
fi
