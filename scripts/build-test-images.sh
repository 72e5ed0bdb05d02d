#!/usr/bin/env bash
# Images only the tests need, built offline: an Alpine-like musl image (for the musl refusal).
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
image=localhost/berth-test-musl:latest
podman image exists "$image" && exit 0
work=$(mktemp -d /tmp/berth-musl.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && { apt-get download musl busybox-static >/dev/null 2>&1 || { apt-get update -qq && apt-get download musl busybox-static >/dev/null; }; })
mkdir -p "$work/root/etc" "$work/root/bin" "$work/root/tmp"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
echo 3.20.0 > "$work/root/etc/alpine-release"
ln -sf busybox "$work/root/bin/sh"
tar -C "$work/root" -c . | podman import --change 'CMD ["/bin/sh"]' - "$image" >/dev/null
echo "[images] built $image"
