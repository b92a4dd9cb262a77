# The two set-up commands (README): `make demo` and `make test`. Both create .venv themselves.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv demo test lint plan bench clean

venv: $(STAMP)

# Reinstall only when the dependency list changes. torch==2.13.0 resolves to the local CPU wheel.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[trainer,dev]'
	touch $(STAMP)

# An offline plan of the reference stacks, then a local training run: 2 CPU workers, a SIGTERM mid-run,
# exit 143, an automatic restart that resumes, and a bitwise comparison with an uninterrupted run.
demo: $(STAMP)
	$(BIN)/trainplane plan aws-dev
	$(BIN)/trainplane plan gcp-dev
	$(BIN)/trainplane plan onprem-dev
	$(BIN)/trainplane plan gpt-small-aws-dev
	$(BIN)/python -m trainer.demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python tests/benchmarks/bench_plan.py --markdown
	$(BIN)/python tests/benchmarks/bench_trainer.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
