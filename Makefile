# The two commands of the README: `make run` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint unit soak bench docs system venv clean

run: system venv
	$(BIN)/screenshot-service run

test: system venv lint
	$(BIN)/pytest

lint: venv
	$(BIN)/ruff check service render animate storage tests bench
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -m "not browser"

# The full soak of issue 8: 1,000 mixed captures, worker memory before and after (about 9 minutes here).
soak: system venv
	SOAK_CAPTURES=1000 $(BIN)/pytest -s tests/integration/test_soak.py

bench: system venv
	$(BIN)/python bench/run.py

docs: venv
	$(BIN)/python -m render.reference > docs/parameters.md
	$(BIN)/python -m animate.reference > docs/animate.md

system:
	@bash deploy/install-system-packages.sh

venv: $(STAMP)

# Reinstalled only when the dependency pins change; the project itself is installed editable.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c requirements.lock -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
