#!/usr/bin/env bash
# Puts `hacrl` on the PATH: a symbolic link to scripts/hacrl in HACRL_BIN_DIR (default /usr/local/bin, through sudo
# when it is not writable). A link rather than `npm link`: no npm global prefix to find, no lifecycle scripts run, no
# network; the link follows this checkout's builds. Safe to run again: it replaces only its own link.
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir="${HACRL_BIN_DIR:-/usr/local/bin}"
target="$PWD/scripts/hacrl"
link="$bin_dir/hacrl"
if [ "$(readlink -f "$link" 2>/dev/null)" = "$target" ]; then
  echo "setup: $link already runs this checkout's hacrl"
else
  if [ -e "$link" ] && [ ! -L "$link" ]; then
    echo "setup: $link exists and is not a link; leaving it (call $target, or set HACRL_BIN_DIR)" >&2
    exit 1
  fi
  sudo_cmd=""
  [ -w "$bin_dir" ] || [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd mkdir -p "$bin_dir"
  $sudo_cmd ln -sfn "$target" "$link"
  echo "setup: $link → $target"
fi
case ":$PATH:" in
  *":$bin_dir:"*) ;;
  *) echo "setup: $bin_dir is not on your PATH: add it (export PATH=\"$bin_dir:\$PATH\") to run hacrl" >&2 ;;
esac
