# Two commands for a fresh machine: `make test` and `make demo`. Everything else is a building block.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
COLLECTION_LINK := .build/collections/ansible_collections/pymotor/ascend
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONPATH := $(CURDIR)/.build/collections
export PATH := $(CURDIR)/$(BIN):$(PATH)
# Every suite prints its slow tests and fixtures (setup rows are the module-scoped clusters): tests/README.md's table.
DURATIONS := --durations=0 --durations-min=2

.PHONY: help test demo demo-down bench venv collection-link docker images tools prebuild prebuild-sim prebuild-conformance unit lint sanity integration rolls fleet-faults molecule conformance conformance-rolls clean

help:
	@echo "make test   install what is missing (venv, Docker engine, base images), run every test"
	@echo "make demo   run the main job on the embedded default configuration"
	@echo "make bench  run the benchmarks on demand (not part of make test): one table of ratios, see bench/README.md"
	@echo "parts: venv docker images tools unit lint sanity integration rolls fleet-faults molecule conformance conformance-rolls clean"

# The venv is rebuilt only when the pins change.
$(VENV)/.installed: requirements.txt constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt -c constraints.txt
	@touch $@

venv: $(VENV)/.installed collection-link

collection-link:
	@mkdir -p $(dir $(COLLECTION_LINK))
	@test -L $(COLLECTION_LINK) || ln -s ../../../.. $(COLLECTION_LINK)

docker:
	bash scripts/ensure_docker.sh

images: docker
	bash scripts/ensure_base_image.sh

# Debian packages some tests run (promtool, chromium): scripts/ensure_tools.sh
tools:
	bash scripts/ensure_tools.sh

unit: venv tools
	$(BIN)/pytest -q $(DURATIONS) --import-mode=importlib tests/unit

lint: venv
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint -q
	$(BIN)/antsibull-changelog lint

sanity: venv
	bash scripts/run_sanity.sh

# The rolling upgrade under load (engines that load for 60 s, about 20 minutes mostly waiting; on demand) and the
# 24-host simulated fleet with a refused and a black-holed host (a part of its own in make test) run apart.
# FILES=... runs some modules only (make test runs them as parts of one queue, scripts/run_tests.sh).
integration: venv images
	MOTOR_REQUIRE_DOCKER=1 $(BIN)/pytest -q $(DURATIONS) --import-mode=importlib \
	  $(or $(FILES),tests/integration --ignore=tests/integration/test_upgrade.py --ignore=tests/integration/test_fleet_faults.py)

# On demand (not in make test): README "Known failures".
rolls: venv images
	MOTOR_REQUIRE_DOCKER=1 $(BIN)/pytest -q -s --import-mode=importlib tests/integration/test_upgrade.py

fleet-faults: venv images
	MOTOR_REQUIRE_DOCKER=1 $(BIN)/pytest -q $(DURATIONS) --import-mode=importlib tests/integration/test_fleet_faults.py

# Against the real upstream PyMotor and Mooncake (../shared/upstream or MOTOR_UPSTREAM_*): skipped with the reason
# when they are absent. First run builds the conformance image (~2 min) and the real conductor (~2 min); both are
# cached by content (tests/conformance/build_image.py, conductor_image.py). FILES=... runs some modules only.
conformance: venv images
	@reason=$$($(BIN)/python tests/conformance/build_image.py --absent-reason); \
	if [ -n "$$reason" ]; then echo "make conformance: SKIPPED: $$reason"; else \
	  MOTOR_REQUIRE_DOCKER=1 $(BIN)/pytest -q -rfExXs $(DURATIONS) --import-mode=importlib $(or $(FILES),tests/conformance) \
	    -m "not rolls"; fi

# The rolling upgrade and rollback under load on the real control plane (tests/conformance/test_upgrade.py, engines
# that load for 60 s: about 20 minutes mostly waiting; a part of make test, scripts/run_tests.sh).
conformance-rolls: venv images
	@reason=$$($(BIN)/python tests/conformance/build_image.py --absent-reason); \
	if [ -n "$$reason" ]; then echo "make conformance-rolls: SKIPPED: $$reason"; else \
	  MOTOR_REQUIRE_DOCKER=1 $(BIN)/pytest -q -rfExXs -s $(DURATIONS) --import-mode=importlib tests/conformance -m rolls; fi

# molecule 26 finds a collection's scenarios under extensions/molecule/ (it ignores molecule/). SCENARIOS=... runs
# some only (each scenario has its own simulated host names, so two can run at once).
molecule: venv images
	@if ls extensions/molecule/*/molecule.yml >/dev/null 2>&1; then \
	  cd extensions && failed=""; \
	  for s in $(or $(SCENARIOS),$$(ls -d molecule/*/ | xargs -n1 basename | grep -v '^default$$')); do \
	    ../$(BIN)/molecule test -s $$s || failed="$$failed $$s"; done; \
	  if [ -n "$$failed" ]; then echo "molecule: failed scenarios:$$failed"; exit 1; fi; \
	else echo "no molecule scenarios yet"; fi

# The one-time image builds every Docker suite needs, once (each is cached by content, so a second run only
# inspects): the simulated host image, the stand-in image with the fixture conductor, and, when ../shared/upstream
# is there, the conformance image and the real conductor built from it. make test runs the two halves as parts of
# their own, beside the checks that need no image.
prebuild: prebuild-sim prebuild-conformance

prebuild-sim: venv images
	$(BIN)/python tests/sim/simctl.py build
	$(BIN)/python extensions/molecule/pd_separation/standin_image.py local/pymotor-fault:test
	@# the conductor-patched stand-in of the demo and the molecule scenarios, built once: they tag it (same inputs)
	bash scripts/build_standin_conductor.sh local/pymotor-standin:prebuilt-conductor .build/prebuild-conductor pymotor-prebuild

prebuild-conformance: venv images
	@if [ -z "$$($(BIN)/python tests/conformance/build_image.py --absent-reason)" ]; then \
	  $(BIN)/python tests/conformance/build_image.py && $(BIN)/python tests/conformance/conductor_image.py; fi

# Every part on three workers that take them longest first (scripts/run_tests.sh); MOTOR_TEST_LANES=1: one by one.
# (images and tools run first, in scripts/run_tests.sh: lint and sanity run beside their downloads)
test: venv
	bash scripts/run_tests.sh
	@echo "make test: all parts passed"

demo: venv images
	bash scripts/demo.sh

# On demand only (not part of `make test` nor CI): about 30 minutes on 2 cores. BENCH_ONLY=deploy_floor runs one.
bench: venv images
	$(BIN)/python bench/run_all $(foreach b,$(BENCH_ONLY),--only $(b))

clean:
	rm -rf .build tests/output
