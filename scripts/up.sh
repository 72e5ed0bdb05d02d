#!/usr/bin/env bash
# Runs Berth on 127.0.0.1:8080 with its embedded defaults: the offline model when no engine credentials
# are configured, and authentication on, with a JWT secret and an API token generated once for this
# checkout (kept in .service/local.env, mode 0600). Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"
mkdir -p .service && chmod 700 .service
if [ ! -f .service/local.env ]; then
  umask 077
  {
    echo "SERVICE_JWT_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "SERVICE_API_TOKENS=berth-local-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  } > .service/local.env
fi
set -a
# shellcheck disable=SC1091
. .service/local.env
set +a
address="${SERVICE_ADDRESS:-127.0.0.1:8080}"
api_token="${SERVICE_API_TOKENS%%,*}"
cat <<MSG

  Berth is starting on http://$address  (Ctrl-C stops it)

  Get an access token with the local API token (kept in .service/local.env):
    TOKEN=\$(curl -s -X POST http://$address/auth/token -H 'Authorization: Bearer $api_token' \\
      -H 'Content-Type: application/json' -d '{"client_id":"me"}' | sed 's/.*"access_token":"\\([^"]*\\)".*/\\1/')
  Then run a prompt:
    curl -s -X POST http://$address/run -H "Authorization: Bearer \$TOKEN" \\
      -H 'Content-Type: application/json' -d '{"prompt":"say: hello from a container"}'

MSG
exec node --import tsx src/main.ts
