# Every target sets itself up: a fresh clone needs only python3 (>= 3.11) and make.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=
# pip keeps no cache of what it installs: the set-up's wheels (torch's CPU build among them)
# would otherwise take their size again on a machine whose disk may be short
export PIP_NO_CACHE_DIR := 1

.PHONY: test demo bench lint browser clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, pinned: the oracle tests need it (on the CPU; the CPU build where the
	# index serves it), and installing it before anything else settles its version.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	# An editable install compiles nothing of the project: compile it now, so that the
	# first command after set-up (`propose` answers in about 1.5 s, most of it
	# importing scikit-learn and pandas) does not pay for it
	$(PY) -m compileall -q aicf_induct warehouse api
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check aicf_induct warehouse api tests benchmarks
	$(VENV)/bin/mypy aicf_induct warehouse api

# The dashboard's tests drive a headless chromium through chromedriver (selenium): Debian's
# packages, installed once (a no-op when both are on PATH); root, or sudo, for apt-get.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	    chromium chromium-driver; }

# pytest-xdist: one worker per core, at most 4 (the suite is mostly single-threaded tests that
# wait on subprocesses, servers and a browser), and one BLAS and OpenMP thread in each: the
# workers fill the cores already, and a pool of spinning threads per process made a
# scikit-learn test 17 times slower beside a worker training (on 2 cores the suite took 938 s,
# 855 s so). `PYTEST_ARGS="-n 0"` runs it in one process.
test: lint browser
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
	  $(VENV)/bin/pytest -q -n auto --maxprocesses 4 -m "not cuda" $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m aicf_induct.demo

bench: $(STAMP)
	$(PY) benchmarks/step_cpu.py

clean-venv:
	rm -rf $(VENV)
