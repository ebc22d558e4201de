# shellcheck shell=bash
# install_cached_python NAME LOCK: a pinned Python environment lives once per machine in a cache
# keyed by its lock file's hash (REIN_CACHE_DIR, default ~/.cache/rein); .tools/NAME links to it.
install_cached_python() {
  local name=$1 lock=$2
  local hash
  hash=$(sha256sum "$lock" | cut -c1-16)
  local cache="${REIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rein}"
  local env_dir="$cache/$name-python-$hash"
  mkdir -p "$cache" .tools
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
