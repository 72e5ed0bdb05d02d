#!/usr/bin/env bash
# Builds Berth's own image, localhost/berth:<version> (version from package.json), offline, as the agent
# image is built (scripts/build-images.sh): no registry is needed.
#
#   layer 1  localhost/berth-base:<key>  Debian bookworm from debootstrap with the host commands Berth runs
#            (mount/umount, mkfs.ext4, nft, ip, git, runc).
#            Built once per package list: <key> is a digest of that list and of this step.
#   layer 2  the host's Node binary (Debian 12's nodejs is 18, under package.json's engines), the compiled
#            server (npm run build -> dist/main.js), its production node_modules, the web console's build,
#            laid out under /opt/berth as in the checkout (package.json, dist/, node_modules/, packages/console/dist).
#
# A second call with the same inputs (base, Node binary, dist/, lock file, console build, this script) finds
# the image labelled with their digest and does nothing. BERTH_IMAGE names another tag (tests use it).
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
say() { printf '\033[1m[berth-image]\033[0m %s\n' "$*"; }
fail() { printf '[berth-image] %s\n' "$*" >&2; exit 1; }

version=$(node -p 'require("./package.json").version')
image="${BERTH_IMAGE:-localhost/berth:$version}"
work=$(mktemp -d /tmp/berth-image.XXXXXX)
trap 'rm -rf "$work"' EXIT

# What the server runs on the host, by file (src/runtime/**): mount, umount (mount), mkfs.ext4
# (e2fsprogs), nft (nftables), ip (iproute2), git (workspaces' git source), runc (killing a timed-out
# build's steps), cp/chown/mkfifo (coreutils), ca-certificates (git over https, a remote model endpoint),
# procps (ps for an operator's `podman exec`). Not podman: Berth talks to the host's Podman over its socket;
# only compose builds (rootful Berth runs them with rootless Podman as a user of its own) need the CLI, and
# Debian's podman does not configure inside debootstrap (golang-github-containers-common): docs/deploy.md.
base_packages="ca-certificates,git,iproute2,nftables,e2fsprogs,runc,procps"
base_key=$( { echo "$base_packages"; sed -n '/^# >>> base$/,/^# <<< base$/p' "$0"; } | sha256sum | cut -c1-12)
base_image="localhost/berth-base:$base_key"

# >>> base
if podman image exists "$base_image"; then
  say "base $base_image is there"
else
  say "building the base $base_image with debootstrap (1-2 minutes; Debian mirror ${DEBIAN_MIRROR:-http://deb.debian.org/debian})"
  rootfs="$work/rootfs"
  debootstrap --variant=minbase --include="$base_packages" \
    bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$base_image" >/dev/null
  say "built $base_image"
fi
# <<< base

# The compiled server: `npm run build:server` compiles src/ to dist/ (dist/main.js as deep as src/main.ts, so
# every path the server resolves from its own place still resolves), and the SDK, the MCP tools and the CLI.
# Skipped when dist/main.js is newer than every source it is made of. The web console is built by `make setup`
# (and `npm run build`) and rebuilt here only when it is missing: a rebuild empties packages/console/dist, which
# a Berth running from this checkout serves at /console meanwhile.
main=dist/main.js
if [ -f "$main" ] && [ -z "$(find src packages/client/src packages/mcp/src packages/cli/src package.json tsconfig.json tsconfig.build.json \
  scripts/copy-server-assets.mjs -newer "$main" -print -quit 2>/dev/null)" ]; then
  say "dist/ is up to date"
else
  say "compiling the server (npm run build:server, about a minute)"
  npm run build:server --silent >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; fail "npm run build:server failed (log above)"; }
fi
[ -f "$main" ] || fail "$main is missing after npm run build:server"
if [ ! -f packages/console/dist/index.html ]; then
  say "building the web console (packages/console/dist)"
  npm run build -w @berth/console --silent >"$work/console.log" 2>&1 || { tail -30 "$work/console.log" >&2; fail "the web console's build failed (log above)"; }
fi

node_binary=$(command -v node)
node_version=$("$node_binary" --version)
case "$node_version" in v2[0-9].*) ;; *) fail "the host's Node is $node_version; Berth needs 20.18 or later (package.json engines)" ;; esac

