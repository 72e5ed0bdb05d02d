#!/usr/bin/env bash
# Images only the tests need, built offline, each once: an Alpine-like musl image (for the musl refusal),
# the default agent image run as root (for the user-namespace attack tests), and one with the engine inside.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
berth_version=$(node -p 'require("./package.json").version')
agent_image="${SERVICE_AGENT_IMAGE:-localhost/berth-agent:$berth_version}"
work=$(mktemp -d /tmp/berth-test-images.XXXXXX)
trap 'rm -rf "$work"' EXIT

musl=localhost/berth-test-musl:latest
if ! podman image exists "$musl"; then
  (cd "$work" && { apt-get download musl busybox-static >/dev/null 2>&1 || { apt-get update -qq && apt-get download musl busybox-static >/dev/null; }; })
  mkdir -p "$work/root/etc" "$work/root/bin" "$work/root/tmp"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
  echo 3.20.0 >"$work/root/etc/alpine-release"
  ln -sf busybox "$work/root/bin/sh"
  tar -C "$work/root" -c . | podman import --change 'CMD ["/bin/sh"]' - "$musl" >/dev/null
  echo "[images] built $musl"
fi

root=localhost/berth-test-root:latest
if ! podman image exists "$root"; then
  printf 'FROM %s\nUSER root\n' "$agent_image" >"$work/Containerfile.root"
  podman build --quiet -t "$root" -f "$work/Containerfile.root" "$work" >/dev/null
  echo "[images] built $root"
fi

# The default agent image with the engine installed on its PATH (SERVICE_AGENT_MOUNT_CLAUDE_CLI=false).
with_engine=localhost/berth-test-agent-engine:latest
if ! podman image exists "$with_engine"; then
  binary=node_modules/@anthropic-ai/claude-code-linux-x64/claude
  [ -x "$binary" ] || { echo "[images] $binary is missing: run 'npm ci' first" >&2; exit 1; }
  cp "$binary" "$work/claude"
  printf 'FROM %s\nCOPY claude /usr/local/bin/claude\n' "$agent_image" >"$work/Containerfile.engine"
  podman build --quiet -t "$with_engine" -f "$work/Containerfile.engine" "$work" >/dev/null
  echo "[images] built $with_engine"
fi

# A real service for compose environments, offline: Redis from Debian's packages. Also used as the agent
# service of test stacks (it is glibc and has redis-cli); the non-root user `agent` as in the agent image.
redis=localhost/berth-test-redis:bookworm
if ! podman image exists "$redis"; then
  echo "[images] building $redis with debootstrap (about a minute)"
  rootfs="$work/redis"
  debootstrap --variant=minbase --include=redis-server,redis-tools,procps \
    bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/redis-debootstrap.log" 2>&1 \
    || { tail -20 "$work/redis-debootstrap.log" >&2; exit 1; }
  chroot "$rootfs" useradd --create-home --uid 1000 --shell /bin/sh agent
  install -d -o 1000 -g 1000 -m 0755 "$rootfs/workspace"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --quiet \
    --change 'USER agent' --change 'WORKDIR /workspace' --change 'ENV HOME=/home/agent' \
    --change 'CMD ["redis-server","--protected-mode","no","--dir","/tmp"]' \
    - "$redis" >/dev/null
  echo "[images] built $redis"
fi
