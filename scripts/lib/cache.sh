# shellcheck shell=bash
# The per-machine cache of what setup installs once (REIN_CACHE_DIR, default ~/.cache/rein):
# pinned Python environments, Node.js runtimes from PyPI, the Go-built test servers.

rein_cache_dir() {
  echo "${REIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rein}"
}

# cached_pip_env DIR LABEL PIP_ARGS...: a Python virtual environment at DIR with `pip install
# PIP_ARGS` done, once: a second caller waits for the first (flock) and then finds it complete.
# Messages go to stderr, so callers may print results on stdout.
cached_pip_env() {
  local dir=$1 label=$2
  shift 2
  mkdir -p "$(dirname "$dir")"
  (
    flock 9
    if [ -f "$dir/.complete" ] && "$dir/bin/python" -c 'import sys' 2>/dev/null; then
      echo "setup: $label cached at $dir" >&2
    else
      echo "setup: installing $label into $dir (once per machine)" >&2
      rm -rf "$dir"
      python3 -m venv "$dir"
      "$dir/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "$@" >&2
      touch "$dir/.complete"
    fi
  ) 9>"$dir.lock"
}

# install_cached_python NAME LOCK: the pinned Python environment of a lock file, keyed by the
# file's hash; .tools/NAME links to it.
install_cached_python() {
  local name=$1 lock=$2 hash env_dir
  hash=$(sha256sum "$lock" | cut -c1-16)
  env_dir="$(rein_cache_dir)/$name-python-$hash"
  cached_pip_env "$env_dir" "the $name Python environment" -r "$lock"
  mkdir -p .tools
  ln -sfn "$env_dir" ".tools/$name"
}
