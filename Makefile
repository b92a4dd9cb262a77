# The two set-up commands (README): `make demo` and `make test`. Both create .venv themselves.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv demo test test-fast test-plans test-integration lint plan bench bench-gpu bench-gpu-wheels campaign dist image image-controller image-trainer clean

venv: $(STAMP)

# Reinstall only when the dependency list changes. torch==2.13.0 resolves to the local CPU wheel.
# The policy pack's SDK (extra `policy`, for
# tests/unit/policy/trainplane_policies/test_policy_pack.py) goes in without its dependencies:
# pulumi-policy 1.21.0 pins protobuf~=5.29.5, and resolving that would downgrade protobuf
# and the Google clients the trainer extra gets today (google-api-core 2.44, googleapis-common-protos 1.76:
# protobuf >= 6.33.5) for the whole suite. It ships no generated protobuf code of
# its own (its RPC types are pulumi's, pulumi.runtime.proto, built for protobuf < 7), so it runs on the
# protobuf pulumi accepts; the pack's own virtualenv (policy/requirements.txt) resolves it normally.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[trainer,dev]'
	$(BIN)/python -m pip install -q --no-deps $$($(BIN)/python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['policy'])")
	touch $(STAMP)

VERIFY_STACKS := aws-dev gcp-dev onprem-dev gpt-small-aws-dev

# An offline plan of the reference stacks and `trainplane verify` of each (every report is printed; the
# target fails at the end if any check failed), then a local training run: 2 CPU workers, a SIGTERM
# mid-run, exit 143, an automatic restart that resumes, and a bitwise comparison with an uninterrupted run.
demo: $(STAMP)
	$(BIN)/trainplane plan aws-dev
	$(BIN)/trainplane plan gcp-dev
	$(BIN)/trainplane plan onprem-dev
	$(BIN)/trainplane plan gpt-small-aws-dev
	@failed=""; for s in $(VERIFY_STACKS); do $(BIN)/trainplane verify $$s || failed="$$failed $$s"; done; \
	  $(BIN)/python -m trainer.demo || failed="$$failed trainer.demo"; \
	  if [ -n "$$failed" ]; then echo "demo: failed:$$failed"; exit 1; fi

# Lint (incl. complexity limits), format, types, the doctests of the library, then the suite: every tier
# (testpaths: tests/unit and tests/integration). mypy (about 30 s from cold) and the doctests each keep one
# core busy: they run side by side, and both must pass before the suite starts.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy & types=$$!; \
	  $(BIN)/python -m pytest -q -p no:xdist --doctest-modules components contract controllers infra trainer; \
	  docs=$$?; wait $$types && test $$docs -eq 0
	$(BIN)/python -m pytest -n 2 --dist worksteal $(PYTEST_ARGS)

# The inner loop: the fast tier, tests with no tier marker (in-process logic: the spec, rules, catalog,
# controllers' decisions, the trainer's pieces; no mock-engine plan, no process). tests/helpers/tiers.py
# fails a test that plans or starts a process without its marker, so this stays fast. No lint: run
# `make lint` before a commit.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal --fast $(PYTEST_ARGS)

# The plans tier alone: the reference stacks and their variants under the mock engine, in process.
test-plans: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m "plans and not integration" $(PYTEST_ARGS)

# The integration tier alone (marker `integration`): moto, Prometheus/promtool, the GCS emulator, the
# trainer's real multi-process runs, one real `python -m infra.cli` process per command, the image build.
test-integration: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -m integration $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_plan.py --markdown
	$(BIN)/python tests/benchmarks/bench_trainer.py

# The GPU bench (issue 34; tests/benchmarks/bench_gpu.py, docs/BENCHMARKS.md): gpt-small and gpt-1b, eager and
# compiled, DDP and FSDP2 on one GPU, the trainer beside a bare loop, the async save's stall beside its copy
# floor; under 8 minutes on one H100/H200 (--budget-s 420 skips what would not fit, and says so). It runs
# where the GPU is, on that machine's own CUDA torch (a CUDA build cannot travel: gigabytes): `make
# bench-gpu-wheels` here first puts the trainer's other dependencies in .whl/ (git-ignored; carry it), then
# `make bench-gpu` there installs them offline beside that torch and writes build/bench-gpu.{json,md}.
BENCH_GPU_DEPS := pydantic pyyaml 'prometheus-client>=0.26,<0.27' fsspec==2026.7.0 'rich>=15,<16'
bench-gpu-wheels:
	$(PY) -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d .whl $(BENCH_GPU_DEPS)

bench-gpu:
	python3 -m pip install -q --no-index --find-links .whl $(BENCH_GPU_DEPS)
	python3 tests/benchmarks/bench_gpu.py --json build/bench-gpu.json --markdown build/bench-gpu.md

# The fault campaign (issue 19): a scripted day (1440 virtual minutes, a checkpoint every 10) of spot
# preemptions, an XID 79 quarantine, a hang, a straggler, a failed checkpoint write and a lost node, on real
# launcher and trainer processes under the simulated JobSet and node controllers; prints a table of goodput,
# restarts and steps redone per fault (docs/BENCHMARKS.md) and fails on a lost step or a misclassified fault.
campaign: $(STAMP)
	$(BIN)/python -m tests.campaign.day

# The wheel that the `pulumi new` templates install until trainplane is on an index: their
# requirements.txt reads `--find-links ${TRAINPLANE_DIST}` (README, "Use trainplane in your own Pulumi
# project"). Any Python 3.11+ with pip builds it; pip fetches setuptools>=77 for the build.
dist:
	rm -rf build dist/trainplane-*.whl
	$(PY) -m pip wheel --no-deps --wheel-dir dist .
	@echo "export TRAINPLANE_DIST=$(CURDIR)/dist   # then pulumi new stacks/templates/..."

# The two images (docs/in-cluster.md "The controller image", README "Trainer image"). The controller's is
# an OCI layout written without a container engine (images/controller/build.py: a debootstrap base locked
# to debian.lock, the hashed wheels, controllers/), into build/images/controller; it prints the digest the
# platform names (`platform.images.controller`). Needs root and debootstrap (apt-get install debootstrap),
# a Debian mirror and PyPI; the base layer is cached in build/images/cache. The trainer's needs its CUDA base
# from Docker Hub (nvidia/cuda, trainer/Dockerfile) and an engine (docker, podman or buildah): where
# none is installed it stops with that message rather than pretend.
image: image-controller image-trainer

image-controller: $(STAMP)
	$(BIN)/python images/controller/build.py --out build/images/controller

TRAINER_IMAGE ?= trainplane-trainer:0.1.0
image-trainer:
	@engine=$$(command -v docker || command -v podman || command -v buildah); \
	  if [ -z "$$engine" ]; then echo "image-trainer: no docker, podman or buildah here; build trainer/Dockerfile where one is (README)" >&2; exit 1; fi; \
	  case "$$engine" in *buildah) $$engine bud -f trainer/Dockerfile -t $(TRAINER_IMAGE) . ;; \
	    *) $$engine build -f trainer/Dockerfile -t $(TRAINER_IMAGE) . ;; esac

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build dist
