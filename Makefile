# The two commands of the README: `make run` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test image-test lint unit soak bench docs lock system venv rules corpus sdk clean
# npm installs, pinned by their package-lock.json, redone only when a lock changes:
# the rules the service runs in pages (autoconsent), the consent libraries the tests put on pages and the
# hosted API's official Node SDK the tests drive.
NPM_CI := npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
RULES := deploy/npm/node_modules/.package-lock.json
CORPUS := tests/consent/node_modules/.package-lock.json
SDK := tests/sdk/node_modules/.package-lock.json

run: system venv rules
	$(BIN)/screenshot-service run

# tests/cluster first, alone (its failover test needs a Redis primary whose replica keeps up, which a loaded
# machine does not promise); then the rest on two pytest-xdist workers, each taking the next test file as it is
# ready for one, the longest first (tests/support/scheduling.py): the suite mostly waits on pages and processes, so
# one process alone leaves the cores idle. Any failing fails the target. Each has a temporary directory of its own
# (short: the embedded Redis's socket lives in it), kept when it fails.
test: system venv rules corpus sdk lint
	@mkdir -p var
	@alone=$$(mktemp -d /tmp/screenshot-tests.XXXXXX); rest=$$(mktemp -d /tmp/screenshot-tests.XXXXXX); \
	  $(BIN)/pytest tests/cluster --basetemp=$$alone; first=$$?; \
	  SCREENSHOT_TEST_DURATIONS=var/test-durations.json $(BIN)/pytest -n 2 --dist loadfile --no-loadscope-reorder \
	    --ignore=tests/cluster --basetemp=$$rest; second=$$?; \
	  echo "make test: tests/cluster exited $$first, the rest $$second"; \
	  test $$first -eq 0 -a $$second -eq 0 && rm -rf $$alone $$rest

# The container image built with Debian's Podman and run as operators run it (tests/image): after `make test`,
# in .ci/run. Its base is made with mmdebstrap when the registry of images cannot be reached.
image-test: system venv
	@bash deploy/install-system-packages.sh --image-test
	SCREENSHOT_IMAGE_TEST=1 $(BIN)/pytest tests/image

lint: venv
	$(BIN)/ruff check service render animate storage tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

unit: venv rules
	$(BIN)/pytest -m "not browser"

# The full soak: 1,000 mixed captures, worker memory before and after (about 9 minutes).
soak: system venv
	SOAK_CAPTURES=1000 $(BIN)/pytest -s tests/integration/test_soak.py

bench: system venv rules corpus
	$(BIN)/python -m bench.run

docs: venv
	$(BIN)/python -m render.contract.reference > docs/parameters.md
	$(BIN)/python -m animate.reference > docs/animate.md
	$(BIN)/python -m service.settings > docs/settings.md

# requirements.lock, resolved again for every Python the project supports from its lowest (3.11.0, so Debian 12's
# 3.11.2 too) and every platform, today's pins kept where they still fit. After changing pyproject's dependencies.
lock: venv
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 -c requirements.lock \
		--no-annotate --no-header -q -o requirements.lock.new
	mv requirements.lock.new requirements.lock

system:
	@bash deploy/install-system-packages.sh

rules: $(RULES)
$(RULES): deploy/npm/package-lock.json
	cd deploy/npm && $(NPM_CI)

corpus: $(CORPUS)
$(CORPUS): tests/consent/package-lock.json
	cd tests/consent && $(NPM_CI)

sdk: $(SDK)
$(SDK): tests/sdk/package-lock.json
	cd tests/sdk && $(NPM_CI)

venv: $(STAMP)

# Reinstalled only when the dependency pins change; the project itself is installed editable.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c requirements.lock -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache deploy/npm/node_modules tests/consent/node_modules tests/sdk/node_modules
