# Two commands on a fresh machine: `make` (install + main job) and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.installed

.PHONY: all install test check lint bench golden demo clean

all: install book demo

# The venv is rebuilt only when the dependency lists change.
$(STAMP): requirements.txt requirements-no-deps.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements.txt 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	$(PIP) install --no-deps -r requirements-no-deps.txt 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	$(PIP) install --no-deps -e . 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	@# (not `import ngshare_exchange`: importing it reads $$USER or $$JUPYTERHUB_USER, and CI may have neither)
	$(PY) -c "import numpy, solutions, autograder; from importlib.metadata import version; version('ngshare-exchange')"
	touch $@

# Every kernel of the venv reads this IPython configuration (it silences ipykernel's "running over
# TCP without encryption" warning only; the file says why that is safe here).
KERNEL_CONFIG := $(VENV)/etc/ipython/ipython_kernel_config.py
$(KERNEL_CONFIG): autograder/templates/kernel/ipython_kernel_config.py $(STAMP)
	mkdir -p $(dir $@) && cp $< $@

install: $(STAMP) $(KERNEL_CONFIG)

# The main job's last step: the engine's worked examples, then the instructor's whole loop
# (release -> collect -> grade -> feedback -> report) on bundled synthetic submissions, in a
# scratch course under _build/grading-demo so the real gradebook is never touched.
demo: install bubblewrap
	$(PY) -m solutions.examples.demo
	rm -rf _build/grading-demo
	$(PY) -m autograder demo a02_broadcasting --out _build/grading-demo

# -n auto: a worker per core the machine has (pytest-xdist counts physical cores), so a contributor's
# 8-core laptop runs four times the workers of the 2-core machine the figures below were measured on.
# --durations: the slowest tests, printed at the end of every run (where the suite's time goes).
# book: the hub of tests/deploy serves the book `make` builds (deploy/hub.py install copies it), and
# the first-hour test opens a chapter there from the notebook's link.
test: install ngshare chromium axe postgresql bubblewrap book
	$(PY) -m pytest -q -n auto --dist loadgroup --durations=30

# The contributor's loop: lint, then every test not marked slow (no book build, browser, training,
# nbgrader end-to-end run, sandbox time-out, or judging of every exercise: the first of each
# assignment is judged). Measured on 2 cores (2026-11-29, load 0.4-2, mypy's cache warm): 46-50 s, of which
# the tests 42-46 s; the first run from a clean clone is about 116 s, while mypy builds its cache (36 s).
# `make test` is still what CI runs.
check: lint bubblewrap
	$(PY) -m pytest -q -n auto --dist loadgroup -m "not slow"

# ruff (pycodestyle, pyflakes, bugbear, isort rules) over the repository, mypy over the engine and the grader;
# both configured in pyproject.toml.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The book, readable offline at _build/html/index.html. Executed notebooks are cached in
# _build/.jupyter_cache: a rebuild runs only the chapters whose code changed.
.PHONY: book ngshare chromium axe postgresql bubblewrap
book: install
	$(VENV)/bin/jupyter-book build . -q
	@echo "The book: open _build/html/index.html. For search with context, serve it:"
	@echo "  python3 -m http.server -d _build/html   # then open http://localhost:8000"

# ngshare and the JupyterHub it runs on, in an environment of their own (requirements-ngshare.txt says why):
# tests/support/ngshare.py starts them for the tests that play a Kubernetes class (tests/deploy/test_ngshare_exchange.py).
# Rebuilt only when its list changes (a stamp); about 19 s from nothing.
NGSHARE_VENV  := .venv-ngshare
NGSHARE_STAMP := $(NGSHARE_VENV)/.installed
ngshare: $(NGSHARE_STAMP)
$(NGSHARE_STAMP): requirements-ngshare.txt
	test -x $(NGSHARE_VENV)/bin/python || $(PYTHON) -m venv $(NGSHARE_VENV)
	$(NGSHARE_VENV)/bin/python -m pip --disable-pip-version-check -q install -r requirements-ngshare.txt 2>&1 \
		| grep -v "is ignored: it is neither a file nor a directory" || true
	$(NGSHARE_VENV)/bin/python -c "import ngshare.ngshare, jupyterhub"
	touch $@

