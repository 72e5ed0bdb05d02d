# The two commands: `make up` runs Berth with its embedded defaults, `make test` runs every test.
.PHONY: up test setup test-unit test-integration test-users-path bench typecheck cluster image

# Podman settings this kind of host needs (runc, explicit ulimits), for every command below and what it
# starts, including the benchmark's raw `podman run`. A CONTAINERS_CONF you set yourself wins.
export CONTAINERS_CONF ?= $(CURDIR)/scripts/containers.conf

up: setup
	@bash scripts/up.sh

# Three nodes on a throw-away PostgreSQL behind HAProxy on 127.0.0.1:8080 (docs/cluster.md); Ctrl-C stops it all.
cluster: setup
	@bash scripts/cluster.sh

test: setup
	@bash scripts/run-tests.sh

setup:
	@bash scripts/setup.sh

test-unit: setup
	@bash scripts/run-tests.sh unit

test-integration: setup
	@bash scripts/run-tests.sh integration

test-users-path: setup
	@bash scripts/run-tests.sh users-path

bench: setup
	@npx tsx bench/berth-vs-raw.ts

# Berth's own image, localhost/berth:<version>, built offline (docs/deploy.md runs it).
image: setup
	@bash scripts/build-berth-image.sh

typecheck: setup
	@npx tsc --noEmit -p tsconfig.json
