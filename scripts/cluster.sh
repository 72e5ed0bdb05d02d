#!/usr/bin/env bash
# `make cluster`: a local Berth cluster on this one host (issue 26), thrown away at Ctrl-C.
#
#   PostgreSQL 15   a throw-away server: initdb under $BERTH_CLUSTER_DIR/pg, run as the `postgres` system user
#                   (PostgreSQL refuses root), on 127.0.0.1 only (password auth on TCP, trust on its private
#                   socket), a free port (BERTH_CLUSTER_PG_PORT).
#   three nodes     Berth processes on 127.0.0.1:8081-8083 (BERTH_CLUSTER_NODE_PORTS), each with its own data
#                   and sessions directories, instance name (so its containers, network and nftables tables
#                   are its own), Podman service (Berth starts one per data directory), node name and URL;
#                   one SERVICE_SHARED_DIR for all, where sessions' workspaces are kept between runs.
#   HAProxy         on 127.0.0.1:8080 (BERTH_CLUSTER_ADDRESS), deploy/haproxy.cfg, health checks on /health.
#
# Every SERVICE_* variable you set applies to all three nodes, and wins over the defaults below (a
# SERVICE_DATABASE_URL of yours replaces the throw-away server); the per-node ones (address, node name and URL,
# instance, data and sessions directories, metrics and gateway ports) are set here, from the lists below.
# Authentication is on with the checkout's generated credentials, as `make up` (scripts/local-env.sh).
#
# Ctrl-C (SIGINT) or SIGTERM stops everything: the nodes first (each removes its containers), then HAProxy,
# then PostgreSQL; what a node killed on the way left (its Podman service, containers, network, nftables
# tables, mounts, loop devices) is removed too; the directory is removed except its logs/.
# The nodes, HAProxy and PostgreSQL run in sessions of their own, so that a terminal's Ctrl-C reaches this
# script only and the stop happens in that order (PostgreSQL must outlive the nodes' last writes).
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$PWD
export CONTAINERS_CONF="${CONTAINERS_CONF:-$checkout/scripts/containers.conf}"
source scripts/local-env.sh

say() { printf '\033[1m[cluster]\033[0m %s\n' "$*"; }
fail() { printf '\033[1m[cluster]\033[0m %s\n' "$*" >&2; exit 1; }

