#!/usr/bin/env bash
# Runs Berth on 127.0.0.1:8080 with its embedded defaults: the offline model when no engine credentials
# are configured, and authentication on. A JWT secret and an API token are generated once for this
# checkout (kept in .service/local.env, mode 0600) and used only where the environment gives none:
# every variable you set yourself wins. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
source scripts/local-env.sh
berth_local_env
berth_welcome "${SERVICE_ADDRESS:-127.0.0.1:8080}"
exec node --import tsx src/main.ts
