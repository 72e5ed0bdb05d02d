# Sourced by scripts/up.sh and scripts/cluster.sh: the local credentials of this checkout and the welcome
# message both print. Not run on its own.

# Fills the environment from .service/local.env: a JWT secret and an API token generated once for this
# checkout (mode 0600), used only where the environment gives none (every variable you set yourself wins).
# Nothing is generated when the environment already holds both, or when authentication is off.
berth_local_env() {
  # Root's only; `make cluster` may have opened it to the postgres group for traversal (g=x), which stays:
  # a second cluster or `make up` must not close it under a running PostgreSQL.
  if [ -d .service ]; then chmod u=rwx,g-rw,o= .service; else mkdir -m 700 .service; fi
  if [ "${SERVICE_AUTH_ENABLED:-true}" = false ] || { [ -n "${SERVICE_JWT_SECRET:-}" ] && [ -n "${SERVICE_API_TOKENS:-}" ]; }; then
    return 0
  fi
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
  local name value
  while IFS='=' read -r name value; do
    case "$name" in '' | \#*) continue ;; esac
    if [ -z "${!name+set}" ]; then export "$name=$value"; fi
  done <.service/local.env
}

# Prints where Berth answers and how to call it: berth_welcome ADDRESS [WHAT] [STOP]
# (WHAT names what starts, STOP says what Ctrl-C does).
berth_welcome() {
  local address="$1" what="${2:-Berth is starting}" stop="${3:-Ctrl-C stops it}"
  local api_token="${SERVICE_API_TOKENS:-}"; api_token="${api_token%%,*}"
  # An entry may name its caller (`alice:<token>`; a name ends at the first colon): the token follows it.
  case "$api_token" in *:*) api_token="${api_token#*:}" ;; esac
  if [ "${SERVICE_AUTH_ENABLED:-true}" = false ]; then
    cat <<MSG

  $what on http://$address  ($stop; authentication is off)

  Run a prompt:
    curl -s -X POST http://$address/run -H 'Content-Type: application/json' -d '{"prompt":"say: hello from a container"}'
  Or with the CLI:  npx berth --url http://$address run "say: hello from a container"
  Web console:      http://$address/console

MSG
  else
    cat <<MSG

  $what on http://$address  ($stop)

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
}
