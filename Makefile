# Two commands: `make up` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: up test install lint typecheck checks browser-deps clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

install: $(VENV)/.installed

up: install
	$(PY) -m controlplane.devstack

# Browser tests drive Debian's chromium; install it when we can (root + apt).
browser-deps:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-dejavu-core) >/dev/null; \
	fi

# Tests close every connection at the end of each request/thread (no pooling),
# so the test database can be dropped at the end.
test: install browser-deps
	DB_POOL_MAX_SIZE=0 DB_CONN_MAX_AGE=0 $(PY) -m controlplane.engines run -- $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .

typecheck: install
	$(PY) -m controlplane.engines run -- $(VENV)/bin/mypy .

checks: install
	$(PY) -m controlplane.engines run -- sh -c '$(PY) manage.py check && \
		$(PY) manage.py makemigrations --check --dry-run && \
		$(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null'

clean:
	rm -rf $(VENV) var
