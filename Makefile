# The README's two commands: `make quickstart` and `make test`. Both set up the venv first.
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup quickstart test test-fast lint clean

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

# The package layers (pyproject.toml [tool.importlinter], docs/ARCHITECTURE.md) are checked first;
# the tests run either way, and the target fails if either failed.
test: setup
	@status=0; $(BIN)/lint-imports || status=$$?; \
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/pytest -q -ra --durations=25 || status=$$?; \
	exit $$status

test-fast: setup
	@status=0; $(BIN)/lint-imports || status=$$?; \
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/pytest -q -ra -m "not slow" || status=$$?; \
	exit $$status

lint: setup
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) runs data fits quickstart
