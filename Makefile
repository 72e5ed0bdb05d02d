# The two commands: `make up` runs Berth with its embedded defaults, `make test` runs every test.
.PHONY: up test setup test-unit test-integration bench typecheck

up: setup
	@bash scripts/up.sh

test: setup
	@bash scripts/run-tests.sh

setup:
	@bash scripts/setup.sh

test-unit: setup
	@bash scripts/run-tests.sh unit

test-integration: setup
	@bash scripts/run-tests.sh integration

bench: setup
	@npx tsx bench/run-overhead.ts

typecheck:
	@npx tsc --noEmit -p tsconfig.json
