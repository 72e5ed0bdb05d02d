#!/usr/bin/env bash
# Runs Berth on 127.0.0.1:8080 with its embedded defaults: the offline model when no engine credentials
# are configured, and authentication on. A JWT secret and an API token are generated once for this
# checkout (kept in .service/local.env, mode 0600) and used only where the environment gives none:
# every variable you set yourself wins. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
mkdir -p .service && chmod 700 .service
if [ ! -f .service/local.env ]; then
  # The umask applies to this file only: Berth itself must not inherit it (files it writes for the
  # container's unprivileged user have to stay readable).
  (
    umask 077
    {
      echo "SERVICE_JWT_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
      echo "SERVICE_API_TOKENS=berth-local-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    } >.service/local.env
  )
fi
# Generated values fill only what the environment leaves unset.
while IFS='=' read -r name value; do
  case "$name" in '' | \#*) continue ;; esac
  if [ -z "${!name+set}" ]; then export "$name=$value"; fi
done <.service/local.env

address="${SERVICE_ADDRESS:-127.0.0.1:8080}"
api_token="${SERVICE_API_TOKENS%%,*}"
if [ "${SERVICE_AUTH_ENABLED:-true}" = false ]; then
  cat <<MSG

  Berth is starting on http://$address  (Ctrl-C stops it; authentication is off)

  Run a prompt:
    curl -s -X POST http://$address/run -H 'Content-Type: application/json' -d '{"prompt":"say: hello from a container"}'
  Or with the CLI:  npx berth --url http://$address run "say: hello from a container"
  Web console:      http://$address/console

MSG
else
  cat <<MSG

  Berth is starting on http://$address  (Ctrl-C stops it)

  Get an access token with the API token (the first of SERVICE_API_TOKENS):
    TOKEN=\$(curl -s -X POST http://$address/auth/token -H 'Authorization: Bearer $api_token' \\
      -H 'Content-Type: application/json' -d '{"client_id":"me"}' | sed 's/.*"access_token":"\\([^"]*\\)".*/\\1/')
  Then run a prompt:
    curl -s -X POST http://$address/run -H "Authorization: Bearer \$TOKEN" \\
      -H 'Content-Type: application/json' -d '{"prompt":"say: hello from a container"}'
  Or with the CLI:  npx berth --url http://$address login   (paste the API token), then
                    npx berth --url http://$address run "say: hello from a container"
  Web console:      http://$address/console   (sign in with the API token)

MSG
fi
exec node --import tsx src/main.ts
