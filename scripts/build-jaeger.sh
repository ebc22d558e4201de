#!/usr/bin/env bash
# Builds Jaeger's all-in-one program (the OTLP backend the tracing test exports to) from the Go
# module pinned in tools/jaeger, once per machine: the binary lives in a cache keyed by the
# module's go.mod and go.sum, and .tools/jaeger links to it. Needs Go (1.25 or newer) and the
# Go module proxy; the build takes several minutes on 2 cores.
#
#   scripts/build-jaeger.sh        (REIN_CACHE_DIR moves the cache; default ~/.cache/rein)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/cache.sh

module=tools/jaeger
if ! command -v go >/dev/null; then
  echo "build-jaeger: Go is needed to build Jaeger (the tracing test's OTLP backend) from $module." >&2
  echo "              Install Go 1.25 or newer (https://go.dev/dl/) and run scripts/build-jaeger.sh again." >&2
  exit 1
fi
hash=$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)
cache=$(rein_cache_dir)
dir="$cache/jaeger-$hash"
mkdir -p "$cache" .tools
(
  # One build at a time per machine; a second caller waits and then finds it done.
  flock 9
  if [ -f "$dir/.complete" ] && [ -x "$dir/jaeger" ]; then
    echo "build-jaeger: Jaeger cached at $dir"
  else
    echo "build-jaeger: building Jaeger into $dir (once per machine; minutes)"
    rm -rf "$dir"
    mkdir -p "$dir"
    # -mod=readonly: the build uses exactly the pinned versions, or fails saying what is missing.
    (cd "$module" && go build -mod=readonly -trimpath -ldflags='-s -w' -o "$dir/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
    touch "$dir/.complete"
  fi
) 9>"$cache/jaeger.lock"
ln -sfn "$dir" .tools/jaeger
