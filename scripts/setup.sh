#!/usr/bin/env bash
# Installs everything hacrl needs on a Debian machine that has Node 20 and apt, then builds the project.
# Debian packages: a C toolchain for the native addon, the BLAS libraries it loads at run time (oneDNN, BLIS,
# OpenBLAS: it uses the fastest present), and PyTorch with NumPy (python3-torch), which the tests and benchmarks use
# as the independent reference implementation, Chromium, which renders `hacrl report` pages to PNG (and lets the
# tests check the plots are drawn), bubblewrap, the namespaces of the sandbox for model-written code
# (docs/sandbox.md), and nats-server, the broker agents run as separate processes exchange rollouts through
# (`hacrl agent`; the tests start their own on a free loopback port). Safe to run again: it installs only what is
# missing. Last, `hacrl` is put on the PATH (scripts/link-cli.sh: a link in /usr/local/bin, or HACRL_BIN_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential python3 libdnnl-dev libblis-dev libopenblas-dev python3-torch python3-numpy chromium bubblewrap nats-server)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# node-gyp must build against the headers of the running Node (never download them: the network may be closed).
node_prefix="$(dirname "$(dirname "$(command -v node)")")"
if [ -f "$node_prefix/include/node/node_api.h" ]; then
  export npm_config_nodedir="$node_prefix"
fi

npm ci --no-audit --no-fund
npm run build
bash scripts/link-cli.sh
