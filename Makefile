# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := dev,minilm,model2vec,ray,bench,langchain,llamaindex,haystack,datasets

.PHONY: venv demo test test-slow lint bench bench-quick clean chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# torch first, pinned: on these machines it is a local CPU build; unpinned it pulls CUDA.
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[$(EXTRAS)]'
	# MiniLM's one-time ONNX export (to the user cache dir), so no first question waits for it.
	HF_HUB_OFFLINE=1 $(BIN)/python -m arrowdedup.embed.minilm_onnx
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check arrowdedup tests benchmarks
	$(BIN)/mypy

# The HTML report test renders in headless Chromium; install it only when it is missing.
chromium:
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y --no-install-recommends chromium)

test: lint chromium
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

test-slow: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m slow

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m arrowdedup.demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks run

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks run --quick

clean:
	rm -rf $(VENV) .demo .pytest_cache .mypy_cache .ruff_cache
