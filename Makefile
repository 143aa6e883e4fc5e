# Two commands for a fresh machine (only Python 3.11 needed):
#   make run    set everything up, then run the default job
#   make test   set everything up, then run the tests
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup run test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch's CPU build first, on its own: anything that pulls torch otherwise fetches a multi-GB CUDA build
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev,ray]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(PY) train.py

test: setup
	$(PY) -m pytest -n 2

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy envs heuristics agents evaluate.py demos.py train.py

bench: setup
	$(PY) benchmarks/sim_speed.py

clean:
	rm -rf $(VENV) results
