# resilient — build, test, benchmark and lab entry points.
#
#   make lab     the main job: the retry-storm experiment (installs, builds, runs, reports)
#   make test    installs what is missing, builds, runs cargo test and the PHPUnit suites
#   make install builds, installs resilient.so into PHP's extension dir, enables extension=resilient
#   make bench   benchmarks in one run: funnel/budget vs Redis::funnel, the seed's cache budget,
#                APCu; the HTTP client vs curl, Laravel Http, Symfony, Guzzle Pool
#
# Every service a target needs (php-fpm, nginx, redis-server) is started on 127.0.0.1 by the
# target's own script and stopped when it ends, also on failure or Ctrl-C (shell traps).

SHELL       := /bin/bash
# Prepend cargo's bin only once: ext-php-rs's build script reruns whenever PATH changes, so a
# nested make or script that prepended it again would rebuild the extension for nothing.
export PATH := $(if $(findstring :$(HOME)/.cargo/bin:,:$(PATH):),$(PATH),$(HOME)/.cargo/bin:$(PATH))
CARGO       ?= cargo
LAB_ARGS    ?=
PHPUNIT_ARGS ?=
BASELINE    ?=
BENCH_ARGS  ?=

.PHONY: all deps build install test cargo-test phpunit lab-check stubs-check bench lab stubs clean-run

all: build

deps:
	.ci/deps.sh

build:
	$(CARGO) build --release --workspace

# Installs the extension as `extension=resilient` for every SAPI (scripts/install.sh;
# DESTDIR=/some/dir stages it under that directory instead, enabled for the CLI and FPM).
# Builds the extension alone: the workspace's lab crate needs fontconfig, which a production
# host has no use for.
install:
	$(CARGO) build --release -p resilient
	scripts/install.sh

cargo-test:
	$(CARGO) test --release --workspace --no-fail-fast

phpunit: build
	tests/harness/phpunit.sh $(PHPUNIT_ARGS)

# The lab in its short form, every scenario (slowdown, errors, outage, mixed, and capacity-shift
# and two-hosts, which `--all` leaves out) with short phases, asserting only robust properties
# (amplification, /health served, the load generator open-loop, the funnel's bound across hosts
# on Redis, the learned limit following the upstream's slots, ...): every scenario's goals
# checked end to end, in the form short phases allow (≈ 5 min on 2 shared cores; two-hosts
# ≈ 45 s of it, capacity-shift ≈ 50 s).
lab-check: build
	bash lab/run.sh --quick --check --scenario slowdown,errors,outage,mixed,capacity-shift,two-hosts

# Every test layer runs even when an earlier one fails, so one CI run shows every failure; the
# last line adds their results up ("tests: N passed, M failed").
test: deps build
	@mkdir -p tests/.run; rc=0; \
	$(MAKE) --no-print-directory cargo-test 2>&1 | tee tests/.run/cargo.log; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	$(MAKE) --no-print-directory phpunit 2>&1 | tee tests/.run/phpunit.log; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	$(MAKE) --no-print-directory lab-check 2>&1 | tee tests/.run/lab.log; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	$(MAKE) --no-print-directory stubs-check 2>&1 | tee tests/.run/stubs.log; [ $${PIPESTATUS[0]} -eq 0 ] || rc=1; \
	if [ $$rc -ne 0 ]; then echo "make test: FAILED (see above)"; else echo "make test: all layers passed"; fi; \
	tests/harness/summary.sh tests/.run/cargo.log tests/.run/phpunit.log tests/.run/lab.log tests/.run/stubs.log; \
	exit $$rc

# BASELINE=REV also measures each group's own case (and those marked 'baseline') with the build of REV, beside it (a REV
# that cannot be built stops the bench: `so=$(...) &&` keeps its status).
bench: deps build
	$(if $(BASELINE),so="$$(bench/baseline.sh $(BASELINE))" && BENCH_BASELINE_SO="$$so") bench/run.sh $(BENCH_ARGS)

lab: deps build
	lab/run.sh $(LAB_ARGS)

# The shipped stubs must match the code: a fresh generation compared with stubs/resilient.stub.php.
stubs-check: build
	stubs/generate.sh --check

# IDE stubs for the extension's classes (stubs/resilient.stub.php): `cargo php stubs` (cargo-php
# 0.2.x, installed if missing) for the #[php_class] classes plus the hand-written exception stubs.
stubs: deps
	stubs/generate.sh

# Remove what interrupted runs may have left: scratch dirs (a full-disk test's tmpfs unmounted
# first) and this project's test, bench and lab segments.
clean-run:
	awk -v run="$(CURDIR)/tests/.run/" 'index($$2, run) == 1 {print $$2}' /proc/mounts | xargs -r umount
	rm -rf tests/.run bench/.run
	git worktree remove --force bench/.baseline/src 2>/dev/null || true; rm -rf bench/.baseline
	rm -rf /dev/shm/resilient-test-*.shm /dev/shm/resilient-bench-*.shm /dev/shm/resilient-lab-*.shm /tmp/resilient-lab-*