# The production dependency tree, as npm resolves it from the lock file (no dev, no optional: the optional
# one is the engine binary, which lives in the engine image).
prod_tree() { npm ls --omit=dev --omit=optional --all --parseable "$@" 2>/dev/null | sed "s|^$PWD/||" | grep '^node_modules/' || true; }
prod_tree --workspaces=false >"$work/modules.all"
# The repository's own packages the server depends on (package.json's dependencies that are links to
# packages/*: @berth/client, @berth/mcp): installed as npm would install them from the registry (their packed
# files), not as the checkout's links, with their production dependencies.
declare -A wanted=()
for name in $(node -p 'Object.keys(require("./package.json").dependencies ?? {}).join(" ")'); do
  if [ -L "node_modules/$name" ] && [ -f "packages/${name#@berth/}/package.json" ]; then wanted[$name]=1; fi
done
[ -n "${!wanted[*]}" ] || fail "package.json names none of the repository's packages (@berth/client, @berth/mcp): run 'npm ci'"
# ... and the repository's packages those depend on (@berth/mcp on @berth/client), to a fixed point.
grown=1
while [ "$grown" = 1 ]; do
  grown=0
  for name in "${!wanted[@]}"; do
    while read -r module; do
      dependency=${module#node_modules/}
      if [ -L "$module" ] && [ -f "packages/${dependency#@berth/}/package.json" ] && [ -z "${wanted[$dependency]:-}" ]; then wanted[$dependency]=1; grown=1; fi
    done < <(prod_tree -w "$name")
  done
done
workspaces=("${!wanted[@]}")
for name in "${workspaces[@]}"; do prod_tree -w "$name" >>"$work/modules.all"; done
# Links (workspace packages) are not copied as links; those the server uses are packed below.
while read -r module; do [ -L "$module" ] || echo "$module"; done < <(sort -u "$work/modules.all") >"$work/modules.list"
[ -s "$work/modules.list" ] || fail "npm ls listed no production dependency (run 'npm ci')"

# The digest of every input of layer 2: a change to any of them rebuilds it, nothing else does.
inputs=$( {
  podman image inspect --format '{{.Id}}' "$base_image"
  sha256sum "$node_binary" "$0" package.json package-lock.json
  find dist packages/console/dist -type f -print0 | sort -z | xargs -0 sha256sum
  cat "$work/modules.list"
  for name in "${workspaces[@]}"; do find "$(dirname "$(readlink -f "node_modules/$name/package.json")")/dist" -type f -print0 | sort -z | xargs -0 sha256sum; done
} | sha256sum | cut -c1-32)
if [ "$(podman image inspect --format '{{index .Labels "io.berth.inputs"}}' "$image" 2>/dev/null || true)" = "$inputs" ]; then
  say "$image is up to date (inputs $inputs)"
  exit 0
fi

say "staging /opt/berth (the compiled server, $(wc -l <"$work/modules.list") production packages${workspaces[*]:+ and ${workspaces[*]}}, the console)"
app="$work/context/app"
mkdir -p "$app/packages/console"
cp package.json "$app/"
cp -a dist "$app/dist"
cp -a packages/console/dist "$app/packages/console/dist"
# --parents keeps each package's path; a package nested in another's node_modules comes with its parent.
xargs -a "$work/modules.list" cp -a --parents -t "$app"
for name in "${workspaces[@]}"; do
  mkdir -p "$work/packs" "$app/node_modules/$name"
  tarball=$(npm pack --ignore-scripts --silent -w "$name" --pack-destination "$work/packs" | tail -1)
  tar -xzf "$work/packs/$tarball" -C "$app/node_modules/$name" --strip-components=1
done
# Every import of them the server makes resolves and loads from what was staged (an import package.json does not
# declare fails here).
for specifier in $(grep -rhoE "(from |import\()['\"]@berth/[^'\"]*['\"]" dist | grep -oE "@berth/[^'\"]*" | sort -u); do
  (cd "$app" && node -e 'import(process.argv[1])' "$specifier") || fail "$specifier does not load from the staged packages (is its dist/ built?)"
done
cp "$node_binary" "$work/context/node"

cat >"$work/context/Containerfile" <<EOF
FROM $base_image
COPY node /usr/local/bin/node
COPY app /opt/berth
WORKDIR /opt/berth
# Paths the documented podman run line mounts at the same place as on the host (docs/deploy.md): Podman
# resolves the paths Berth hands it on the host.
ENV NODE_ENV=production \\
    SERVICE_PODMAN_SOCKET=/run/podman/podman.sock \\
    SERVICE_DATA_DIR=/var/lib/berth/data \\
    SERVICE_AGENT_SESSIONS_DIR=/var/lib/berth/sessions
LABEL io.berth.inputs=$inputs org.opencontainers.image.title=berth org.opencontainers.image.version=$version
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/node", "/opt/berth/$main"]
EOF
say "building $image"
podman build --quiet --pull=never -t "$image" "$work/context" >/dev/null
say "built $image ($(podman image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}'))"
