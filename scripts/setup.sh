#!/usr/bin/env bash
# Installs everything Berth needs on a fresh Debian 12 host: the Podman stack (as root, from
# Debian's packages), npm dependencies, and the agent and engine images. Idempotent: each step
# checks first and does nothing when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# tmux drives the CLI's end-to-end tests in a terminal; chromium runs the web console's tests headless;
# iproute2's `ip` fixes the agent network bridge's hardware address (runtime/podman/bridge-address.ts);
# nftables' `nft` keeps callers' networks apart (runtime/podman/network-isolation.ts); postgresql (Debian 12's 15)
# runs the PostgreSQL stores' tests on a throw-away server (test/support/postgres.ts).
packages=(podman runc crun uidmap slirp4netns fuse-overlayfs debootstrap docker-registry tmux chromium iproute2 nftables postgresql haproxy)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "[setup] missing Debian packages: ${missing[*]}; run 'sudo apt-get install ${missing[*]}' or run make as root" >&2
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm dependencies (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
fi

# The web console Berth serves at /console is a build of packages/console (with the SDK it bundles):
# built when missing, and again whenever one of its sources is newer than the build.
console_build=packages/console/dist/index.html
if [ ! -f "$console_build" ] || [ -n "$(find packages/console/src packages/console/public packages/console/index.html \
  packages/console/vite.config.ts packages/console/package.json packages/client/src -newer "$console_build" -print -quit)" ]; then
  say "building the web console (packages/console/dist)"
  npm run build -w @berth/console --silent >/dev/null
fi

bash scripts/build-images.sh
