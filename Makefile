# Two commands on a fresh machine: `make run` (the app) and `make test` (the tests).
# Both create the virtual environment from requirements.lock on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench lock clean

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/streamlit run app.py

# Lint, types, then the tests: a lint finding or a type error fails like a failing test.
test: $(STAMP)
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

# Re-pin every dependency after changing pyproject.toml.
lock:
	rm -rf .lockenv && $(PYTHON) -m venv .lockenv
	.lockenv/bin/pip install --quiet --upgrade pip
	.lockenv/bin/pip install --quiet -e '.[test]'
	.lockenv/bin/pip freeze --exclude-editable | grep -v '^verbatim' > requirements.lock
	rm -rf .lockenv

clean:
	rm -rf $(VENV)
