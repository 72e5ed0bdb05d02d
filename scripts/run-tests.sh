#!/usr/bin/env bash
# Runs the test suites with node's test runner: unit tests (fast, fakes allowed) and integration tests
# (real Podman, real engine binary, offline model), one integration file at a time to keep a 2-core
# machine from timing runs out, then the users' path from a fresh clone.
# `scripts/run-tests.sh unit|integration|users-path` runs one suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
suite="${1:-all}"
status=0
# Everything the suites print also goes to a log, so that the last lines of a failed run name what failed
# (a CI that shows only the end of the output still says which test, type error or leak it was).
log=$(mktemp "${TMPDIR:-/tmp}/run-tests-log.XXXXXX")
trap 'rm -f "$log"' EXIT
if [ "$suite" = all ] || [ "$suite" = unit ]; then
  # tsx strips types without checking them: the type check is its own gate.
  echo "== type check (tsc --noEmit)"
  npx tsc --noEmit -p tsconfig.json 2>&1 | tee -a "$log" || status=1
  echo "== type check of the web console (tsc --noEmit -p packages/console)"
  npx tsc --noEmit -p packages/console/tsconfig.json 2>&1 | tee -a "$log" || status=1
  echo "== unit tests"
  mapfile -t files < <(find test/unit -name '*.test.ts' | sort)
  node --import tsx --test --test-concurrency=2 "${files[@]}" 2>&1 | sed -u "s/^/[unit] /" | tee -a "$log" || status=1
