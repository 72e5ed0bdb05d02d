#!/usr/bin/env bash
# Builds Berth's two images offline, once: the default agent image (Debian bookworm from
# debootstrap, non-root user `agent`) and the engine image (FROM scratch, the pinned Claude Code
# binary from npm). A second call finds both and does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
say() { printf '\033[1m[images]\033[0m %s\n' "$*"; }

berth_version=$(node -p 'require("./package.json").version')
engine_version=$(node -p 'require("./package.json").optionalDependencies["@anthropic-ai/claude-code-linux-x64"]')
agent_image="${SERVICE_AGENT_IMAGE:-localhost/berth-agent:$berth_version}"
engine_image="${SERVICE_ENGINE_IMAGE:-localhost/berth-engine:$engine_version}"
work=$(mktemp -d /tmp/berth-images.XXXXXX)
trap 'rm -rf "$work"' EXIT

if podman image exists "$agent_image"; then
  say "$agent_image is there"
else
  say "building $agent_image with debootstrap (about a minute)"
  rootfs="$work/rootfs"
  debootstrap --variant=minbase --include=bash,coreutils,git,ca-certificates,procps \
    bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  # The engine runs as this user; uid 1000 so that host-side files it writes have a predictable owner.
  chroot "$rootfs" useradd --create-home --uid 1000 --shell /bin/bash agent
  install -d -o 1000 -g 1000 -m 0755 "$rootfs/workspace"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import \
    --change 'USER agent' --change 'WORKDIR /workspace' --change 'ENV HOME=/home/agent' \
    --change 'LABEL io.berth.agent-image=official' --change 'CMD ["/bin/bash"]' \
    - "$agent_image" >/dev/null
  say "built $agent_image"
fi

if podman image exists "$engine_image"; then
  say "$engine_image is there"
else
  binary=node_modules/@anthropic-ai/claude-code-linux-x64/claude
  [ -x "$binary" ] || { echo "[images] $binary is missing: run 'npm ci' first" >&2; exit 1; }
  say "building $engine_image from $binary"
  mkdir -p "$work/engine"
  cp "$binary" "$work/engine/claude"
  printf 'FROM scratch\nCOPY claude /claude\n' >"$work/engine/Containerfile"
  podman build --quiet -t "$engine_image" "$work/engine" >/dev/null
  say "built $engine_image"
fi