# ---- configuration: yours wins ----------------------------------------------------------------------------
dir="${BERTH_CLUSTER_DIR:-$checkout/.service/cluster}"
case "$dir" in /*) ;; *) dir="$checkout/$dir" ;; esac
name="${BERTH_CLUSTER_NAME:-cluster}"
lb_address="${BERTH_CLUSTER_ADDRESS:-127.0.0.1:8080}"
read -r -a node_ports <<<"${BERTH_CLUSTER_NODE_PORTS:-8081 8082 8083}"
read -r -a metrics_ports <<<"${BERTH_CLUSTER_METRICS_PORTS:-9091 9092 9093}"
read -r -a gateway_ports <<<"${BERTH_CLUSTER_GATEWAY_PORTS:-8791 8792 8793}"
start_timeout="${BERTH_CLUSTER_START_TIMEOUT:-180}"
[[ "$name" =~ ^[a-z0-9][a-z0-9-]{0,30}$ ]] || fail "BERTH_CLUSTER_NAME \"$name\": 1-31 lower-case letters, digits or '-'"
for list in node_ports metrics_ports gateway_ports; do
  declare -n ports="$list"
  [ "${#ports[@]}" -eq 3 ] || fail "BERTH_CLUSTER_${list^^}: three ports, one per node (got \"${ports[*]}\")"
  for port in "${ports[@]}"; do [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ] && [ "$port" -lt 65536 ] || fail "BERTH_CLUSTER_${list^^}: \"$port\" is not a port"; done
  unset -n ports
done
[ "$(id -u)" = 0 ] || fail "run as root: the nodes use rootful Podman, and PostgreSQL is started as the postgres user"
command -v haproxy >/dev/null || fail "HAProxy is not installed (scripts/setup.sh installs Debian's haproxy)"
pg_bin=/usr/lib/postgresql/15/bin
own_database=${SERVICE_DATABASE_URL:+yes}
[ -n "$own_database" ] || [ -x "$pg_bin/initdb" ] || fail "PostgreSQL 15 is not installed ($pg_bin; scripts/setup.sh installs Debian's postgresql)"

berth_local_env
# Three nodes on one host: fewer warm engines each than a single `make up` (4 + 1), unless you say otherwise.
export SERVICE_POOL_SIZE="${SERVICE_POOL_SIZE:-2}"
export SERVICE_SHARED_DIR="${SERVICE_SHARED_DIR:-$dir/shared}"
# HAProxy is the client every node sees: its X-Forwarded-For names the caller (rate limits per client).
export SERVICE_RATE_LIMIT_TRUSTED_PROXIES="${SERVICE_RATE_LIMIT_TRUSTED_PROXIES:-127.0.0.1}"

run_dir="$dir/run"
logs="$dir/logs"
pg_dir="$dir/pg"
# Where PostgreSQL's files go when the postgres user cannot walk to $dir (a checkout under root's 0700 home, a
# 0700 temporary directory): postgres's own home, under a name made of this cluster directory's path.
pg_fallback_dir="/var/lib/postgresql/berth-cluster-$(printf '%s' "$dir" | sha256sum | cut -c1-12)"
node_pids=()
node_instances=()
haproxy_pid=""
pg_started=""
stopping=""

# Whether a process runs (a zombie, not yet reaped by this script, does not).
alive() { [ -n "$1" ] && [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
as_postgres() { runuser -u postgres -- "$@"; }

# ---- stopping: the nodes, their leftovers, HAProxy, PostgreSQL, the directory -----------------------------
remove_node_leftovers() {
  local instance="$1" node_dir="$2" pid_file ids family networks
  # A node killed -9 leaves its Podman service running (it is the node's child, not in its session's way).
  pid_file="$node_dir/data/podman/podman.pid"
  if [ -f "$pid_file" ] && alive "$(cat "$pid_file")"; then kill -TERM "$(cat "$pid_file")" 2>/dev/null || true; fi
  ids=$(podman ps -aq --filter "label=berth.instance=$instance" 2>/dev/null; podman ps -aq --filter "label=berth.image-tree=$instance" 2>/dev/null; podman ps -aq --filter "label=berth.stack-instance=$instance" 2>/dev/null)
  if [ -n "$ids" ]; then
    say "removing $(wc -w <<<"$ids") container(s) left by $instance"
    # shellcheck disable=SC2086
    podman rm --force --volumes $ids >/dev/null 2>&1 || true
  fi
  # The nftables tables first: they name the network's bridge, which Podman hands to the next network made.
  for family in inet bridge; do
    nft list table "$family" "berth-$instance" >/dev/null 2>&1 && nft delete table "$family" "berth-$instance" 2>/dev/null || true
  done
  networks=$(podman network ls --filter "label=berth.instance=$instance" --format '{{.Name}}' 2>/dev/null; podman network ls --filter "label=berth.stack-instance=$instance" --format '{{.Name}}' 2>/dev/null)
  # shellcheck disable=SC2086
  [ -z "$networks" ] || podman network rm --force $networks >/dev/null 2>&1 || true
  ids=$(podman volume ls -q --filter "label=berth.stack-instance=$instance" 2>/dev/null)
  # shellcheck disable=SC2086
  [ -z "$ids" ] || podman volume rm --force $ids >/dev/null 2>&1 || true
}

# Mounts and loop devices under the cluster's directory (a killed node's workspace and run disks).
release_mounts() {
  local target loop
  findmnt -rn -o TARGET | awk -v prefix="$dir/" 'index($0, prefix) == 1' | sort -r | while read -r target; do
    umount -l "$target" 2>/dev/null || true
  done
  losetup -l -n -O NAME,BACK-FILE 2>/dev/null | awk -v prefix="$dir/" 'index($2, prefix) == 1 { print $1 }' | while read -r loop; do
    losetup -d "$loop" 2>/dev/null || true
  done
}

stop_cluster() {
  local code=$? i pid deadline
  [ -z "$stopping" ] || return 0
  stopping=yes
  # A second Ctrl-C must not cut the stop short: it would leave containers and PostgreSQL behind.
  trap 'say "stopping already, please wait"' INT TERM
  say "stopping the cluster"
  for i in "${!node_pids[@]}"; do
    pid="${node_pids[$i]}"
    alive "$pid" && kill -INT "$pid" 2>/dev/null || true
  done
  # SERVICE_SHUTDOWN_MODE decides what a node does with its work (stop: cancel and remove); a minute at most.
  deadline=$((SECONDS + 60))
  for i in "${!node_pids[@]}"; do
    pid="${node_pids[$i]}"
    while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    if alive "$pid"; then
      say "node-$((i + 1)) did not stop within a minute: killed"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  for i in "${!node_instances[@]}"; do remove_node_leftovers "${node_instances[$i]}" "$dir/node-$((i + 1))"; done
  if [ -n "$haproxy_pid" ]; then
    kill -TERM "$haproxy_pid" 2>/dev/null || true
    wait "$haproxy_pid" 2>/dev/null || true
  fi
  if [ -n "$pg_started" ]; then
    as_postgres "$pg_bin/pg_ctl" --pgdata "$pg_dir/data" --mode fast --wait stop >/dev/null 2>&1 ||
      { pid=$(head -1 "$pg_dir/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null; } || true
  fi
  release_mounts
  rm -rf "$run_dir" "$pg_dir" "$dir"/node-* "$dir/shared"
  say "stopped; logs kept in $logs"
  exit "$code"
}
trap stop_cluster EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the directory -----------------------------------------------------------------------------------------
if [ -d "$run_dir" ]; then
  for pid_file in "$run_dir"/*.pid; do
    [ -f "$pid_file" ] && alive "$(cat "$pid_file")" && { stopping=yes; fail "a cluster is running from $dir already (pid $(cat "$pid_file")); stop it first"; }
  done
fi
# What a cluster killed without its stop left (this script killed -9): its nodes' leftovers, then the directory.
for old in "$dir"/node-*/instance; do
  [ -f "$old" ] && remove_node_leftovers "$(cat "$old")" "$(dirname "$old")"