# Headless Chromium for the book's browser test (tests/book/test_book.py). CI starts from a clean
# Debian machine, so install it when it is missing (needs root).
chromium:
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# axe-core, the accessibility engine the browser tests run in each page (tests/support/axe.py), at
# the version package-lock.json pins, into node_modules/ (not in git). Only its axe.min.js is used,
# evaluated in Chromium over the DevTools protocol: no WebDriver, no browser download, no install
# scripts. npm comes from Debian when it is missing (needs root).
axe: node_modules/axe-core/axe.min.js
node_modules/axe-core/axe.min.js: package.json package-lock.json
	command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm)
	npm ci --ignore-scripts --no-audit --no-fund
	touch $@

# bubblewrap: the sandbox that student code runs in while it is graded (autograder/judge/session.py).
bubblewrap:
	command -v bwrap >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap)

# A PostgreSQL server for the test of `--db postgresql://...` (tests/grader/test_autograder_postgres.py
# starts a throwaway one of its own; the package's own cluster is not used).
postgresql:
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql)

# Speed, each library at its best (benchmarks/fair.py: blocks, never interleaved; best of 1 or 2
# threads; minimum over rounds). With the oracle venv from `make golden` present, PyTorch is timed
# next to the engine; without it, the benchmarks say so and print the engine's numbers.
BENCH_PY = $(if $(wildcard .venv-golden/bin/python),.venv-golden/bin/python,$(PY))
bench: install
	@$(BENCH_PY) -c "import torch" 2>/dev/null || echo "PyTorch is absent ($(BENCH_PY)): engine numbers only; 'make golden' installs the oracle"
	$(BENCH_PY) benchmarks/bench_graph.py
	$(BENCH_PY) benchmarks/bench_conv.py
	$(BENCH_PY) benchmarks/bench_train.py
	$(BENCH_PY) benchmarks/bench_attention.py
	@# The training run is the engine's alone (its figures need matplotlib, which the oracle venv lacks).
	$(PY) -m solutions.training --model cnn --no-progress --out /tmp/bench-train-digits > /tmp/bench-train-digits.log
	@grep -E "^CNN|wall time" /tmp/bench-train-digits.log

# A class at once on the hub of deploy/hub.py (issue 33): N students stepped through the lecture, the lab
# and the deadline at their full windows (2, 10, 2 minutes), stopping at the first N that fails the bar
# (an error, a submission lost or doubled, p95 submit >= 5 s). As root, loopback only; it makes and removes
# its own system users and builds the hub's environment under /opt/autograd-hub-h33 the first time. About
# 20 minutes per N: never part of `make test` (tests/deploy/test_class_load.py is its one-minute version).
.PHONY: bench-class
bench-class: install
	$(PY) benchmarks/bench_class.py --sweep 10,20,40,60 --json _build/bench-class.json

# Regenerate the committed PyTorch golden fixtures. Torch lives in its own venv so that
# nothing in the course ever depends on it (torch==2.13.0 is the CPU wheel on local disk).
golden:
	test -x .venv-golden/bin/python || $(PYTHON) -m venv .venv-golden
	.venv-golden/bin/pip -q install "torch==2.13.0" "numpy>=2.0" "scikit-learn>=1.4" tqdm 2>&1 | grep -v "is ignored" || true
	.venv-golden/bin/pip -q install --no-deps -e . 2>&1 | grep -v "is ignored" || true
	.venv-golden/bin/python tests/golden/make_golden.py

clean:
	rm -rf $(VENV) $(NGSHARE_VENV) node_modules _build build .pytest_cache .hypothesis .mypy_cache .ruff_cache
