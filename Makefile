# The commands a user needs. `make run` starts the stack locally; `make test` runs every test of every
# package with a throwaway PostgreSQL started and stopped around it.
SWIFT ?= swift
# The debug builds of `make build`, `test`, `citus` and `docs` (one build, shared): without debug information,
# which on two cores is a fifth of a clean build's time and most of its size; crash reports still name every
# function. `make test SYNC_BUILD_FLAGS=` builds with it, for a debugger (then the next build without it
# compiles everything again).
SYNC_BUILD_FLAGS ?= -debug-info-format none
export SYNC_BUILD_FLAGS
SOURCES := $(wildcard Packages Apps Tests Benchmarks) Package.swift Examples/Tasks/Package.swift Examples/Tasks/Sources Examples/Tasks/Tests

.PHONY: test test-encrypted citus run load chaos bench bench-quick build release docs lint format bootstrap postgres-start postgres-stop clean

test: bootstrap lint
	SWIFT=$(SWIFT) scripts/test.sh

# The store, projection and engine suites with every database encrypted at rest (scripts/test-encrypted.sh).
test-encrypted: bootstrap
	scripts/test-encrypted.sh

# The tests on a real Citus cluster alone (scripts/citus-test.sh; make test runs them too): a coordinator and two
# workers started by scripts/citus.sh, Citus built from CITUS_SOURCE (a citus-13.2.x.tar.gz) when it is not
# installed.
citus: bootstrap
	$(SWIFT) build --build-tests $(SYNC_BUILD_FLAGS)
	SWIFT=$(SWIFT) scripts/citus-test.sh

run: bootstrap
	scripts/run-stack.sh

# The stack under load: PostgreSQL, sync-server and sync-load's default scenario with its verdict
# (LOAD_ARGS adds sync-load options). The report is in .run/load/.
load: bootstrap
	scripts/load.sh

# Faults under load behind nginx (two servers, one PostgreSQL): kill -9, SIGSTOP, PostgreSQL stopped and
# killed, clocks off, network faults through sync-fault-proxy (latency, bandwidth cap, resets, black hole),
# each with a verdict; regenerates the table of docs/RELIABILITY.md (CHAOS_QUICK=1: short runs).
chaos: bootstrap
	scripts/chaos.sh

# The performance suite: every scenario against real processes, each with its in-run baseline, and a report
# with charts in Benchmarks/results/<date>-<commit>/ compared with Benchmarks/results/baseline.json (about
# 25 minutes here). bench-quick: every scenario at small size (about 3 minutes; CI runs it through make test).
bench: bootstrap
	scripts/bench.sh

bench-quick: bootstrap
	BENCH_QUICK=1 scripts/bench.sh

build: bootstrap
	$(SWIFT) build $(SYNC_BUILD_FLAGS)

release: bootstrap
	$(SWIFT) build -c release

# The DocC reference of every library product (scripts/docs.sh, the toolchain's docc, no plugin): a debug build
# (incremental: about 30 s in all after `make build` or `make test` here), then .build/docs/<Target>.doccarchive
# per product and all of them in .build/docs/offline-sync.doccarchive, a static site: view it with
# `python3 -m http.server --directory .build/docs/offline-sync.doccarchive 8000` and
# http://127.0.0.1:8000/documentation/. Docc's warnings are errors: a broken ``Symbol`` link fails it.
docs: bootstrap
	SWIFT=$(SWIFT) scripts/docs.sh

lint:
	$(SWIFT) format lint --strict --recursive --parallel $(SOURCES)

format:
	$(SWIFT) format --in-place --recursive --parallel $(SOURCES)

bootstrap:
	@scripts/bootstrap.sh

postgres-start: bootstrap
	@scripts/postgres.sh start

postgres-stop:
	@scripts/postgres.sh stop

clean:
	scripts/postgres.sh destroy
	scripts/citus.sh destroy
	rm -rf .build .build-* .run