done
for old in "$pg_dir" "$pg_fallback_dir"; do
  [ -f "$old/data/postmaster.pid" ] && as_postgres "$pg_bin/pg_ctl" --pgdata "$old/data" --mode immediate --wait stop >/dev/null 2>&1 || true
done
release_mounts
rm -rf "$run_dir" "$pg_dir" "$pg_fallback_dir" "$dir"/node-* "$dir/shared"
mkdir -p "$run_dir" "$logs" "$SERVICE_SHARED_DIR"
chmod 700 "$run_dir"
# PostgreSQL runs as the postgres user, who must be able to walk to its directory: the checkout's .service (0700,
# root's) and the cluster's directory are opened to the postgres group only, for traversal only (0710).
if [ -z "$own_database" ]; then
  for walked in "$checkout/.service" "$dir"; do
    case "$dir/" in "$walked"/*) chgrp postgres "$walked" && chmod 0710 "$walked" ;; esac
  done
  if ! runuser -u postgres -- test -x "$dir"; then
    # A parent directory is closed to it (root's home, a 0700 temporary directory): Berth does not open it.
    pg_dir="$pg_fallback_dir"
    say "the postgres user cannot reach $dir (a parent directory is closed to it): PostgreSQL's files go to $pg_dir, removed at stop"
  fi
fi

# ---- PostgreSQL ----------------------------------------------------------------------------------------------
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
if [ -n "$own_database" ]; then
  say "using your SERVICE_DATABASE_URL (no throw-away PostgreSQL)"
else
  pg_port="${BERTH_CLUSTER_PG_PORT:-$(free_port)}"
  say "starting PostgreSQL 15 on 127.0.0.1:$pg_port ($pg_dir, as the postgres user)"
  pg_password=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
  mkdir -m 0700 "$pg_dir" && chown postgres:postgres "$pg_dir"
  (umask 077 && printf '%s' "$pg_password" >"$pg_dir/password") && chown postgres:postgres "$pg_dir/password"
  as_postgres "$pg_bin/initdb" --pgdata "$pg_dir/data" --username berth --pwfile "$pg_dir/password" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C --no-instructions >"$logs/postgres-initdb.log" 2>&1 ||
    fail "initdb failed: $(tail -5 "$logs/postgres-initdb.log")"
  rm -f "$pg_dir/password"
  as_postgres mkdir -m 0700 "$pg_dir/socket"
  # Throw-away: fsync off (nothing here must survive a power loss). Three nodes' pools fit max_connections.
  pg_started=yes
  as_postgres "$pg_bin/pg_ctl" --pgdata "$pg_dir/data" --log "$pg_dir/server.log" --wait \
    --options "-k $pg_dir/socket -p $pg_port -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null || fail "PostgreSQL did not start: $(tail -5 "$pg_dir/server.log")"
  echo "$(head -1 "$pg_dir/data/postmaster.pid")" >"$run_dir/postgres.pid"
  as_postgres "$pg_bin/createdb" --host "$pg_dir/socket" --port "$pg_port" --username berth berth
  export SERVICE_DATABASE_URL="postgres://berth:$pg_password@127.0.0.1:$pg_port/berth"
fi
# For tools that read the shared store (psql, bench/dispatch-latency.ts): readable by root only.
(umask 077 && echo "SERVICE_DATABASE_URL=$SERVICE_DATABASE_URL" >"$run_dir/database.env")

# ---- the nodes -------------------------------------------------------------------------------------------------
for i in 0 1 2; do
  n=$((i + 1))
  node_dir="$dir/node-$n"
  instance="$name-node-$n"
  mkdir -p "$node_dir"
  echo "$instance" >"$node_dir/instance"
  node_instances+=("$instance")
  say "starting node-$n on 127.0.0.1:${node_ports[$i]} (instance $instance; log $logs/node-$n.log)"
  (
    export SERVICE_ADDRESS="127.0.0.1:${node_ports[$i]}"
    export SERVICE_NODE_NAME="node-$n"
    export SERVICE_NODE_URL="http://127.0.0.1:${node_ports[$i]}"
    export SERVICE_INSTANCE_NAME="$instance"
    export SERVICE_DATA_DIR="$node_dir/data"
    export SERVICE_AGENT_SESSIONS_DIR="$node_dir/sessions"
    export SERVICE_METRICS_ADDRESS="127.0.0.1:${metrics_ports[$i]}"
    export SERVICE_GATEWAY_PORT="${gateway_ports[$i]}"
    # Each node's embedded offline model on a port of its own choosing (only its own gateway calls it).
    export SERVICE_OFFLINE_MODEL_PORT=0
    # The node's agent network follows its instance (a SERVICE_AGENT_NETWORK of yours would be shared by all).
    unset SERVICE_AGENT_NETWORK
    exec setsid node --import tsx src/main.ts >>"$logs/node-$n.log" 2>&1
  ) &
  node_pids+=($!)
  echo "${node_pids[$i]}" >"$run_dir/node-$n.pid"
done

# Waits for every node's /health, showing progress; a node that exits on the way stops the start.
started=$SECONDS
pending=(0 1 2)
while [ "${#pending[@]}" -gt 0 ]; do
  still=()
  for i in "${pending[@]}"; do
    if ! alive "${node_pids[$i]}"; then
      wait "${node_pids[$i]}" 2>/dev/null || true
      fail "node-$((i + 1)) exited during its start; the end of $logs/node-$((i + 1)).log:
$(tail -15 "$logs/node-$((i + 1)).log")"
    fi
    if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:${node_ports[$i]}/health"; then
      say "node-$((i + 1)) is up ($((SECONDS - started)) s)"
    else
      still+=("$i")
    fi
  done
  pending=("${still[@]}")
  [ "${#pending[@]}" -eq 0 ] && break
  waiting=$(for i in "${pending[@]}"; do printf 'node-%s ' $((i + 1)); done)
  [ $((SECONDS - started)) -lt "$start_timeout" ] || fail "${waiting}not up after ${start_timeout} s; see $logs"
  if [ $(((SECONDS - started) % 10)) -eq 0 ]; then say "waiting for ${waiting}($((SECONDS - started)) s)"; fi
  sleep 1
done

# ---- HAProxy ---------------------------------------------------------------------------------------------------
say "starting HAProxy on $lb_address (deploy/haproxy.cfg; log $logs/haproxy.log)"
export BERTH_LB_ADDRESS="$lb_address"
export BERTH_NODE_1="127.0.0.1:${node_ports[0]}" BERTH_NODE_2="127.0.0.1:${node_ports[1]}" BERTH_NODE_3="127.0.0.1:${node_ports[2]}"
haproxy -c -q -f deploy/haproxy.cfg || fail "deploy/haproxy.cfg is not valid"
setsid haproxy -f deploy/haproxy.cfg -db >>"$logs/haproxy.log" 2>&1 &
haproxy_pid=$!
echo "$haproxy_pid" >"$run_dir/haproxy.pid"
# Ready once HAProxy answers /health through a node (its checks need two passes, `rise 2`, to bring one up).
for _ in $(seq 1 100); do
  alive "$haproxy_pid" || fail "HAProxy exited: $(tail -5 "$logs/haproxy.log")"
  curl -sf -o /dev/null --max-time 2 "http://$lb_address/health" && break
  sleep 0.2
done
curl -sf -o /dev/null --max-time 2 "http://$lb_address/health" || fail "HAProxy does not answer on $lb_address; see $logs/haproxy.log"
sleep 2

berth_welcome "$lb_address" "A Berth cluster (node-1..3 behind HAProxy) is running" "Ctrl-C stops every part of it"
cat <<MSG
  The nodes themselves: $(for i in 0 1 2; do printf 'http://127.0.0.1:%s ' "${node_ports[$i]}"; done)
  Logs: $logs   Try losing a node: kill -9 \$(cat $run_dir/node-2.pid)
  The database: SERVICE_DATABASE_URL in $run_dir/database.env (psql "\$(sed -n 's/^SERVICE_DATABASE_URL=//p' $run_dir/database.env)")

MSG
touch "$run_dir/ready"

# ---- running: say when a part exits; the cluster goes on without a lost node ---------------------------------
reported=()
while :; do
  for i in 0 1 2; do
    if [ -z "${reported[$i]:-}" ] && ! alive "${node_pids[$i]}"; then
      code=0
      wait "${node_pids[$i]}" 2>/dev/null || code=$?
      reported[$i]=yes
      say "node-$((i + 1)) exited (code $code); the other nodes take over its work once its lease ($(printenv SERVICE_NODE_LEASE || echo 15s)) lapses"
    fi
  done
  if [ -z "${reported[3]:-}" ] && ! alive "$haproxy_pid"; then reported[3]=yes; say "HAProxy exited; see $logs/haproxy.log"; fi
  sleep 1 &
  wait $! || true
done
