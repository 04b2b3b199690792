# The README's two commands: `make quickstart` and `make test`. Both set up the venv first.
VENV ?= .venv
BIN := $(VENV)/bin

# pytest-xdist workers (the suite's process-heavy tests are grouped so that two workers suit 2 cores)
TEST_WORKERS ?= 2
PYTEST := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup -q -ra
# The docs site (mkdocs.yml, docs/): --strict turns every warning (a broken link or anchor, a page missing from
# the nav) into a failure. Never add --quiet: MkDocs 1.6 then counts no warnings and passes a broken link.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean
# The static checks, as a recipe fragment: each runs even when one before it failed, and a failure sets $$status.
# lint-imports: the package layers; .ci/import_cycles.py: no import cycle between modules (JS included) nor between
# subpackages (but those its allow-list names, with why);
# ruff: the lint rules and the formatting of pyproject.toml's [tool.ruff]; mypy: the static types ([tool.mypy]).
LINT := $(BIN)/lint-imports || status=$$?; \
	$(BIN)/python .ci/import_cycles.py || status=$$?; \
	$(BIN)/ruff check . || status=$$?; \
	$(BIN)/ruff format --check . || status=$$?; \
	$(BIN)/mypy || status=$$?;

.PHONY: setup quickstart test test-fast test-repeat lint docs notebooks gpu-wheels clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch is pinned here, not in the package: on this CPU machine pip takes the local CPU wheel,
	# on a GPU machine the same pin installs the CUDA build. The editable install is a path entry
	# (compat mode), so a package added to the tree later is importable without reinstalling.
	$(BIN)/pip install -q torch==2.13.0 -e '.[dev]' --config-settings editable_mode=compat
	touch $@

quickstart: setup
	$(BIN)/scalelab quickstart

# The package layers (pyproject.toml [tool.importlinter], docs/ARCHITECTURE.md), ruff's lint rules and its
# formatting ([tool.ruff]) are checked first, then the docs site is built with --strict (a broken link or
# anchor fails; built into a temporary folder); the tests run either way, and the target fails if any failed.
# docs/testing.md: the suite's layout (tests/unit, tests/integration), its time, and the long tests.
test: setup
	@status=0; $(LINT) \
	site=$$(mktemp -d); $(MKDOCS) --site-dir $$site || status=$$?; rm -rf $$site; \
	$(PYTEST) --durations=25 || status=$$?; \
	exit $$status

# Unit tests only: no process started, no CLI, no training beyond a few in-process steps.
test-fast: setup
	@status=0; $(LINT) \
	$(PYTEST) tests/unit || status=$$?; \
	exit $$status

# One test many times, both workers busy (flushes out races): make test-repeat T=tests/...::test_x N=20
N ?= 20
test-repeat: setup
	$(PYTEST) --count $(N) $(T)

lint: setup
	@status=0; $(LINT) exit $$status

# The documentation site into site/ (open site/index.html, or serve it: .venv/bin/mkdocs serve).
docs: setup
	$(MKDOCS) --site-dir site

# Re-execute the notebooks in place and save them with their outputs (docs/notebooks.md): each opens the main
# job's output when quickstart/ exists, else the bundled data or its own study (trained the first time, cached
# under notebooks/.studies). One notebook: make notebooks NB=3_batch_size_and_lr
NB ?=
notebooks: setup
	MPLBACKEND=Agg HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python notebooks/execute.py $(NB)

# What an air-gapped GPU node's image lacks (DeepSpeed with ops unbuilt, pydantic, lm-eval, ...) as wheels for
# its Python, plus a small prepared gutenberg100 set, in gpu_wheels/ (ignored; < 64 MiB with the tree): carry it
# and run benchmarks/gpu_check.py there (docs/benchmarks.md, "The GPU check"). Needs the package index.
GPU_PYTHON ?= 3.12
gpu-wheels: setup
	$(BIN)/python benchmarks/gpu_wheels.py --out gpu_wheels --python-version $(GPU_PYTHON)

clean:
	rm -rf $(VENV) runs data fits quickstart
