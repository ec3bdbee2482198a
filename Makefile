# Two commands: `make up` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: up test test-quick flake install lint typecheck checks browser-deps monitor-deps stress-deps clean

# cpctl (the command-line client, its own package in cpctl/) goes in editable, so .venv/bin/cpctl runs
# this checkout's code; its dependencies are in requirements.txt already (--no-deps). Rerunning is harmless.
$(VENV)/.installed: requirements.txt cpctl/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e ./cpctl
	touch $@

install: $(VENV)/.installed

up: install
	$(PY) -m controlplane.devstack

# Browser tests drive Debian's chromium; install it when we can (root + apt).
browser-deps:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-dejavu-core) >/dev/null; \
	fi

# promtool checks deploy/prometheus's alert rules and the Grafana dashboards' queries (Debian's
# prometheus package; its server is not started); install it when we can (root + apt).
monitor-deps:
	@if ! command -v promtool >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus) >/dev/null; \
	fi

# stress-ng loads the CPUs for `make flake`; install it when we can (root + apt).
stress-deps:
	@if ! command -v stress-ng >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng) >/dev/null; \
	fi

# The whole suite as lanes run at once, each on its own engines (tests/lanes.py; docs/testing.md):
# the quality gates, the quick tests, the live and heavy scenarios, the browser tests, and with
# TEST_ENGINES=embedded,machine the quick and live tests again on this machine's PostgreSQL and Redis.
# LANES=quick,browser picks lanes; PYTEST_ARGS go to every pytest lane.
LANES ?=
test: install browser-deps monitor-deps
	$(PY) -m tests.lanes --lanes "$(LANES)" -- $(PYTEST_ARGS)

# The inner loop: the quick tests alone (no live stack, browser or heavy scenario).
test-quick: install
	$(PY) -m tests.lanes --lanes quick --modes embedded -- $(PYTEST_ARGS)

# Rerun tests N times under `stress-ng --cpu 2` and count: make flake TESTS="tests/x.py::test_y" N=5
TESTS ?=
N ?= 5
flake: install browser-deps stress-deps
	$(PY) -m tests.flake -n $(N) $(TESTS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

typecheck: install
	$(PY) -m controlplane.engines run -- $(VENV)/bin/mypy .

checks: install
	$(PY) -m controlplane.engines run -- sh -c '$(PY) manage.py check && \
		$(PY) manage.py makemigrations --check --dry-run && \
		$(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null'

clean:
	rm -rf $(VENV) var
