#!/usr/bin/env bash
# Runs the test suites with node's test runner: unit tests (fast, fakes allowed) and integration tests
# (real Podman, real engine binary, offline model), one integration file at a time to keep a 2-core
# machine from timing runs out. `scripts/run-tests.sh unit|integration` runs one suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
suite="${1:-all}"
status=0
if [ "$suite" = all ] || [ "$suite" = unit ]; then
  echo "== unit tests"
  mapfile -t files < <(find test/unit -name '*.test.ts' | sort)
  node --import tsx --test --test-concurrency=2 "${files[@]}" || status=1
fi
if [ "$suite" = all ] || [ "$suite" = integration ]; then
  bash scripts/build-test-images.sh
  echo "== integration tests (real Podman)"
  mapfile -t files < <(find test/integration -name '*.test.ts' | sort)
  node --import tsx --test --test-concurrency=1 --test-timeout=600000 "${files[@]}" || status=1
  left=$(podman ps -a --filter label=berth.instance --format '{{.Names}}' | wc -l)
  if [ "$left" -gt 0 ]; then
    echo "LEAK: $left Berth container(s) left after the tests:"; podman ps -a --filter label=berth.instance
    status=1
  fi
fi
exit $status
