# Quick start: `make demo` runs the product on the embedded default; `make test` runs every test.
# The first target that needs it creates .venv with the newest Python >= 3.12 it can find.

VENV := .venv
PY := $(VENV)/bin/python
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-sqlite lint format bench scenarios sync-scenarios docs screenshots clean

$(VENV)/bin/python:
	@python_bin=$$(scripts/find-python) || exit 1; \
	echo "Creating $(VENV) with $$python_bin"; "$$python_bin" -m venv $(VENV)

# What the product needs to run: the demo installs only this.
$(RUNTIME): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	@touch $(RUNTIME)

# Everything the tests, the linters and the docs need too.
$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,docs]'
	@touch $(RUNTIME) $(STAMP)

# The demo's port: make demo PORT=8101 (it prints the URL and the samples' QP_URL).
PORT ?= 8000

demo: $(RUNTIME)
	$(PY) manage.py demo --port $(PORT)

# The tests run against real services: the machine's PostgreSQL and Redis unless overridden,
# on TEST_WORKERS processes (pytest-xdist; each its own test database and Redis prefix).
TEST_WORKERS ?= 2
PARALLEL = -n $(TEST_WORKERS) --dist loadgroup
# The fast lane: the planner, the services, the tick and the REST API (no browser, no agents,
# no Slurm, no second portal, no worker process: tests marked `slow` are left out).
FAST_TESTS = tests/scheduler tests/quotas tests/api tests/usage tests/test_services.py
# The SQLite lane: the embedded default's database under the jobs' state changes, the ticks,
# the placements and every scenario (tests marked `postgresql` are skipped there).
SQLITE_TESTS = tests/quotas/test_lifecycle.py tests/quotas/test_scenarios_db.py \
	tests/quotas/test_tick.py tests/quotas/test_narrow_ticks.py tests/quotas/test_jobs.py \
	tests/quotas/test_arrays.py tests/quotas/test_reservations.py tests/quotas/test_bulk.py \
	tests/quotas/test_shared_environment.py tests/quotas/test_queue_delete_race.py \
	tests/quotas/test_job_numbers.py tests/quotas/test_tick_memo.py \
	tests/hosts/test_report_batches.py tests/hosts/test_preemption_in_progress.py
SQLITE_URL = sqlite:///$(CURDIR)/.sqlite-lane.sqlite3

test: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/quotaportal
test: export REDIS_URL ?= redis://127.0.0.1:6379/15
# The SLURM backend's tests time a real Slurm against the clock: the whole run plays them
# after the others, in one process, not beside a worker that takes the other core.
test: $(STAMP)
	$(PY) scripts/check_services.py
ifeq ($(strip $(PYTEST_ARGS)),)
	$(PY) -m pytest $(PARALLEL) --ignore=tests/slurm
	$(PY) -m pytest -q tests/slurm
	DATABASE_URL=$(SQLITE_URL) $(PY) -m pytest -q $(SQLITE_TESTS)
else
	$(PY) -m pytest $(PARALLEL) $(PYTEST_ARGS)
endif

test-fast: export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/quotaportal
test-fast: export REDIS_URL ?= redis://127.0.0.1:6379/15
test-fast: $(STAMP)
	$(PY) scripts/check_services.py
	$(PY) -m pytest $(PARALLEL) -q -m 'not slow' $(FAST_TESTS) $(PYTEST_ARGS)

test-sqlite: export REDIS_URL ?= redis://127.0.0.1:6379/15
test-sqlite: $(STAMP)
	DATABASE_URL=$(SQLITE_URL) $(PY) -m pytest -q $(SQLITE_TESTS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) -m scheduler.bench

# The contract's scenario files, as the repository keeps them (the tests also play every file
# of ../shared/scenarios when that folder is there).
scenarios: $(STAMP)
	$(PY) -m scheduler.scenarios scheduler/scenarios/contract/*.json

# Refresh the repository's copy of the contract from a sibling ../shared/scenarios.
sync-scenarios:
	@if [ -d ../shared/scenarios ]; then \
		cp ../shared/scenarios/*.json ../shared/scenarios/README.md scheduler/scenarios/contract/ && \
		echo "copied $$(ls ../shared/scenarios/*.json | wc -l) scenario files into scheduler/scenarios/contract"; \
	else echo "no ../shared/scenarios beside this checkout: nothing to copy" >&2; exit 1; fi

# The documentation site (docs/, mkdocs-material): built strictly, as CI does, into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The docs' screenshots are taken by the browser tests; this copies those the docs show.
screenshots: $(STAMP)
	QP_SCREENSHOTS=test-artifacts $(PY) -m pytest -q -p no:cacheprovider tests/web/test_browser.py \
		tests/web/test_browser_walkthrough.py tests/web/test_browser_whatif.py \
		tests/web/test_browser_fleet.py tests/web/test_browser_chart.py \
		tests/web/test_browser_jobs_list.py tests/web/test_browser_usage.py
	@for image in $$(grep -rhoE 'images/[a-z0-9-]+\.png' docs README.md | sort -u); do \
		cp test-artifacts/$$(basename $$image) docs/$$image || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis site
