# Two commands do all set-up on a fresh machine with Python 3.11+:
#   make plan   - the offline plan of the default stack (no cloud account, no Pulumi CLI)
#   make test   - the whole test suite
# Both create .venv and install the pinned requirements on first use.

ifeq ($(origin PYTHON), undefined)
PYTHON := $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { echo $$p; break; }; done)
endif
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
STACK  ?= llama3-8b-lora
FORMAT ?= text

.PHONY: plan test test-launch fuzz bench schema clean venv

$(STAMP): requirements.txt requirements-dev.txt
	@test -n "$(PYTHON)" || { echo "error: Python 3.11 or newer is required (set PYTHON=...)"; exit 2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $(STAMP)

venv: $(STAMP)

plan: $(STAMP)
	$(BIN)/python -m trainstack plan --stack $(STACK) --format $(FORMAT)

# TEST_WORKERS: pytest-xdist workers (auto: one per core; 0 runs in this process)
TEST_WORKERS ?= auto

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# The launchers for real (PyTorch, Accelerate, DeepSpeed in their own venv; not part of `make test`):
# the tools' own parsers read every rendered command line, and a 2-node plan runs as two local
# "nodes" on 127.0.0.10/11 with the gloo backend.
LAUNCH_VENV  := .venv-launch
LAUNCH_STAMP := $(LAUNCH_VENV)/.installed-stamp

$(LAUNCH_STAMP): requirements-launch.txt requirements-launch-nodeps.txt
	@test -n "$(PYTHON)" || { echo "error: Python 3.11 or newer is required (set PYTHON=...)"; exit 2; }
	@test -x $(LAUNCH_VENV)/bin/python || $(PYTHON) -m venv $(LAUNCH_VENV)
	$(LAUNCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check $$(grep -E '^torch==' requirements-launch.txt)
	DS_BUILD_OPS=0 $(LAUNCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-build-isolation -r requirements-launch.txt
	$(LAUNCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-launch-nodeps.txt
	@touch $(LAUNCH_STAMP)

test-launch: $(LAUNCH_STAMP)
	TRAINSTACK_LAUNCH_TESTS=1 $(LAUNCH_VENV)/bin/python -m pytest tests/launch

fuzz: $(STAMP)
	TRAINSTACK_FUZZ_EXAMPLES=3000 $(BIN)/python -m pytest tests/fuzz -q -n $(TEST_WORKERS)

bench: $(STAMP)
	$(BIN)/python benchmarks/estimator_accuracy.py
	$(BIN)/python benchmarks/resolve_speed.py
	$(BIN)/python benchmarks/plan_speed.py

schema: $(STAMP)
	$(BIN)/python -m trainstack schema --out profile.schema.json

clean:
	rm -rf $(VENV) $(LAUNCH_VENV) .pytest_cache .hypothesis