fi
if [ "$suite" = all ] || [ "$suite" = integration ]; then
  bash scripts/build-test-images.sh
  echo "== integration tests (real Podman)"
  mapfile -t files < <(find test/integration -name '*.test.ts' | sort)
  # Two shards side by side, each one file at a time: the suite mostly waits on containers (a sequential
  # run kept the 2 cores about 30 % busy), so two files at once halve the wall time. The files' seconds on
  # a sequential run balance the shards (greedy, longest first); a file not listed counts 30 s.
  declare -A seconds=([faults]=340 [compose]=152 [cli]=134 [restart]=86 [attack-agents-stall]=64 [pool]=57
    [sdk]=43 [attack-compose-disk]=43 [attack-compose]=36 [run]=34 [container-policy]=32 [attack-volume-swap]=32
    [settings-lifetimes]=100 [settings-limits]=80 [tracing-export]=66 [event-replay]=60 [settings-build-user]=50
    [container-live]=40 [engine-credentials]=40 [attack-stack-egress]=40
    [cluster]=250 [packages]=200 [cluster-forward]=55 [cluster-jobs]=60 [cluster-sessions]=35
    [mcp]=40 [mcp-engine]=25 [cluster-events]=20)
  weight() { local name; name=$(basename "$1" .test.ts); echo "${seconds[$name]:-30}"; }
  mapfile -t ordered < <(for f in "${files[@]}"; do echo "$(weight "$f") $f"; done | sort -rn | cut -d' ' -f2)
  shard_a=(); shard_b=(); load_a=0; load_b=0
  for f in "${ordered[@]}"; do
    if [ "$load_a" -le "$load_b" ]; then shard_a+=("$f"); load_a=$((load_a + $(weight "$f")));
    else shard_b+=("$f"); load_b=$((load_b + $(weight "$f"))); fi
  done
  # A file may take long: the fault matrix runs for about 6 minutes (its model-error row waits out the
  # engine's own retries).
  run_shard() {
    local tag=$1; shift
    node --import tsx --test --test-concurrency=1 --test-timeout=1500000 "$@" 2>&1 | sed -u "s/^/[$tag] /" | tee -a "$log"
  }
  run_shard a "${shard_a[@]}" & pid_a=$!
  run_shard b "${shard_b[@]}" & pid_b=$!
  wait "$pid_a" || status=1
  wait "$pid_b" || status=1
  # Nothing a test Berth starts may outlive it: containers, its key secrets, its Podman service.
  for label in berth.instance berth.image-tree berth.probe berth.stack; do
    left=$(podman ps -a --filter "label=$label" --format '{{.Names}}' | wc -l)
    if [ "$left" -gt 0 ]; then
      echo "LEAK: $left container(s) labelled $label left after the tests:" | tee -a "$log"; podman ps -a --filter "label=$label"
      status=1
    fi
  done
  # Compose stacks: their networks and volumes too.
  for kind in network volume; do
    left=$(podman "$kind" ls --filter label=berth.stack --quiet | wc -l)
    if [ "$left" -gt 0 ]; then
      echo "LEAK: $left ${kind}(s) of compose stacks left after the tests:" | tee -a "$log"; podman "$kind" ls --filter label=berth.stack
      status=1
    fi
  done
  # Each test Berth's agent network (berth-agents-<instance>), which it removes at its stop.
  agents=$(podman network ls --format '{{.Name}}' | grep -c -E '^berth-agents-(test|svc)-' || true)
  if [ "$agents" -gt 0 ]; then
    echo "LEAK: $agents agent network(s) of test instances left:" | tee -a "$log"; podman network ls --format '{{.Name}}' | grep -E '^berth-agents-(test|svc)-'
    status=1
  fi
  if runc list --quiet | grep -q '^buildah-'; then
    echo "LEAK: image build steps still running:" | tee -a "$log"; runc list
    status=1
  fi
  secrets=$(podman secret ls --format '{{.Name}}' | grep -c '^berth-offline-model-key-test-' || true)
  if [ "$secrets" -gt 0 ]; then
    echo "LEAK: $secrets offline-model key secret(s) of test instances left:" | tee -a "$log"; podman secret ls
    status=1
  fi
  # Run disks (loop-mounted ext4 images) and the nftables tables of test instances (network isolation).
  loops=$(losetup --list --noheadings --output BACK-FILE 2>/dev/null | grep -c 'berth-test-' || true)
  if [ "$loops" -gt 0 ]; then
    echo "LEAK: $loops loop device(s) of test instances still attached:" | tee -a "$log"; losetup --list | grep 'berth-test-'
    status=1
  fi
  # Workspaces' disks and their views, and workspaces bound at runs' workdirs: mounts of test instances.
  mounts=$(grep -c -E 'berth-(test|svc)-' /proc/self/mountinfo || true)
  if [ "$mounts" -gt 0 ]; then
    echo "LEAK: $mounts mount(s) of test instances left:" | tee -a "$log"; grep -E 'berth-(test|svc)-' /proc/self/mountinfo | cut -d' ' -f5
    status=1
  fi
  tables=$(nft list tables 2>/dev/null | grep -c 'berth-test-' || true)
  if [ "$tables" -gt 0 ]; then
    echo "LEAK: $tables nftables table(s) of test instances left:" | tee -a "$log"; nft list tables | grep 'berth-test-'
    status=1
  fi
  dirs=$(find "${TMPDIR:-/tmp}" -maxdepth 1 \( -name 'berth-test-*' -o -name 'berth-svc-*' \) | wc -l)
  if [ "$dirs" -gt 0 ]; then
    echo "LEAK: $dirs test directories left in ${TMPDIR:-/tmp}" | tee -a "$log"
    status=1
  fi
  # berth-svc-: Berths that tests start as child processes (test/support/service-process.ts).
  services=$(pgrep -f 'podman system service .*berth-(test|svc)-' | wc -l || true)
  if [ "$services" -gt 0 ]; then
    echo "LEAK: $services Podman service(s) of test instances still running:" | tee -a "$log"; pgrep -fa 'podman system service .*berth-(test|svc)-'
    status=1
  fi
fi
if [ "$suite" = all ] || [ "$suite" = users-path ]; then
  # Last, on a machine the other suites left clean: what a new user does, from a fresh clone of HEAD.
  echo "== users' path (fresh clone, make up, the README's commands, concurrent load, Ctrl-C)"
  node --import tsx --test --test-concurrency=1 --test-timeout=1800000 test/users-path/*.test.ts 2>&1 | sed -u "s/^/[users] /" | tee -a "$log" || status=1
fi
if [ "$status" -ne 0 ]; then
  # Each failed test with the lines that say why, then the bare list last, where a short tail shows it.
  echo "== what failed, and why"
  awk '/not ok [0-9]+ - / { n = 14 } n > 0 { print; n-- }' "$log" | cut -c1-240
  echo "== failed (the innermost test of each file first is the one to read)"
  grep -E 'not ok [0-9]+ - |error TS[0-9]+|^LEAK' "$log" | cut -c1-200 | tail -n 40
fi
exit $status
