# rag-site: `make run` starts the whole product, `make test` runs `make lint`
# (ruff lint, ruff format check, mypy with django-stubs) and then the tests
# (`make test-fast`: the unit tests only, in seconds, no lint).
# Both create .venv on first use; later calls install nothing unless
# pyproject.toml, package.json or package-lock.json changed (the stamp file is
# keyed on all three).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml package.json package-lock.json | sha256sum | cut -c1-16)
# Quiet installs: no version check, no audit. npm installs exactly what
# package-lock.json pins (and fails if it no longer matches package.json).
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
NPM := npm ci --no-audit --no-fund --silent

.PHONY: install run lint test test-fast browser bench eval clean-var settings-docs

install: $(STAMP)

$(STAMP): pyproject.toml package.json package-lock.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing torch==2.13.0 (CPU build) ..."
	@$(PIP) torch==2.13.0
	@echo "installing rag-site and its dependencies ..."
	@$(PIP) -e '.[dev]'
	@echo "installing front-end packages (htmx) ..."
	@$(NPM)
	@rm -f $(VENV)/.installed-*
	@touch $@

run: install
	$(PY) manage.py rag_run

# mypy imports rag_site.settings (django-stubs), which reads these at import;
# throwaway values that point at closed ports, so no server is needed.
LINT_ENV := SECRET_KEY=lint-only-not-a-secret DATABASE_URL=postgres://unused@127.0.0.1:1/unused \
	REDIS_URL=redis://127.0.0.1:1/0
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(LINT_ENV) $(VENV)/bin/mypy

test: install browser lint
	$(VENV)/bin/pytest

# The inner loop: tests marked `unit` and not `slow` (so not the ONNX-against-
# PyTorch comparisons or the documentation crawl), without the embedded
# PostgreSQL and Valkey (rag_site/testing.py); a test that needs the database
# fails and names the mark. `make test` (what CI runs) still runs everything.
test-fast: install
	RAG_TEST_SERVERS=0 $(VENV)/bin/pytest -m "unit and not slow"

# Headless Chromium for the browser tests, and Python's HTML documentation
# (python3-doc) the web crawler's test serves as a real site, from Debian's
# packages (root only; otherwise those tests are skipped with a reason).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && echo "installing chromium for the browser tests ..." \
	  && { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "chromium is not installed: the browser tests will be skipped"; }
	@[ -d /usr/share/doc/python3/html ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && echo "installing python3-doc for the web crawler's test ..." \
	  && { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-doc >/dev/null; } \
	  || echo "python3-doc is not installed: the web crawler's documentation test will be skipped"; }
	@command -v rg >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && echo "installing ripgrep for grep's comparison (tests and rag_bench grep) ..." \
	  && { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ripgrep >/dev/null; } \
	  || echo "ripgrep is not installed: grep's comparison with it will be skipped"; }

# Speed, measured by the project's own command (numbers for the notes).
DJANGO_DIR = $$($(PY) -c 'import django, os; print(os.path.dirname(django.__file__))')
bench: install
	$(PY) manage.py rag_bench chunk "$(DJANGO_DIR)"
	$(PY) manage.py rag_bench index "$(DJANGO_DIR)/contrib/admin"

# Retrieval quality on the public benchmark in ../shared/eval (see docs/quality.md).
EVAL_DIR ?= ../shared/eval
# Code sets made by ../shared/eval/make_code_eval.py from installed packages (docstring sentences as queries): click
# is the development set, the others are held out (never tuned on).
CODE_SETS = click jinja2 kombu markdown_it
# Developer questions written by reading an installed package's code (measure/questions/PACKAGE.jsonl), asked of a
# copy of it (translations left out): celery is issue 42's development set, django is held out.
QUESTION_SETS = celery django
eval: install
	$(PY) manage.py rag_eval $(EVAL_DIR)/msmarco-5k --keep
	@for set in $(CODE_SETS); do \
		test -f var/eval/$$set/queries.jsonl || $(PY) $(EVAL_DIR)/make_code_eval.py $$set var/eval/$$set || exit 1; \
		echo "rag_eval --code var/eval/$$set/queries.jsonl --root var/eval/$$set/src --keep"; \
		$(PY) manage.py rag_eval --code var/eval/$$set/queries.jsonl --root var/eval/$$set/src --keep || exit 1; \
	done
	@for pkg in $(QUESTION_SETS); do \
		test -d var/eval/$$pkg/src/$$pkg || { mkdir -p var/eval/$$pkg/src && \
		cp -r "$$($(PY) -c "import $$pkg, os; print(os.path.dirname($$pkg.__file__))")" var/eval/$$pkg/src/ && \
		find var/eval/$$pkg/src \( -name locale -o -name __pycache__ \) -type d -prune -exec rm -rf {} + ; }; \
		echo "rag_eval --code measure/questions/$$pkg.jsonl --root var/eval/$$pkg/src --keep"; \
		$(PY) manage.py rag_eval --code measure/questions/$$pkg.jsonl --root var/eval/$$pkg/src --keep || exit 1; \
	done

# Writes docs/configuration.md's settings reference and .env.example from
# rag_site/settings_registry.py (reads no settings: no database, no environment).
settings-docs: install
	$(PY) -m rag_site.settings_reference

# Removes the embedded PostgreSQL and Redis data of `make run` (var/).
clean-var:
	rm -rf var
