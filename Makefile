# Bootstraps .venv from the locks on a machine that has only python3 and make.
# requirements.lock pins the runtime (what `pip install office-scheduler` needs);
# requirements-dev.lock pins the same runtime plus the test, lint and bench tools.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_FLAGS ?= --exit-when-idle

.PHONY: demo test lint typecheck pytest bench clean venv test-real-agents dist

venv: $(STAMP)

# uv installs the locked set in seconds (pip takes about a minute of CPU); where uv cannot be
# had, pip installs the same pinned set. Bytecode is compiled at install time, the project's
# own too: where PYTHONDONTWRITEBYTECODE is set (as on CI machines) Python never caches it,
# and every process (each test worker, each `office serve` a test starts) would compile
# every module it imports again (3.4 s → 7 s to import the server).
$(STAMP): requirements.lock requirements-dev.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	if $(BIN)/python -m pip install --quiet uv==0.13.9; then \
		$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode -r requirements-dev.lock && \
		$(BIN)/uv pip install --python $(BIN)/python --quiet --no-deps -e .; \
	else \
		$(BIN)/python -m pip install --quiet -r requirements-dev.lock && \
		$(BIN)/python -m pip install --quiet --no-deps -e .; \
	fi
	$(BIN)/python -m compileall -q src tests bench
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/office demo $(DEMO_FLAGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy src tests

# Three workers on two cores: many tests wait on agent subprocesses and servers, so a third
# worker keeps both cores busy (about 4-6 minutes for the parallel part on a quick machine, 10 on a slow one). Work stealing
# keeps all three busy to the end when a slow test (the demo, the bench smoke) comes late.
# The `serial` tests (chaos, scale-out) start many processes for minutes; they run after
# the others, one after the other, in one pytest process; -rP shows their figures (the
# scale-out test's pace: its goal is `make bench`'s, the test asserts only what holds at
# any pace). The PostgreSQL restart test (`pg_restart`) would cut every other test's
# connections: it runs alone, last.
pytest: $(STAMP)
	$(BIN)/pytest -q -n 3 --dist worksteal -m "not real_agents and not serial"
	$(BIN)/pytest -q -rP -m "serial and not pg_restart"
	$(BIN)/pytest -q -m pg_restart

# Opt-in: installs @zed-industries/claude-code-acp from npm and checks the ACP handshake.
test-real-agents: $(STAMP)
	$(BIN)/pytest -q -m real_agents tests

# All benchmarks, about 15 minutes (the scale-out one runs four servers for five); BENCH_ARGS="--only claim --claim-sizes 10000" etc.
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

test: lint typecheck pytest

# A wheel and an sdist in dist/, carrying the demo office and the sample agent:
# `pipx install dist/office_scheduler-*.whl && office demo` needs nothing but Python.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/uv build --quiet --out-dir dist

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache dist
