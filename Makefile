# docket: `make demo` shows it working, `make test` proves it. Both install into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# As on a user's machine: Python writes bytecode, and checks that import the repository's code must still pass.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install typecheck test test-campaigns unit integration e2e demo demo-fleet demo-real bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,postgres]'
	touch $(STAMP)

install: $(STAMP)

# Three workers on two cores: the suite waits on real processes much of the time (agents, checks, SIGKILLed
# dockets; the load stayed under 2 with two workers), and a third worker uses that (a fresh clone's .ci/run: 25 min
# against 34); an idle worker takes tests from a busy one (worksteal), so none ends long after the others. The
# slowest tests are listed at the end so a growing suite shows where its time goes.
# mypy over all of docket first ([tool.mypy] in pyproject.toml; tests/typecheck.py checks the package as installed)
typecheck: $(STAMP)
	$(BIN)/python -m tests.typecheck

test: $(STAMP) typecheck
	$(BIN)/pytest -n 3 --dist worksteal --durations=25

# The crash and random-kill campaigns whole (every crash point, seed and round; `make test` samples them, see
# tests/conftest.py): the tests marked campaign, under DOCKET_CAMPAIGNS=full.
test-campaigns: $(STAMP)
	DOCKET_CAMPAIGNS=full $(BIN)/pytest -n 3 --durations=25 -m campaign

unit: $(STAMP)
	$(BIN)/pytest tests/unit

integration: $(STAMP)
	$(BIN)/pytest tests/integration

e2e: $(STAMP)
	$(BIN)/pytest tests/e2e

demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash tests/demo.sh

# Two clones on one PostgreSQL ledger and one bare remote, a supervisor each (needs PostgreSQL's server programs).
demo-fleet: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" DOCKET_PYTHON="$(abspath $(BIN))/python" bash tests/demo_fleet.sh

demo-real: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash tests/demo_real.sh

bench: $(STAMP)
	$(BIN)/python -m bench

docs: $(STAMP)
	$(BIN)/docket schema --markdown > docs/events.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis bench/.work
