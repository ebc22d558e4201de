#!/usr/bin/env bash
# Builds the Kubernetes control plane Rein's Kubernetes tests run against (kube-apiserver,
# kube-controller-manager and etcd; no scheduler and no kubelet: the tests' node agent binds and
# runs pods) from the Go modules pinned in tools/kube, once per machine: the binaries live in a
# cache keyed by those modules' go.mod and go.sum, and .tools/kube links to it. Needs Go (1.26
# or newer) and the Go module proxy; the cold build takes about 8 minutes on 2 cores.
#
#   scripts/build-kube.sh        (REIN_CACHE_DIR moves the cache; default ~/.cache/rein)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/cache.sh

modules=(tools/kube/control-plane tools/kube/etcd)
if ! command -v go >/dev/null; then
  echo "build-kube: Go is needed to build the Kubernetes control plane (the Kubernetes tests' kube-apiserver, kube-controller-manager, etcd) from tools/kube." >&2
  echo "            Install Go 1.26 or newer (https://go.dev/dl/) and run scripts/build-kube.sh again." >&2
  exit 1
fi
hash=$(for m in "${modules[@]}"; do cat "$m/go.mod" "$m/go.sum"; done | sha256sum | cut -c1-16)
cache=$(rein_cache_dir)
dir="$cache/kube-$hash"
mkdir -p "$cache" .tools
(
  # One build at a time per machine; a second caller waits and then finds it done.
  flock 9
  if [ -f "$dir/.complete" ]; then
    echo "build-kube: Kubernetes control plane cached at $dir"
  else
    echo "build-kube: building kube-apiserver, kube-controller-manager and etcd into $dir (once per machine; minutes)"
    rm -rf "$dir"
    mkdir -p "$dir"
    # -mod=readonly: the build uses exactly the pinned versions, or fails saying what is missing.
    # nice: the build takes every core for minutes; whatever else runs here keeps going.
    build() { nice -n 19 go build -mod=readonly -trimpath "$@"; }
    (cd tools/kube/etcd && build -ldflags='-s -w' -o "$dir/etcd" .)
    # The version the binaries report (kubectl version, /version) comes from the pinned module.
    version=$(cd tools/kube/control-plane && go list -mod=readonly -m -f '{{.Version}}' k8s.io/kubernetes)
    minor=$(echo "$version" | cut -d. -f2)
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    for cmd in kube-apiserver kube-controller-manager; do
      (cd tools/kube/control-plane && build -ldflags="$ldflags" -o "$dir/$cmd" "k8s.io/kubernetes/cmd/$cmd")
    done
    touch "$dir/.complete"
  fi
) 9>"$cache/kube.lock"
ln -sfn "$dir" .tools/kube
