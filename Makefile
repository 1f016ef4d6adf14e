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

.PHONY: plan test fuzz bench schema clean venv

$(STAMP): requirements.txt requirements-dev.txt
	@test -n "$(PYTHON)" || { echo "error: Python 3.11 or newer is required (set PYTHON=...)"; exit 2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $(STAMP)

venv: $(STAMP)

plan: $(STAMP)
	$(BIN)/python -m trainstack plan --stack $(STACK) --format $(FORMAT)

test: $(STAMP)
	$(BIN)/python -m pytest

fuzz: $(STAMP)
	TRAINSTACK_FUZZ_EXAMPLES=5000 $(BIN)/python -m pytest tests/fuzz -q

bench: $(STAMP)
	$(BIN)/python benchmarks/estimator_accuracy.py
	$(BIN)/python benchmarks/resolve_speed.py
	$(BIN)/python benchmarks/plan_speed.py

schema: $(STAMP)
	$(BIN)/python -m trainstack schema --out profile.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
