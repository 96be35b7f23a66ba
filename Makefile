# The two commands a new user needs are `make demo` and `make test`.
# Everything runs from .venv, built with a Python >= 3.12 (Django 6.1 needs it).

VENV        := .venv
PY          := $(VENV)/bin/python
PYTHON_FIND := bin/find-python
SRC         := later_django tests example_project bench chaos

.PHONY: venv test test-quick test-slow test-mariadb lint format demo clean chaos chaos-mariadb chaos-long chaos-soak \
	build matrix

$(VENV)/.installed: pyproject.toml
	@interp=$$($(PYTHON_FIND)) || exit 1; \
	  echo "Creating $(VENV) with $$interp"; \
	  "$$interp" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,postgres]'
	@if pkg-config --exists libmariadb 2>/dev/null || pkg-config --exists mysqlclient 2>/dev/null; then \
	  $(PY) -m pip install --quiet -e '.[mysql]'; \
	else \
	  echo "NOTE: no MariaDB/MySQL client headers (apt-get install pkg-config libmariadb-dev):"; \
	  echo "      the mysql extra is not installed and the MariaDB schema tests will be skipped."; \
	fi
	@touch $@

venv: $(VENV)/.installed

# Lint, then the whole suite once: every storage test is parametrized over SQLite
# and PostgreSQL; tests/conftest.py prints both databases in the header and the
# cases run on each at the end (pytest's own summary stays the last line).
# TEST_PROCESSES pytest-xdist workers (each with its own test databases), a test file
# to a worker, the slow files first (tests/lanes.py); the 25 slowest tests are printed
# so growth shows. Serially: make test TEST_PROCESSES=0 (docs/testing.md).
TEST_PROCESSES ?= 4
PYTEST_XDIST   = -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder

test: lint
	$(PY) -m pytest $(PYTEST_XDIST) --durations=25

# The lanes (tests/lanes.py): the inner loop without the real processes, the browser
# and the big seeds (about a third of the time), and those alone.
test-quick: venv
	$(PY) -m pytest $(PYTEST_XDIST) -m "not slow"

test-slow: venv
	$(PY) -m pytest $(PYTEST_XDIST) -m slow

# The MariaDB lane (issue 36): every test parametrized over the databases, on MariaDB
# alone (LATER_TEST_MARIADB_URL, default mysql://root@127.0.0.1:3306/test); the other
# tests ran in `make test`. .ci/run makes it mandatory (docs/testing.md).
test-mariadb: venv
	LATER_TEST_LANE=mariadb $(PY) -m pytest $(PYTEST_XDIST)

# ruff, then the shape: import-linter's contracts (one-way layers, no circles, core free
# of Django, vendor libraries only in the drivers) and mypy (strict on core/, engine/ and
# the storage ports); both read their settings from pyproject.toml.
lint: venv
	$(PY) -m ruff check $(SRC)
	$(PY) -m ruff format --check $(SRC)
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

format: venv
	$(PY) -m ruff check --fix $(SRC)
	$(PY) -m ruff format $(SRC)

# The sdist and the wheel in dist/, checked as a package index checks them (twine check);
# tests/packaging checks their contents and installs the wheel (docs/testing.md).
build: venv
	rm -rf dist
	$(PY) -m build --outdir dist
	$(PY) -m twine check --strict dist/*

# The oldest and newest corners of the supported versions, each in its own .venv-<corner>:
# Django 5.2 (with django-tasks) on Python 3.12 and Django 6.1 on Python 3.13. Any corner:
# bin/matrix dj60-py313; the whole matrix: tox (tox.ini). See docs/testing.md.
MATRIX_CORNERS ?= dj52-py312 dj61-py313

matrix:
	@for corner in $(MATRIX_CORNERS); do bin/matrix $$corner || exit 1; done

# The black-box fault suite (docs/reliability.md): real workers, SQLite and PostgreSQL
# (throwaway clusters for restarts, bloat and connection limits). `chaos` is the short
# profile (under ~8 minutes), `chaos-long` several times longer, `chaos-soak` a soak of
# CHAOS_MINUTES (default 30). One cell: .venv/bin/python -m chaos --cell sigkill --db sqlite
CHAOS_MINUTES ?= 30

chaos: venv
	$(PY) -m chaos --profile short

# The short profile's cells on MariaDB (KILL CONNECTION, a throwaway mariadbd restarted,
# sigkill, fan-in, poison, max connections, the history list); CHAOS_CELLS narrows it
# ("--cell mariadb_kill --cell mariadb_restart"), as .ci/run does (docs/reliability.md).
CHAOS_CELLS ?=
chaos-mariadb: venv
	$(PY) -m chaos --profile short --db mariadb $(CHAOS_CELLS)

chaos-long: venv
	$(PY) -m chaos --profile long

chaos-soak: venv
	$(PY) -m chaos --profile soak --minutes $(CHAOS_MINUTES)

# The example project on SQLite: one worker and the dev server on 127.0.0.1 (Ctrl-C stops
# both). Another port or database: make demo DEMO_PORT=8001 DEMO_DATABASE=/tmp/demo.sqlite3
demo: venv
	@bin/demo

clean:
	rm -rf $(VENV) .venv-dj* .pytest_cache .ruff_cache test-output dist
