# trnplan: the two commands a new user needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is pinned to the CPU build on purpose: any other torch request pulls a multi-GB CUDA build
TORCH  ?= torch==2.13.0

.PHONY: setup demo test test-fast lint docs wheel-check bench bench-suite bench-examples bench-distributed bench-warm-start accuracy clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e '.[test,bench,fftw,mkl,dev,plot,docs]'
	touch $@

demo: setup  ## plan, run, explain and verify a real transform
	$(BIN)/trnplan plan 4096 --batch 64 --explain --verify
	$(BIN)/trnplan plan 256x256 --kind r2c --batch 8 --verify

# pytest-xdist workers for `make test`: 2 fits this project's 2-core machines (3 min 24 s there with
# coverage, against 4 min 31 s for the old suite in one process without it); more on a bigger machine
TEST_WORKERS ?= 2

# The tests write bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE=1 on
# the project's machines): the suite starts many fresh interpreters that import trnplan (first-run
# scripts, distributed ranks, spawned workers, cross-process caches), and without
# .pyc files each compiled every module again, and each xdist worker re-did pytest's assertion
# rewriting. make test on the quiet 2-core machine, 2026-11-27: 5 min 16 s (user 9 min 13 s) with
# the variable set, 4 min 20 s (user 7 min 37 s) without it, one run each, same code. The .pyc
# files go to __pycache__/, which git ignores.
NO_PYC_ENV = env -u PYTHONDONTWRITEBYTECODE

test: setup  ## the whole test suite in TEST_WORKERS processes, with trnplan/'s branch coverage (fails under pyproject's fail_under)
	$(NO_PYC_ENV) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --cov --cov-report=term

test-fast: setup  ## for development: the suite without the tests marked slow, no coverage
	$(NO_PYC_ENV) $(BIN)/python -m pytest -q -m "not slow"

lint: setup  ## ruff (trnplan, tests, bench, tools, examples), the import-layer contract (pyproject.toml), no cycles, function length, the settings table, mypy of the public API
	$(BIN)/ruff check trnplan tests bench tools examples
	PYTHONPATH=. $(BIN)/lint-imports
	PYTHONPATH=. $(BIN)/python tools/check_code.py
	PYTHONPATH=. $(BIN)/python tools/check_settings.py  # docs/user-guide.md's settings table is config.SETTING_DOCS
	PYTHONPATH=. $(BIN)/mypy --strict --follow-imports=silent tools/typecheck/usage.py  # the public API's annotations

docs: setup  ## the API reference from the docstrings (Sphinx, warnings are errors) into build/docs-api
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs/api build/docs-api

wheel-check:  ## build the wheel, install it in a fresh venv, plan and run from outside the checkout
	PYTHON=$(PYTHON) TORCH="$(TORCH)" bash tools/wheel_check.sh

bench: setup  ## the solver benchmark; rewrites the tables in docs/benchmarks.md
	$(BIN)/python bench/bench_solvers.py --markdown docs/benchmarks.md

bench-suite: setup  ## the benchmark suite (seed grid × libraries, threads 1 and 2); rewrites its section of docs/benchmarks.md
	$(BIN)/trnplan bench --docs docs/benchmarks.md

bench-examples: setup  ## the three examples at a real size, trnplan vs torch.fft; rewrites docs/examples.md's timing table
	$(BIN)/python bench/examples.py --markdown docs/examples.md

bench-warm-start: setup  ## a fresh process's plan_many on a warm cache vs cold (issue 19 item 7); rewrites docs/cache.md's warm_start section
	$(BIN)/python bench/warm_start.py --markdown docs/cache.md

bench-distributed: setup  ## 1 vs 2 gloo ranks: strong and weak scaling; rewrites docs/distributed.md's table
	$(BIN)/python bench/distributed.py --markdown docs/distributed.md

.PHONY: bench-leaves
bench-leaves: setup  ## library leaves: per-call overhead (plan.execute - leaf, leaf - library) and threads (pyFFTW/scipy/MKL 1 vs 2, torch pool hot/cold)
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/threads.py

accuracy: setup  ## measured error vs the accuracy model, per solver and size
	$(BIN)/python bench/accuracy.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache bench/out .coverage
